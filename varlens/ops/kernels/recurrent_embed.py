"""Compiled gather and scatter of the LSTM fed by an embedding (varlens/ops/nn/rnn.py,
``LSTMEmbedLayerFunction``): every step's input projection is a column of P = W_ih E^T picked
by the token, and the backward sums the pre-activation cotangents by token.  NumPy does each
with a take / sort + reduceat over (4H, T*B) floats (measured 0.45 and 0.85 ms for the
char-LSTM's 4H = 512, T*B = 1024); these loops read the small table or write the small sum
(4H x V floats, in cache) in place.  Imported only when numba is on (``usable``)."""
from __future__ import annotations

import numba as nb

from varlens.ops.kernels import jit

kl = jit(nb)


@kl
def gather_columns(P, idx, act):
    """act[t, g, b] = P[g, idx[t, b]]  (P (G, V), idx (T, B) int, act (T, G, B))."""
    T, G, B = act.shape
    for t in range(T):
        for g in range(G):
            row = P[g]
            for b in range(B):
                act[t, g, b] = row[idx[t, b]]


@kl
def scatter_columns(dA, flat, S):
    """S[g, flat[j]] += dA[g, j]  (dA (G, N), flat (N,) int, S (G, V))."""
    G, N = dA.shape
    for g in range(G):
        row = dA[g]
        srow = S[g]
        for j in range(N):
            srow[flat[j]] += row[j]

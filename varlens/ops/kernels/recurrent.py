"""Fused LSTM time steps: one compiled pass over a step's (H, B) blocks each way.

The fused LSTM layer (varlens/ops/nn/rnn.py, ``LSTMLayerFunction``) does one GEMM per time
step and, between GEMMs, the gate nonlinearities and the cell update (forward) or the
pre-activation cotangents (backward).  NumPy needs about nine passes per step for the first
and, counting the derivative factors it forms for all steps at once, about twenty passes
over (T, 4H, B) and (H, B) blocks for the second; the kernels here do each step in one pass
with the float32 ``exp_nonpos`` of the package (sigmoid from one e^-|z|, tanh from
e^(-2|x|) - 1 with a Taylor branch near 0 where that would cancel), and compute the
derivative factors on the fly from the cached activations.  The layer op's NumPy code is the
fallback (numba missing or off, float64, the CUDA device, masks); tests/test_rnn_kernels.py
holds the two paths to each other and to PyTorch.

The buffers are the layer op's own (C-contiguous float32): ``act`` (T, 4H, B) with the gate
blocks o, i, f, g (sigmoid rows holding half their pre-activation), ``cs`` (T+1, H, B) the
cell states, ``tc`` (T, H, B) tanh of the new cell states, ``xh`` (I+H+1, T+1, B) whose rows
I.. hold the hidden states, ``dh_all`` (T+1, H, B) the hidden-state cotangents, ``da``
(T, 4H, B) the pre-activation cotangents in PyTorch's gate order (i, f, g, o).
"""
from __future__ import annotations

from varlens.ops.kernels import usable

_K = {}


def lstm_step_kernels(*buffers):
    """``(forward_step, backward_step)`` compiled kernels when they apply to these buffers
    (numba on, every buffer a float32 C-contiguous host array), else None.

    ``forward_step(act, cs, tc, xh, t, cr, cw, i0, hc)``: activates act[t] in place,
    cs[cw] = f cs[cr] + i g, tc[t] = tanh cs[cw], xh[i0:i0+H, hc] = o tc[t].
    ``backward_step(act, tc, cs, cp, dh_all, dhrow, hw, dc, da, t)``: with
    dh = dh_all[dhrow] + hw, writes da[t] and replaces dc by the cotangent of cs[cp]."""
    if not usable(*buffers):
        return None
    if not _K:
        from varlens.ops.kernels import compiled as c
        _K.update(fwd=c.lstm_fwd_step, bwd=c.lstm_bwd_step)
    return _K["fwd"], _K["bwd"]

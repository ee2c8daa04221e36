"""Positional encodings: the sinusoidal table's formula and RoPE's relative-position property."""
import math

import numpy as np

import varlens as vl
from varlens.autograd import gradcheck
from varlens.nn.positional import apply_rotary, rope_angles, sinusoidal_table


def test_sinusoidal_table_formula():
    pe = sinusoidal_table(50, 16, dtype=vl.float64).numpy()
    for pos in (0, 7, 49):
        for i in range(8):
            w = 1.0 / 10000 ** (2 * i / 16)
            assert math.isclose(pe[pos, 2 * i], math.sin(pos * w), abs_tol=1e-12)
            assert math.isclose(pe[pos, 2 * i + 1], math.cos(pos * w), abs_tol=1e-12)


def test_rope_scores_depend_only_on_relative_position():
    d, T = 8, 12
    cos, sin = rope_angles(T, d, dtype=vl.float64)
    q = vl.randn(1, d, dtype=vl.float64).expand(T, d)  # the same query at every position
    k = vl.randn(1, d, dtype=vl.float64).expand(T, d)
    rq, rk = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
    s = (rq @ rk.T).numpy()
    for off in range(-T + 1, T):
        diag = np.diagonal(s, offset=off)
        assert np.ptp(diag) < 1e-10, f"offset {off}: scores vary {diag}"
    # and it is a rotation: norms are preserved
    np.testing.assert_allclose(np.linalg.norm(rq.numpy(), axis=1), np.linalg.norm(q.numpy(), axis=1))


def test_rope_gradcheck():
    cos, sin = rope_angles(5, 4, dtype=vl.float64)
    x = vl.randn(2, 5, 4, dtype=vl.float64, requires_grad=True)
    gradcheck(lambda a: apply_rotary(a, cos, sin), (x,))

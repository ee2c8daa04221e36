"""The compiled LSTM time steps (varlens/ops/kernels/recurrent.py) against the layer op's NumPy
code and PyTorch's nn.LSTM, float32; their scalar sigmoid / tanh against NumPy; and the compiled
packed GEMM of the per-step products (``CompiledPackedGemm``) against NumPy and the op with it
against the op on NumPy's BLAS."""
import numpy as np
import pytest
import torch

import varlens as vl
from varlens.ops.kernels import helpers, numba_module
from varlens.ops.kernels import recurrent as RK
from varlens.ops.nn import rnn as R

needs_numba = pytest.mark.skipif(numba_module() is None, reason="numba is not installed or VARLENS_NO_NUMBA is set")
RNG = np.random.default_rng(3)


def f32(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def _layer(args, reverse, G, use_kernel, monkeypatch, gemm="asis"):
    """Forward and backward of the fused layer on plain arrays; returns (Z, grads, kernel used).
    ``gemm``: the per-step GEMM ``step_gemm`` hands the op ("asis": the op's own choice)."""
    with monkeypatch.context() as m:
        if not use_kernel:
            m.setattr(R, "lstm_step_kernels", lambda *a: None)
        if gemm != "asis":
            m.setattr(R, "step_gemm", lambda n: gemm)
        node = R.LSTMLayerFunction.__new__(R.LSTMLayerFunction)
        node.next = [1] * 7
        Z = node.forward(*args, reverse=reverse).copy()
        used = node.kern is not None
        grads = [g.copy() for g in node.backward(G)]
        node.saved = None
    return Z, grads, used


@needs_numba
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("state", [False, True])
def test_lstm_kernel_steps_match_numpy_path(reverse, state, monkeypatch):
    T, B, I, H = 7, 5, 6, 8
    x, w_ih, w_hh = f32(T, B, I), f32(4 * H, I, scale=0.8), f32(4 * H, H, scale=0.8)
    b_ih, b_hh = f32(4 * H), f32(4 * H)
    h0, c0 = (f32(B, H), f32(B, H, scale=2.0)) if state else (None, None)
    G = f32(T + 2, B, H)
    args = (x, h0, c0, w_ih, w_hh, b_ih, b_hh)
    Zk, gk, used_k = _layer(args, reverse, G, True, monkeypatch)
    Zn, gn, used_n = _layer(args, reverse, G, False, monkeypatch)
    assert used_k and not used_n
    np.testing.assert_allclose(Zk, Zn, atol=2e-6, rtol=1e-5)
    for a, b in zip(gk, gn):
        if b is None:
            assert a is None
        else:
            np.testing.assert_allclose(a, b, atol=1e-5 * max(1.0, float(np.abs(b).max())), rtol=1e-5)


def test_lstm_kernel_not_used_for_float64_or_masks():
    x = np.zeros((3, 2, 4))
    node = R.LSTMLayerFunction.__new__(R.LSTMLayerFunction)
    node.forward(x, None, None, np.zeros((8, 4)), np.zeros((8, 2)), None, None)
    assert node.kern is None
    node = R.LSTMLayerFunction.__new__(R.LSTMLayerFunction)
    node.forward(x.astype(np.float32), None, None, np.zeros((8, 4), np.float32), np.zeros((8, 2), np.float32),
                 None, None, mask=np.ones((3, 2), np.float32))
    assert node.kern is None


@needs_numba
@pytest.mark.parametrize("bidirectional", [False, True])
def test_float32_lstm_training_grads_match_torch(bidirectional):
    """nn.LSTM (2 layers) in float32 through the compiled steps: outputs and every parameter's
    gradient as PyTorch's."""
    T, B, I, H = 9, 4, 5, 6
    torch.manual_seed(0)
    tm = torch.nn.LSTM(I, H, num_layers=2, bidirectional=bidirectional)
    vm = vl.nn.LSTM(I, H, num_layers=2, bidirectional=bidirectional)
    vm.load_state_dict({k: vl.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x = f32(T, B, I)
    to, (th, tc) = tm(torch.tensor(x))
    vo, (vh, vc) = vm(vl.tensor(x))
    w = f32(*to.shape)
    ((to * torch.tensor(w)).sum() + th.sum() + 2 * tc.sum()).backward()
    ((vo * vl.tensor(w)).sum() + vh.sum() + 2 * vc.sum()).backward()
    np.testing.assert_allclose(vo.detach().numpy(), to.detach().numpy(), atol=2e-6)
    for (n, tp), (_, vp) in zip(tm.named_parameters(), vm.named_parameters()):
        np.testing.assert_allclose(vp.grad.numpy(), tp.grad.numpy(), atol=2e-5, rtol=1e-4, err_msg=n)


@needs_numba
def test_scalar_sigmoid_and_tanh_against_numpy():
    nb = numba_module()
    from varlens.ops.kernels import compiled as c
    helpers()
    sig2, tanh32 = c.sigmoid_twice, c.tanh32

    @nb.njit
    def run(x, out_s, out_t):
        for i in range(x.size):
            out_s[i] = sig2(x[i])
            out_t[i] = tanh32(x[i])
    x = np.concatenate([np.linspace(-30, 30, 200001), np.geomspace(1e-30, 1, 2001), -np.geomspace(1e-30, 1, 2001),
                        [0.0, -0.0, np.inf, -np.inf, np.nan]]).astype(np.float32)
    s, t = np.empty_like(x), np.empty_like(x)
    run(x, s, t)
    x64 = x.astype(np.float64)
    ref_t = np.tanh(x64)
    ref_s = 1 / (1 + np.exp(-2 * x64))
    fin = np.isfinite(x)
    # tanh: a few float32 ulps relative everywhere (no cancellation near 0)
    assert np.all(np.abs(t[fin] - ref_t[fin]) <= 4e-7 * np.abs(ref_t[fin]) + 1e-45)
    # sigmoid(2x): relative too, down to its underflow
    big = ref_s > 1e-37
    assert np.all(np.abs(s[big] - ref_s[big]) <= 4e-7 * ref_s[big])
    assert t[-3] == 1 and t[-2] == -1 and np.isnan(t[-1])
    assert s[-3] == 1 and s[-2] == 0 and np.isnan(s[-1])


@needs_numba
@pytest.mark.parametrize("n", [16, 32, 48, 64])
@pytest.mark.parametrize("m,k", [(16, 9), (37, 20), (3, 5)])   # blocks and left-over rows; rows only
def test_kernel_matches_numpy(n, m, k):
    g = RK.CompiledPackedGemm()
    assert g.supports(n)
    W, Wt = f32(m, k), f32(k, m)
    X = f32(k, 3, n)                      # the product reads X[:, 1] (row stride 3n), like a step
    C = np.full((m, n + 5), np.nan, np.float32)
    for w, trans in ((W, False), (Wt, True)):
        p = g.pack(w, trans, m, n, k, {}, "w")
        g.compute(p, X[:, 1].ctypes.data, 3 * n, C.ctypes.data, n + 5)
        ref = (w.T if trans else w).astype(np.float64) @ X[:, 1].astype(np.float64)
        np.testing.assert_allclose(C[:, :n], ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
        assert np.isnan(C[:, n:]).all()   # nothing written past the n columns


def test_kernel_applies_to_batches_of_16_to_64_only():
    sup = RK.CompiledPackedGemm.supports
    assert not any(sup(n) for n in (1, 8, 20, 33, 80, 128))
    assert RK.step_gemm(20) is None


@needs_numba
@pytest.mark.parametrize("reverse", [False, True])
def test_layer_with_packed_gemm_matches_blas_path(reverse, monkeypatch):
    T, B, I, H = 6, 16, 7, 5            # 4H = 20 rows: a block of 16 and 4 left over; H = 5: rows only
    args = (f32(T, B, I), f32(B, H), f32(B, H), f32(4 * H, I) * 0.7, f32(4 * H, H) * 0.7, f32(4 * H), f32(4 * H))
    G = f32(T + 2, B, H)
    g = RK.step_gemm(B)
    assert isinstance(g, RK.CompiledPackedGemm)
    Zp, gp, used = _layer(args, reverse, G, True, monkeypatch, gemm=g)
    Zb, gb, _ = _layer(args, reverse, G, True, monkeypatch, gemm=None)
    assert used
    np.testing.assert_allclose(Zp, Zb, rtol=1e-5, atol=2e-6)
    for a, b in zip(gp, gb):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(b).max())))

"""The compiled kernels of varlens/ops/kernels against their NumPy fallbacks, SciPy and PyTorch.

The compiled path is float32 only; float64 runs the NumPy path, which the float64 gradient
checks at the end exercise through the public ops.
"""
import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.special
import torch

import varlens as vl
from varlens.autograd import gradcheck
from varlens.ops.kernels import helpers, numba_module
from varlens.ops.kernels import optim as KO
from varlens.ops.kernels import pointwise as KP
from varlens.ops.kernels import rows as KR

needs_numba = pytest.mark.skipif(numba_module() is None, reason="numba is not installed or VARLENS_NO_NUMBA is set")
RNG = np.random.default_rng(0)


def f32(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def close(a, b, atol=2e-6, rtol=2e-5):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), atol=atol, rtol=rtol)


@pytest.fixture(scope="module")
def vec():
    """Elementwise wrappers of the scalar helpers (erf32, exp_nonpos), compiled for the tests."""
    nb = numba_module()
    h = helpers()
    erf32, exp_nonpos = h["erf32"], h["exp_nonpos"]

    @nb.njit
    def v_erf(x, out):
        for i in range(x.size):
            out[i] = erf32(x[i])

    @nb.njit
    def v_exp(x, out):
        for i in range(x.size):
            out[i] = exp_nonpos(x[i])

    def run(k, x):
        out = np.empty_like(x)
        k(x, out)
        return out
    return {"erf": lambda x: run(v_erf, x), "exp": lambda x: run(v_exp, x)}


@needs_numba
def test_erf32_within_a_few_ulps_of_scipy_over_the_line(vec):
    x = np.concatenate([np.linspace(-10, 10, 400001), [-np.inf, np.inf, 0.0, -0.0]]).astype(np.float32)
    ref = scipy.special.erf(x.astype(np.float64))
    got = vec["erf"](x)
    assert np.abs(got - ref).max() < 5e-7
    ulp = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    assert (np.abs(got - ref) / ulp).max() <= 8
    assert got[-4:].tolist() == [-1.0, 1.0, 0.0, 0.0]
    # tiny arguments: erf(x) ~ 2x/sqrt(pi), relative accuracy kept down to float32's subnormals
    t = np.float32(10.0) ** np.linspace(-37, -1, 2001).astype(np.float32)
    rel = np.abs(vec["erf"](t) - scipy.special.erf(t.astype(np.float64))) / scipy.special.erf(t.astype(np.float64))
    assert rel.max() < 1e-6
    assert np.isnan(vec["erf"](np.array([np.nan], np.float32)))[0]


@needs_numba
def test_exp_nonpos_matches_numpy_exp(vec):
    x = np.concatenate([-np.geomspace(1e-8, 87.3, 200001), [0.0, -0.0, -87.33, -88.0, -1e30, -np.inf]]).astype(np.float32)
    ref = np.exp(x.astype(np.float64))
    got = vec["exp"](x)
    normal = ref > 1.2e-38
    assert (np.abs(got - ref)[normal] / ref[normal]).max() < 3e-7
    assert (got[~normal] == 0).all()
    assert np.isnan(vec["exp"](np.array([np.nan], np.float32)))[0]


@needs_numba
@pytest.mark.parametrize("e", [2, 3, 4, 3.0])
def test_int_power_kernel_numpy_and_torch_agree(e):
    x, g = f32(4, 33, 17, scale=2.0), f32(4, 33, 17)
    k = int(e)
    ref = torch.from_numpy(x).double() ** k
    refg = torch.from_numpy(g).double() * k * torch.from_numpy(x).double() ** (k - 1)
    for uk in (True, False):
        if uk and k != 3:
            continue
        close(KP.int_power(x, k, use_kernel=uk), ref, atol=1e-5, rtol=2e-6)
        close(KP.int_power_grad(g, x, k, use_kernel=uk), refg, atol=1e-5, rtol=2e-6)
    a, b = vl.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ya, yb = vl.pow(a, e), torch.pow(b, e)
    ya.backward(vl.tensor(g))
    yb.backward(torch.tensor(g))
    assert ya.dtype == vl.float32
    close(ya.detach().numpy(), yb.detach().numpy(), atol=1e-5, rtol=2e-6)
    close(a.grad.numpy(), b.grad.numpy(), atol=1e-5, rtol=2e-6)


@needs_numba
def test_gelu_kernel_numpy_and_torch_agree():
    x = np.concatenate([f32(3000, scale=3.0), np.array([-20, -9, -5, 0, 5, 9, 20, np.inf, -np.inf], np.float32)])
    g = f32(x.size)
    xt = torch.tensor(x.astype(np.float64), requires_grad=True)
    torch.nn.functional.gelu(xt).backward(torch.tensor(g.astype(np.float64)))
    ref = torch.nn.functional.gelu(xt.detach()).numpy()
    for uk in (True, False):
        close(KP.gelu(x, use_kernel=uk), ref, atol=2e-6, rtol=1e-5)
        fin = np.isfinite(x)
        close(KP.gelu_grad(g[fin], x[fin], use_kernel=uk), xt.grad.numpy()[fin], atol=2e-6, rtol=1e-5)
    close(KP.gelu(x, use_kernel=True), KP.gelu(x, use_kernel=False), atol=2e-6, rtol=1e-5)
    a = vl.tensor(x[:3000].reshape(30, 100), requires_grad=True)
    b = torch.tensor(x[:3000].reshape(30, 100), requires_grad=True)
    vl.nn.GELU()(a).backward(vl.tensor(g[:3000].reshape(30, 100)))
    torch.nn.GELU()(b).backward(torch.tensor(g[:3000].reshape(30, 100)))
    close(a.grad.numpy(), b.grad.numpy(), atol=2e-6, rtol=1e-5)


@needs_numba
def test_tanh_gelu_kernel_numpy_and_torch_agree():
    x = np.concatenate([f32(3000, scale=3.0), np.array([-20, -9, -5, 0, 5, 9, 20], np.float32)])
    g = f32(x.size)
    xt = torch.tensor(x.astype(np.float64), requires_grad=True)
    torch.nn.functional.gelu(xt, approximate="tanh").backward(torch.tensor(g.astype(np.float64)))
    ref = torch.nn.functional.gelu(xt.detach(), approximate="tanh").numpy()
    for uk in (True, False):
        close(KP.gelu_tanh(x, use_kernel=uk), ref, atol=2e-6, rtol=1e-5)
        close(KP.gelu_tanh_grad(g, x, use_kernel=uk), xt.grad.numpy(), atol=4e-6, rtol=1e-5)
    close(KP.gelu_tanh(x, use_kernel=True), KP.gelu_tanh(x, use_kernel=False), atol=2e-6, rtol=1e-5)
    close(KP.gelu_tanh_grad(g, x, use_kernel=True), KP.gelu_tanh_grad(g, x, use_kernel=False), atol=4e-6, rtol=1e-5)
    a = vl.tensor(x[:3000].reshape(30, 100), requires_grad=True)
    b = torch.tensor(x[:3000].reshape(30, 100), requires_grad=True)
    vl.nn.functional.gelu(a, approximate="tanh").backward(vl.tensor(g[:3000].reshape(30, 100)))
    torch.nn.functional.gelu(b, approximate="tanh").backward(torch.tensor(g[:3000].reshape(30, 100)))
    close(a.grad.numpy(), b.grad.numpy(), atol=4e-6, rtol=1e-5)


@needs_numba
def test_sdpa_with_a_tril_mask_takes_the_compiled_causal_path():
    """A model's own boolean tril(ones(L, L)) mask is recognised as causal (fused kernels),
    with torch's results; a mask that only looks similar is not."""
    A = [vl.tensor(f32(2, 3, 7, 4), requires_grad=True) for _ in range(3)]
    T = [torch.tensor(a.detach().numpy(), requires_grad=True) for a in A]
    g = f32(2, 3, 7, 4)
    for m in (np.tril(np.ones((7, 7), bool)), np.tril(np.ones((7, 7), bool), k=-1) | np.eye(7, dtype=bool)[::-1]):
        for t in A + T:
            t.grad = None
        ya = vl.nn.functional.scaled_dot_product_attention(*A, attn_mask=vl.tensor(m[None, None]))
        yt = torch.nn.functional.scaled_dot_product_attention(*T, attn_mask=torch.tensor(m[None, None]))
        assert ya.grad_fn.fused == bool((m == np.tril(np.ones((7, 7), bool))).all())
        ya.backward(vl.tensor(g))
        yt.backward(torch.tensor(g))
        close(ya.detach().numpy(), yt.detach().numpy(), atol=1e-6)
        for a, t in zip(A, T):
            close(a.grad.numpy(), t.grad.numpy(), atol=2e-6)


@needs_numba
def test_relu_grad_kernel_numpy_and_torch_agree():
    x, g = f32(40, 70), f32(40, 70)
    x[0, :5] = 0.0
    y = np.maximum(x, 0)
    ref = torch.ops.aten.threshold_backward(torch.tensor(g), torch.tensor(y), 0.0).numpy()
    for uk in (True, False):
        assert np.array_equal(KP.relu_grad(g, y, use_kernel=uk), ref)


@needs_numba
def test_relu_forward_kernel_numpy_and_torch_agree():
    x = f32(40, 70)
    x[0, :5] = 0.0
    x[1, :3] = (-0.0, np.nan, -np.inf)
    ref = torch.relu(torch.tensor(x)).numpy()
    for uk in (True, False):
        assert np.array_equal(KP.relu(x, use_kernel=uk), ref, equal_nan=True)
    y = vl.nn.functional.relu(vl.tensor(x))
    assert np.array_equal(y.numpy(), ref, equal_nan=True)


@needs_numba
def test_tanh_grad_kernel_numpy_and_torch_agree():
    x, g = f32(40, 70, scale=2.0), f32(40, 70)
    xt = torch.tensor(x, requires_grad=True)
    torch.tanh(xt).backward(torch.tensor(g))
    y = np.tanh(x)
    for uk in (True, False):
        close(KP.tanh_grad(g, y, use_kernel=uk), xt.grad.numpy(), atol=1e-6)
    a = vl.tensor(x, requires_grad=True)
    vl.tanh(a).backward(vl.tensor(g))
    close(a.grad.numpy(), xt.grad.numpy(), atol=1e-6)


@needs_numba
@pytest.mark.parametrize("wd,maximize", [(0.0, False), (0.1, True)])
def test_adadelta_kernel_matches_torch_over_steps(wd, maximize):
    w0 = f32(300, 7)
    grads = [f32(300, 7) for _ in range(4)]
    tp = torch.nn.Parameter(torch.tensor(w0))
    topt = torch.optim.Adadelta([tp], lr=1.0, rho=0.9, eps=1e-6, weight_decay=wd, maximize=maximize)
    vp = vl.nn.Parameter(vl.tensor(w0))
    vopt = vl.optim.Adadelta([vp], lr=1.0, rho=0.9, eps=1e-6, weight_decay=wd, maximize=maximize)
    w, sq, acc = w0.copy(), np.zeros_like(w0), np.zeros_like(w0)
    for g in grads:
        tp.grad = torch.tensor(g)
        topt.step()
        vp.grad = vl.tensor(g)
        vopt.step()
        assert KO.adadelta_step(w, g, sq, acc, 1.0, 0.9, 1e-6, wd, maximize)
    close(w, tp.detach().numpy(), atol=1e-6)
    close(vp.detach().numpy(), tp.detach().numpy(), atol=1e-6)
    assert not KO.adadelta_step(w.astype(np.float64), g, sq, acc, 1.0, 0.9, 1e-6, wd, maximize)


def _three_optimisers(name, kw, kernel, monkeypatch, steps=5):
    """Run optimiser ``name`` for a few float32 steps in PyTorch, in varlens (through the compiled
    update ``kernel`` of ops/kernels/optim.py, counted) and in varlens with that kernel switched
    off (the NumPy update).  Returns (torch param, torch opt, varlens param, varlens opt,
    NumPy-path param, kernel calls)."""
    w0 = f32(300, 7)
    tp = torch.nn.Parameter(torch.tensor(w0))
    topt = getattr(torch.optim, name)([tp], **kw)
    vp, np_p = vl.nn.Parameter(vl.tensor(w0)), vl.nn.Parameter(vl.tensor(w0))
    vopt, np_opt = getattr(vl.optim, name)([vp], **kw), getattr(vl.optim, name)([np_p], **kw)
    calls = []
    real = getattr(KO, kernel)
    monkeypatch.setattr(KO, kernel, lambda *a: calls.append(1) or real(*a))
    for _ in range(steps):
        g = f32(300, 7)
        tp.grad = torch.tensor(g)
        topt.step()
        vp.grad = vl.tensor(g)
        vopt.step()
        np_p.grad = vl.tensor(g)
        with monkeypatch.context() as m:
            m.setattr(KO, kernel, lambda *a: False)   # the NumPy update
            np_opt.step()
    return tp, topt, vp, vopt, np_p, len(calls)


@needs_numba
@pytest.mark.parametrize("name,kw", [("Adam", dict(lr=0.01)), ("AdamW", dict(lr=0.02, weight_decay=0.1)),
                                     ("Adam", dict(lr=0.01, weight_decay=0.05, maximize=True, eps=1e-3)),
                                     ("AdamW", dict(lr=0.01, betas=(0.3, 0.9)))])
def test_adam_kernel_matches_numpy_and_torch_over_steps(name, kw, monkeypatch):
    """The compiled Adam/AdamW update (float32) against PyTorch's and the NumPy update, 5 steps."""
    tp, topt, vp, vopt, np_p, calls = _three_optimisers(name, kw, "adam_step", monkeypatch)
    assert calls == 5
    close(vp.detach().numpy(), tp.detach().numpy(), atol=2e-6)
    np.testing.assert_array_equal(vp.detach().numpy(), np_p.detach().numpy())   # rounded step by step alike
    for key in ("exp_avg", "exp_avg_sq"):
        close(vopt.state[vp][key].numpy(), topt.state[tp][key].numpy(), atol=1e-6)
    w = f32(3, 2).astype(np.float64)
    assert not KO.adam_step(w, w, w.copy(), w.copy(), 0.01, 0.9, 0.999, 1e-8, 1.0, 0.0, False, False)


@needs_numba
def test_sgd_momentum_kernel_matches_numpy_and_torch_over_steps(monkeypatch):
    """Heavy-ball SGD's compiled update (float32) against PyTorch's and the NumPy update."""
    tp, topt, vp, vopt, np_p, calls = _three_optimisers("SGD", dict(lr=0.05, momentum=0.9),
                                                        "sgd_momentum_step", monkeypatch)
    assert calls == 4          # the first step only copies g into the buffer
    close(vp.detach().numpy(), tp.detach().numpy(), atol=1e-6)
    np.testing.assert_array_equal(vp.detach().numpy(), np_p.detach().numpy())   # rounded step by step alike
    close(vopt.state[vp]["momentum_buffer"].numpy(), topt.state[tp]["momentum_buffer"].numpy(), atol=1e-6)
    w = f32(3, 2).astype(np.float64)
    assert not KO.sgd_momentum_step(w, w, w.copy(), 0.1, 0.9)


@needs_numba
@pytest.mark.parametrize("n", [1, 5, 16, 33, 65])
def test_row_softmaxes_kernel_numpy_and_torch_agree(n):
    x, g = f32(37, n, scale=3.0), f32(37, n)
    xt = torch.tensor(x.astype(np.float64), requires_grad=True)
    for name, tf in (("softmax", torch.softmax), ("log_softmax", torch.log_softmax)):
        xt.grad = None
        yt = tf(xt, -1)
        yt.backward(torch.tensor(g.astype(np.float64)))
        fwd, bwd = getattr(KR, name), getattr(KR, name + "_grad")
        for uk in (True, False):
            y = fwd(x, use_kernel=uk)
            close(y, yt.detach().numpy())
            close(bwd(g, y, use_kernel=uk), xt.grad.numpy(), atol=5e-6)


@needs_numba
def test_softmax_scaled_causal_rows_and_nan():
    L, n = 6, 6
    x, g = f32(3 * L, n), f32(3 * L, n)
    ref = []
    for uk in (True, False):
        y = KR.softmax(x, use_kernel=uk, scale=0.5, causal=L)
        assert (y[np.arange(n)[None, :] > (np.arange(3 * L) % L)[:, None]] == 0).all()
        ref.append((y, KR.softmax_grad(g, y, use_kernel=uk, scale=0.5)))
    close(ref[0][0], ref[1][0])
    close(ref[0][1], ref[1][1])
    bad = x.copy()
    bad[2, 3] = np.nan
    y = KR.softmax(bad, use_kernel=True)
    assert np.isnan(y[2]).all() and np.isfinite(np.delete(y, 2, 0)).all()
    assert np.isnan(KR.softmax(np.full((1, 4), -np.inf, np.float32), use_kernel=True)).all()


@needs_numba
def test_cross_entropy_kernel_numpy_and_torch_agree():
    z, t = f32(300, 65, scale=4.0), RNG.integers(0, 65, 300)
    zt = torch.tensor(z.astype(np.float64), requires_grad=True)
    lt = torch.nn.functional.cross_entropy(zt, torch.tensor(t), reduction="sum")
    lt.backward()
    for uk in (True, False):
        p, tot = KR.cross_entropy(z, t, use_kernel=uk)
        assert abs(tot - lt.item()) < 1e-4 * abs(lt.item())
        close(KR.cross_entropy_grad(p, t, 1.0, use_kernel=uk), zt.grad.numpy())
    a, b = vl.tensor(z, requires_grad=True), torch.tensor(z, requires_grad=True)
    la = vl.nn.functional.cross_entropy(a, vl.tensor(t), ignore_index=-1)
    lb = torch.nn.functional.cross_entropy(b, torch.tensor(t), ignore_index=-1)
    la.backward()
    lb.backward()
    assert abs(la.item() - lb.item()) < 1e-5
    close(a.grad.numpy(), b.grad.numpy(), atol=1e-7)


@needs_numba
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_kernel_numpy_and_torch_agree(affine):
    x, g = f32(50, 48, scale=3.0) + 2.0, f32(50, 48)
    w, b = (f32(48) + 1, f32(48)) if affine else (None, None)
    xt = torch.tensor(x.astype(np.float64), requires_grad=True)
    wt = torch.tensor(w.astype(np.float64), requires_grad=True) if affine else None
    bt = torch.tensor(b.astype(np.float64), requires_grad=True) if affine else None
    yt = torch.nn.functional.layer_norm(xt, (48,), wt, bt, 1e-5)
    yt.backward(torch.tensor(g.astype(np.float64)))
    outs = []
    for uk in (True, False):
        y, mean, rstd = KR.layer_norm(x, w, b, 1e-5, use_kernel=uk)
        close(y, yt.detach().numpy(), atol=1e-5)
        gx, gw, gb = KR.layer_norm_grad(g, x, w, mean, rstd, use_kernel=uk)
        close(gx, xt.grad.numpy(), atol=2e-5)
        if affine:
            close(gw, wt.grad.numpy(), atol=2e-5)
            close(gb, bt.grad.numpy(), atol=2e-5)
        outs.append((y, gx, gw, gb))
    for a, c in zip(*outs):
        close(a, c, atol=2e-5)


@needs_numba
def test_causal_sdpa_float32_fused_path_matches_torch():
    q, k, v, g = (f32(2, 3, 9, 8) for _ in range(4))
    A = [vl.tensor(a, requires_grad=True) for a in (q, k, v)]
    T = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    for causal in (True, False):
        for t in A + T:
            t.grad = None
        ya = vl.nn.functional.scaled_dot_product_attention(*A, is_causal=causal)
        yt = torch.nn.functional.scaled_dot_product_attention(*T, is_causal=causal)
        ya.backward(vl.tensor(g))
        yt.backward(torch.tensor(g))
        close(ya.detach().numpy(), yt.detach().numpy(), atol=1e-6)
        for a, t in zip(A, T):
            close(a.grad.numpy(), t.grad.numpy(), atol=2e-6)


@pytest.mark.parametrize("case", ["pow3", "gelu", "gelu_tanh", "relu", "tanh", "softmax", "log_softmax", "layer_norm", "cross_entropy",
                                  "sdpa"])
def test_float64_gradients_of_the_dispatching_ops(case):
    """float64 runs the NumPy path: central differences through the public ops."""
    x = vl.tensor(RNG.standard_normal((3, 4, 6)), dtype=vl.float64, requires_grad=True)
    F = vl.nn.functional
    fns = {
        "pow3": lambda a: a ** 3,
        "gelu": F.gelu,
        "gelu_tanh": lambda a: F.gelu(a, approximate="tanh"),
        "relu": lambda a: F.relu(a + 0.05),
        "tanh": vl.tanh,
        "softmax": lambda a: F.softmax(a, -1),
        "log_softmax": lambda a: F.log_softmax(a, -1),
        "layer_norm": lambda a: F.layer_norm(a, (6,)),
        "cross_entropy": lambda a: F.cross_entropy(a.reshape(12, 6), vl.tensor(np.arange(12) % 6)),
        "sdpa": lambda a: F.scaled_dot_product_attention(a, a * 0.5, a + 1.0, is_causal=True),
    }
    assert gradcheck(fns[case], (x,))


def test_no_numba_switch_gives_the_same_results():
    """VARLENS_NO_NUMBA=1: the NumPy paths, still matching PyTorch (run in a fresh process)."""
    code = (
        "import numpy as np, torch, varlens as vl\n"
        "from varlens.ops.kernels import numba_module\n"
        "assert numba_module() is None\n"
        "x = np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)\n"
        "a, b = vl.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)\n"
        "la = (vl.nn.functional.gelu(vl.nn.functional.layer_norm(a, (16,))) ** 3).softmax(-1).sum()\n"
        "lb = (torch.nn.functional.gelu(torch.nn.functional.layer_norm(b, (16,))) ** 3).softmax(-1).sum()\n"
        "la.backward(); lb.backward()\n"
        "assert abs(la.item() - lb.item()) < 1e-4, (la.item(), lb.item())\n"
        "assert np.abs(a.grad.numpy() - b.grad.numpy()).max() < 1e-5\n"
        "print('ok')\n")
    env = dict(os.environ, VARLENS_NO_NUMBA="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-2000:]


# ---------------------------------------------------------------- strided elementwise (issue 19)
def _qkv_views(B=4, T=16, C=32, H=4, seed=0):
    x = np.random.default_rng(seed).standard_normal((B, T, 3 * C)).astype(np.float32)
    return x, [x[..., i * C:(i + 1) * C].reshape(B, T, H, C // H).transpose(0, 2, 1, 3) for i in range(3)]


@needs_numba
def test_strided_binary_kernel_matches_numpy_values_and_layout():
    """ops/kernels/strided.py against NumPy: same values bit for bit, same memory order of the
    result, on split/view/transpose pieces and other strided views; None (NumPy's turn) where
    the layout does not fit (reversed or broadcast first operand, orders that disagree)."""
    from varlens.ops.kernels import strided as KS
    x, (q, k, v) = _qkv_views()
    cases = [(k, v, True), (q, k * v, True), (x[:, ::2, :32], x[:, 1::2, 32:64], True),
             (x[:, :, :32].transpose(0, 2, 1), x[:, :, 32:64].transpose(0, 2, 1), True),
             (x[:, :, 5:40], x[:, :, 50:85], True), (x[:, :, :32], np.broadcast_to(x[0, :, :32], (4, 16, 32)), True),
             (x[::-1, :, :32], x[:, :, :32], False), (np.broadcast_to(x[0, :, :32], (4, 16, 32)), x[:, :, :32], False),
             (np.ascontiguousarray(k), v, False)]
    for a, b, fits in cases:
        assert KS.usable(a, b) or a.size < KS.MIN_SIZE
        for op, f in ((KS.ADD, np.add), (KS.SUB, np.subtract), (KS.MUL, np.multiply)):
            r, ref = KS.binary(op, a, b), f(a, b)
            assert (r is not None) == fits, (a.strides, b.strides)
            if r is not None:
                assert np.array_equal(r, ref)
                assert [s for s, n in zip(r.strides, r.shape) if n > 1] == \
                       [s for s, n in zip(ref.strides, ref.shape) if n > 1]


@needs_numba
def test_strided_chain_gradients_match_torch(monkeypatch):
    """The qkv chain of bench_user_programs.py (split, view, transpose, q + k * v) with the strided
    kernel taking the forward and backward products: values and gradients as PyTorch's."""
    from varlens.ops.kernels import strided as KS
    monkeypatch.setattr(KS, "MIN_SIZE", 1)
    from varlens.ops import pointwise as P
    monkeypatch.setattr(P, "_KS_MIN", 1)
    calls = []
    real = KS.binary
    monkeypatch.setattr(KS, "binary", lambda *a: calls.append(a[0]) or real(*a))
    B, T, C, H = 4, 16, 32, 4
    x0 = np.random.default_rng(3).standard_normal((B, T, 3 * C)).astype(np.float32)
    g = np.random.default_rng(4).standard_normal((B, T, C)).astype(np.float32)
    outs = []
    for lib in (vl, torch):
        x = lib.tensor(x0, requires_grad=True)
        q, k, v = x.split(C, dim=2)
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
        y = (q + k * v - v).transpose(1, 2).contiguous().view(B, T, C)
        y.backward(lib.tensor(g))
        outs.append((y.detach().numpy(), x.grad.numpy()))
    assert {KS.ADD, KS.SUB, KS.MUL} <= set(calls)
    close(outs[0][0], outs[1][0], atol=1e-6)
    close(outs[0][1], outs[1][1], atol=1e-6)


@needs_numba
@pytest.mark.parametrize("n", [1, 7, 64, 130])
def test_row_max_of_the_softmax_kernels_with_nan_and_inf_rows(n):
    """The vectorised row max (no-NaN attributes on its own function): rows with a NaN, +inf or
    all -inf give NaN rows as PyTorch; other rows are untouched by them."""
    x = f32(9, n, scale=4.0)
    x[1, n // 2] = np.nan
    x[3, n - 1] = np.inf
    x[5, :] = -np.inf
    xt = torch.tensor(x)
    for name, tf in (("softmax", torch.softmax), ("log_softmax", torch.log_softmax)):
        y, yt = getattr(KR, name)(x, use_kernel=True), tf(xt, -1).numpy()
        assert np.array_equal(np.isnan(y), np.isnan(yt)), name
        ok = ~np.isnan(yt)
        close(y[ok], yt[ok], atol=1e-6)

"""The fused LSTM's restructured internals (varlens/ops/nn/rnn.py): pooled work buffers,
gate-major layout with permuted gate blocks, one GEMM per step with the bias folded in.

The pool must never let one op's buffers be reused while that op can still need them:
before its backward, under retain_graph, or while another forward of the same shape runs."""
import numpy as np
import pytest
import torch

import varlens as vl
from varlens.ops.nn import rnn as R

from conftest import assert_close

T, B, I, H = 5, 3, 4, 6


def _torch_lstm(ps, x, h0, c0):
    tl = torch.nn.LSTM(I, H).double()
    with torch.no_grad():
        for name, p in zip(["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"], ps):
            getattr(tl, name).copy_(torch.from_numpy(p.copy()))
    tx = torch.tensor(x, requires_grad=True)
    th = torch.tensor(h0[None], requires_grad=True)
    tc = torch.tensor(c0[None], requires_grad=True)
    y, (hn, cn) = tl(tx, (th, tc))
    return tl, tx, th, tc, y, hn, cn


def _setup(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T, B, I))
    h0 = rng.standard_normal((B, H)) * 0.5
    c0 = rng.standard_normal((B, H)) * 0.5
    ps = [rng.standard_normal((4 * H, I)) * 0.5, rng.standard_normal((4 * H, H)) * 0.5,
          rng.standard_normal(4 * H) * 0.3, rng.standard_normal(4 * H) * 0.3]
    return x, h0, c0, ps


def _vl_run(x, h0, c0, ps, wy, wh, wc):
    xs = [vl.tensor(a, requires_grad=True) for a in (x, h0, c0)]
    pv = [vl.tensor(p, requires_grad=True) for p in ps]
    y, hn, cn = R.lstm_layer(xs[0], xs[1], xs[2], *pv)
    loss = (y * vl.tensor(wy)).sum() + (hn * vl.tensor(wh)).sum() + (cn * vl.tensor(wc)).sum()
    return xs, pv, y, loss


def _weights(seed=1):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((T, B, H)), rng.standard_normal((B, H)), rng.standard_normal((B, H))


def test_all_gradients_match_torch_including_state_and_biases():
    """Values and every gradient (x, h0, c0, both weights, both biases) against PyTorch, with
    cotangents on the outputs, h_n and c_n, so the gate permutation and the folded bias
    column are checked at the boundary."""
    x, h0, c0, ps = _setup()
    wy, wh, wc = _weights()
    xs, pv, y, loss = _vl_run(x, h0, c0, ps, wy, wh, wc)
    loss.backward()
    tl, tx, th, tc, ty, thn, tcn = _torch_lstm(ps, x, h0, c0)
    tloss = (ty * torch.from_numpy(wy)).sum() + (thn[0] * torch.from_numpy(wh)).sum() \
        + (tcn[0] * torch.from_numpy(wc)).sum()
    tloss.backward()
    assert_close(y, ty, rtol=1e-10, atol=1e-12, what="outputs")
    assert_close(xs[0].grad, tx.grad, rtol=1e-9, atol=1e-11, what="dx")
    assert_close(xs[1].grad, th.grad[0], rtol=1e-9, atol=1e-11, what="dh0")
    assert_close(xs[2].grad, tc.grad[0], rtol=1e-9, atol=1e-11, what="dc0")
    for p, name in zip(pv, ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"]):
        assert_close(p.grad, getattr(tl, name).grad, rtol=1e-9, atol=1e-11, what=name)


def test_retain_graph_second_backward_gives_the_same_gradients():
    x, h0, c0, ps = _setup()
    wy, wh, wc = _weights()
    xs, pv, y, loss = _vl_run(x, h0, c0, ps, wy, wh, wc)
    loss.backward(retain_graph=True)
    g1 = [p.grad.numpy().copy() for p in pv] + [xs[0].grad.numpy().copy()]
    # another forward of the same shape in between must not take the retained op's buffers
    _vl_run(x * 0.5, h0, c0, ps, wy, wh, wc)[3].backward()
    for p in pv + xs:
        p.grad = None
    loss.backward()
    g2 = [p.grad.numpy() for p in pv] + [xs[0].grad.numpy()]
    for a, b in zip(g1, g2):
        np.testing.assert_array_equal(a, b)


def test_interleaved_forwards_and_backwards_match_separate_runs():
    """Two graphs of the same shape alive at once, a no-grad forward between them, then the
    backwards in the opposite order: each matches the run done alone."""
    x, h0, c0, ps = _setup()
    wy, wh, wc = _weights()
    ref = []
    for scale in (1.0, -0.7):
        xs, pv, y, loss = _vl_run(x * scale, h0, c0, ps, wy, wh, wc)
        loss.backward()
        ref.append((y.detach().numpy().copy(), [p.grad.numpy().copy() for p in pv + xs]))
    a = _vl_run(x, h0, c0, ps, wy, wh, wc)
    b = _vl_run(x * -0.7, h0, c0, ps, wy, wh, wc)
    with vl.no_grad():
        R.lstm_layer(vl.tensor(x * 3.0), None, None, *[vl.tensor(p) for p in ps])
    b[3].backward()
    c = _vl_run(x * 2.0, h0, c0, ps, wy, wh, wc)   # may reuse b's buffers, never a's
    a[3].backward()
    c[3].backward()
    for (xs, pv, y, _), (y_ref, g_ref) in zip([a, b], ref):
        np.testing.assert_array_equal(y.detach().numpy(), y_ref)
        for p, g in zip(pv + xs, g_ref):
            np.testing.assert_array_equal(p.grad.numpy(), g)


def test_workspace_is_reused_after_backward_and_outputs_stay_intact():
    R.clear_workspace_pool()
    x, h0, c0, ps = _setup()
    wy, wh, wc = _weights()
    xs, pv, y, loss = _vl_run(x, h0, c0, ps, wy, wh, wc)
    node = y._node.next[0]  # the slice's producer: the fused layer op
    assert isinstance(node, R.LSTMLayerFunction)
    ws = node.ws
    y_before = y.detach().numpy().copy()
    loss.backward()
    xs2, pv2, y2, loss2 = _vl_run(x * -1.0, h0, c0, ps, wy, wh, wc)
    assert y2._node.next[0].ws is ws, "the freed workspace was not reused"
    np.testing.assert_array_equal(y.detach().numpy(), y_before)  # outputs are never pooled
    loss2.backward()
    R.clear_workspace_pool()


@pytest.mark.parametrize("reverse", [False, True])
def test_float32_bench_size_matches_torch(reverse):
    """The benchmark's shapes in float32 (T=50, B=32, H=128 would be slow here; a smaller
    hidden size keeps the test quick): values and gradients within float32 rounding."""
    rng = np.random.default_rng(3)
    Tn, Bn, In, Hn = 50, 8, 16, 32
    xa = rng.standard_normal((Tn, Bn, In)).astype(np.float32)
    tl = torch.nn.LSTM(In, Hn, bidirectional=reverse)
    vm = vl.nn.LSTM(In, Hn, bidirectional=reverse)
    vm.load_state_dict({k: v.detach().numpy().copy() for k, v in tl.state_dict().items()})
    tx = torch.tensor(xa, requires_grad=True)
    ty, _ = tl(tx)
    (ty * ty).mean().backward()
    vx = vl.tensor(xa, requires_grad=True)
    vy, _ = vm(vx)
    (vy * vy).mean().backward()
    assert_close(vy, ty, rtol=1e-4, atol=1e-5, what="outputs")
    assert_close(vx.grad, tx.grad, rtol=1e-3, atol=1e-6, what="dx")
    for name, p in vm.named_parameters():
        assert_close(p.grad, getattr(tl, name).grad, rtol=1e-3, atol=1e-6, what=name)


def test_gru_pooled_buffers_retain_graph_and_interleaving():
    """The GRU op borrows its caches from the same pool: a retained graph survives another
    forward of the same shape, and interleaved graphs match PyTorch."""
    rng = np.random.default_rng(4)
    xa = rng.standard_normal((T, B, I))
    ps = [rng.standard_normal((3 * H, I)) * 0.5, rng.standard_normal((3 * H, H)) * 0.5,
          rng.standard_normal(3 * H) * 0.3, rng.standard_normal(3 * H) * 0.3]
    w = rng.standard_normal((T, B, H))

    def run(scale):
        x = vl.tensor(xa * scale, requires_grad=True)
        pv = [vl.tensor(p, requires_grad=True) for p in ps]
        y, hn = R.gru_layer(x, None, *pv)
        return x, pv, (y * vl.tensor(w)).sum() + hn.sum()

    def torch_grads(scale):
        tl = torch.nn.GRU(I, H).double()
        with torch.no_grad():
            for name, p in zip(["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"], ps):
                getattr(tl, name).copy_(torch.from_numpy(p.copy()))
        tx = torch.tensor(xa * scale, requires_grad=True)
        ty, th = tl(tx)
        ((ty * torch.from_numpy(w)).sum() + th.sum()).backward()
        names = ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"]
        return [tx.grad] + [getattr(tl, n).grad for n in names]

    a = run(1.0)
    b = run(-0.6)
    a[2].backward(retain_graph=True)
    c = run(2.0)       # may take a's freed-but-retained buffers only if the pool is wrong
    b[2].backward()
    c[2].backward()
    first = [a[0].grad.numpy().copy()] + [p.grad.numpy().copy() for p in a[1]]
    for t_ in [a[0]] + a[1]:
        t_.grad = None
    a[2].backward()
    for (x, pv, _), scale in ((a, 1.0), (b, -0.6), (c, 2.0)):
        for got, want in zip([x.grad] + [p.grad for p in pv], torch_grads(scale)):
            assert_close(got, want, rtol=1e-9, atol=1e-11, what=f"GRU grads, scale {scale}")
    for g1, t_ in zip(first, [a[0]] + a[1]):
        np.testing.assert_array_equal(g1, t_.grad.numpy())


def test_large_buffers_are_carved_from_huge_page_chunks(monkeypatch):
    """Buffers from _HUGE_MIN bytes share 64-byte-aligned, non-overlapping pieces of one chunk
    until it is full; smaller ones are plain arrays; the op's results do not depend on it."""
    monkeypatch.setattr(R, "_HUGE_MIN", 1024)
    monkeypatch.setattr(R, "_HUGE_CHUNK", 8192)
    ws = {}
    a = R._buf(ws, "a", (300,), np.dtype(np.float32), np)        # 1200 bytes -> 1216 in the chunk
    b = R._buf(ws, "b", (10, 70), np.dtype(np.float64), np)      # 5600 bytes
    c = R._buf(ws, "c", (100,), np.dtype(np.float32), np)        # small: its own array
    d = R._buf(ws, "d", (400,), np.dtype(np.float32), np)        # does not fit: a new chunk
    assert R._buf(ws, "a", (300,), np.dtype(np.float32), np) is a
    chunk = ws["_chunk"]
    assert a.base is not None and b.base is not None and c.base is None
    assert a.ctypes.data % 64 == 0 and b.ctypes.data % 64 == 0
    assert b.ctypes.data - a.ctypes.data == 1216 and not np.shares_memory(a, b)
    assert np.shares_memory(d, chunk) and not np.shares_memory(a, chunk)
    import mmap
    if hasattr(mmap, "MADV_HUGEPAGE"):      # Linux: chunks start on a 2 MiB (huge page) boundary
        assert chunk.ctypes.data % (2 << 20) == 0 and a.ctypes.data % (2 << 20) == 0
    assert b.shape == (10, 70) and b.dtype == np.float64 and b.flags.c_contiguous
    a[:] = 1.0
    b[:] = 2.0
    d[:] = 3.0
    assert (a == 1.0).all() and (b == 2.0).all()
    x, h0, c0, ps = _setup()
    wy, wh, wc = _weights()
    R.clear_workspace_pool()
    xs, pv, y, loss = _vl_run(x, h0, c0, ps, wy, wh, wc)
    loss.backward()
    monkeypatch.setattr(R, "_HUGE_MIN", 1 << 60)
    R.clear_workspace_pool()
    xs2, pv2, y2, loss2 = _vl_run(x, h0, c0, ps, wy, wh, wc)
    loss2.backward()
    np.testing.assert_array_equal(y.detach().numpy(), y2.detach().numpy())
    for u, v in zip(xs + pv, xs2 + pv2):
        np.testing.assert_array_equal(u.grad.numpy(), v.grad.numpy())
    R.clear_workspace_pool()


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="glibc's mallopt: Linux only")
def test_training_steps_fault_no_fresh_pages_with_the_malloc_thresholds():
    """varlens/core/array.py sets glibc's mmap/trim thresholds at import, so a training step's
    few MB of activations and gradients are not handed back to the kernel and faulted in again
    every step (the char-LSTM step: 625 page faults per step before); VARLENS_MALLOC_TUNE=0
    leaves malloc alone.  Run in fresh processes (the thresholds are process-wide)."""
    import os
    import subprocess
    import sys
    code = (
        "import resource, varlens as vl\n"
        "from varlens.core import array as A\n"
        "vl.manual_seed(0)\n"
        "m = vl.nn.LSTM(64, 128, num_layers=2); emb = vl.nn.Embedding(65, 64); fc = vl.nn.Linear(128, 65)\n"
        "ps = list(m.parameters()) + list(emb.parameters()) + list(fc.parameters())\n"
        "opt = vl.optim.Adam(ps, lr=1e-3)\n"
        "x = vl.randint(0, 65, (32, 32)); y = vl.randint(0, 65, (32 * 32,))\n"
        "def step():\n"
        "    opt.zero_grad(); out, _ = m(emb(x)); loss = vl.nn.functional.cross_entropy(fc(out).reshape(-1, 65), y)\n"
        "    loss.backward(); opt.step()\n"
        "for _ in range(3): step()\n"
        "r0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
        "for _ in range(10): step()\n"
        "print(A._MALLOC_TUNED, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - r0) / 10)\n")
    out = {}
    for tune in ("1", "0"):
        env = dict(os.environ, VARLENS_MALLOC_TUNE=tune)
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        tuned, faults = r.stdout.split()
        out[tune] = (tuned == "True", float(faults))
    import ctypes
    if not hasattr(ctypes.CDLL(None), "gnu_get_libc_version"):
        pytest.skip("not glibc")
    assert out["1"][0] and not out["0"][0]
    assert out["1"][1] < 20, out          # no fresh pages in steady state (untuned: ~600 here)

"""The torch lens's compiled reads (varlens/lens/torch_kernels.py) and the per-pass caches built
on them (TorchLens._dread: one read per tensor version per pass on detail steps, shared by the op
and module records and the next layer; gradients read in their hooks).

The reference is the same lens with the compiled reads switched off (torch_adapter._SUMM empty:
the NumPy-view paths, no detail-read cache), on models and runs that would expose a stale or
misplaced cache entry: batch sizes and shapes that change between steps, a module called twice in
one pass, an in-place ReLU that overwrites a tensor already read, torch.no_grad evaluation steps
between training steps, the module-hook path and the Sequential path, every step a detail step.
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tnn = torch.nn

from varlens.lens import Lens  # noqa: E402
from varlens.lens import kernels, records, torch_adapter, torch_kernels  # noqa: E402
from varlens.lens.compare import compare  # noqa: E402

pytestmark = pytest.mark.skipif(not kernels.compiled(), reason="the compiled reads need numba")


def _seq_model():
    torch.manual_seed(0)
    shared = tnn.Linear(16, 16)                    # called twice in one pass
    return tnn.Sequential(tnn.Flatten(), tnn.Linear(12, 16), tnn.ReLU(inplace=True), shared, tnn.Tanh(),
                          shared, tnn.Dropout(0.25), tnn.Linear(16, 16), tnn.ReLU(), tnn.Linear(16, 3))


def _hook_model():
    class Net(tnn.Module):                          # not a Sequential tree: module hooks and the function mode
        def __init__(self):
            super().__init__()
            self.body = _seq_model()
            self.head = tnn.Linear(3, 3)

        def forward(self, x):
            h = self.body(x)
            return self.head(torch.relu(h) + h)
    torch.manual_seed(0)
    return Net()


def _run(build, weight_every, ops=True):
    m = build()
    lens = Lens(m, weight_every=weight_every, ops=ops)
    g = np.random.default_rng(0)
    for step, rows in enumerate((6, 4, 6, 9, 1, 6, 5)):
        torch.manual_seed(step)                    # the same dropout masks both ways
        x = torch.from_numpy(g.standard_normal((rows, 3, 4)).astype(np.float32))
        if step == 3:                              # an evaluation step under no_grad in between
            m.eval()
            with torch.no_grad():
                m(x)
            m.train()
        else:
            m(x).square().mean().backward()
        lens.step()
        m.zero_grad()
    lens.detach()
    return lens


def _assert_same(fast, slow):
    assert [r.key for r in fast.ordered()] == [r.key for r in slow.ordered()]
    for rec in fast.ordered():
        other = slow[rec.key]
        assert rec.producer == other.producer and rec.source == other.source and rec.rows == other.rows, rec.key
        for f in ("out", "grad", "weight", "weight_grad"):
            a, b = getattr(rec, f), getattr(other, f)
            assert (a.calls, a.n, a.shape, a.rows, a.zeros, a.nan, a.inf) == \
                (b.calls, b.n, b.shape, b.rows, b.zeros, b.nan, b.inf), (rec.key, f)
            assert (a.tiny16, a.tiny_bf16, a.over16, a.num_n) == (b.tiny16, b.tiny_bf16, b.over16, b.num_n), \
                (rec.key, f)
            for v in ("mean", "m2", "amax", "rq_mean", "rq_m2"):
                np.testing.assert_allclose(getattr(a, v), getattr(b, v), rtol=1e-5, atol=1e-9,
                                           err_msg=f"{rec.key} {f} {v}")
        assert (rec.unit_calls, rec.grad_unit_calls) == (other.unit_calls, other.grad_unit_calls), rec.key
        for f in ("unit_q", "grad_unit_q"):
            ua, ub = getattr(rec, f), getattr(other, f)
            assert (ua is None) == (ub is None), (rec.key, f)
            if ua is not None:
                np.testing.assert_allclose(ua, ub, rtol=1e-5, atol=1e-12, err_msg=f"{rec.key} {f}")
        assert sorted(rec.params) == sorted(other.params), rec.key
        for p, vb in other.params.items():
            va = rec.params[p]
            if isinstance(vb, np.ndarray):
                np.testing.assert_allclose(va, vb, rtol=1e-5, atol=1e-9, err_msg=f"{rec.key} {p}")
            elif isinstance(vb, float):
                np.testing.assert_allclose(va, vb, rtol=1e-9, err_msg=f"{rec.key} {p}")
            else:
                assert va == vb, (rec.key, p, va, vb)
        assert [(i.n, i.shape, i.producer) for i in rec.inputs] == \
            [(i.n, i.shape, i.producer) for i in other.inputs], rec.key
        for ia, ib in zip(rec.inputs, other.inputs):
            np.testing.assert_allclose((ia.mean, ia.q), (ib.mean, ib.q), rtol=1e-6, atol=1e-12, err_msg=rec.key)
    rf, rs = compare(fast, level="all"), compare(slow, level="all")
    assert [(r.key, r.direction, r.verdict) for r in rf] == [(r.key, r.direction, r.verdict) for r in rs]


@pytest.mark.parametrize("build", [_seq_model, _hook_model], ids=["sequential", "hooks"])
@pytest.mark.parametrize("weight_every", [1, 2])
def test_compiled_reads_and_their_caches_record_what_the_numpy_paths_record(monkeypatch, build, weight_every):
    fast = _run(build, weight_every)
    assert fast._seq == (build is _seq_model)
    with monkeypatch.context() as mp:
        mp.setattr(torch_adapter, "_SUMM", {})     # no compiled reads: NumPy views, no detail-read cache
        slow = _run(build, weight_every)
    _assert_same(fast, slow)
    # the detail steps did read per-unit and per-feature moments and headroom counts
    lin = fast["1:linear"] if "1:linear" in fast.records else fast["body.1:linear"]
    assert lin.unit_calls >= 3 and lin.params["in_fmean_n"] >= 3 and lin.out.num_n > 0 and lin.grad.num_n > 0


def test_modules_only_lens_matches_too(monkeypatch):
    fast = _run(_seq_model, 1, ops=False)
    with monkeypatch.context() as mp:
        mp.setattr(torch_adapter, "_SUMM", {})
        slow = _run(_seq_model, 1, ops=False)
    _assert_same(fast, slow)


def test_detail_read_is_per_tensor_version():
    """A tensor changed in place after its detail read is read again (the cache is keyed by the
    tensor object and its version, and cleared at every pass)."""
    m = tnn.Sequential(tnn.Linear(4, 4))
    lens = Lens(m)
    t = torch.randn(8, 4)
    a = lens._dread(t)
    assert lens._dread(t) is a
    t.mul_(2)
    b = lens._dread(t)
    assert b is not a
    np.testing.assert_allclose(b[2], kernels.col_sums_numpy(t.numpy()), rtol=1e-6)
    lens._clear_pass()
    assert lens._dread(t) is not b
    assert lens._dread(torch.randn(8, 4).t()) is None            # not contiguous: the view paths
    assert lens._dread(torch.randn(8)) is None                   # one dimension: the view paths
    lens.detach()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_summary_and_detail_at_an_address_match_the_numpy_functions(dtype):
    g = np.random.default_rng(1)
    for shape in ((1, 1), (3, 5), (128, 40), (7, 4097)):
        a = (g.standard_normal(shape) * 3 + 0.5).astype(dtype)
        a[0, 0] = 0.0
        a.reshape(-1)[-1] = 1e-6                   # below float16's smallest normal
        t = torch.from_numpy(a)
        sm = torch_kernels.summary_at(t.data_ptr(), shape[0], shape[1], a.dtype)
        ref = records.summarize(a)
        assert sm[0] == ref[0] and sm[4] == ref[4] and sm[7][0] == ref[7][0] and sm[8] == ref[8]
        np.testing.assert_allclose([sm[1], sm[2], sm[3], sm[7][1], sm[7][2]],
                                   [ref[1], ref[2], ref[3], ref[7][1], ref[7][2]], rtol=1e-6, atol=1e-12)
        d, h, cols = torch_kernels.detail_at(t.data_ptr(), shape[0], shape[1], shape[1], a.dtype)
        assert d == sm
        st = records.Stats()
        st.update_numerics(a)
        assert tuple(h) == (st.tiny16, st.tiny_bf16, st.over16, st.num_n)
        np.testing.assert_allclose(cols, kernels.col_sums_numpy(a), rtol=1e-6, atol=1e-9)
    a = np.ones((4, 4), dtype)
    a[1, 2] = np.nan
    t = torch.from_numpy(a)
    assert torch_kernels.summary_at(t.data_ptr(), 4, 4, a.dtype) is None
    d, h, cols = torch_kernels.detail_at(t.data_ptr(), 4, 4, 4, a.dtype)
    assert d is None and np.isnan(cols[0, 2]) and cols[0, 0] == 4.0

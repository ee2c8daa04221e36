"""The structural op families on the (simulated) CUDA device, beyond the op table
(tests/test_device_ops_table.py): reductions, scans, sorting, shapes, indexing and setitem with
device index tensors, in-place methods and copies between devices, and torch.linalg.

Each case runs forward and backward with host synchronisation forbidden (where the op itself does
not need one), checks that outputs and gradients stay on cuda:0 with the input's dtype, and
compares them with the same program on the CPU (float64 and float32)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import varlens as vl

DTYPES = [np.float64, np.float32]
IDS = ["float64", "float32"]


def _tol(dtype):
    return dict(rtol=1e-9, atol=1e-10) if dtype == np.float64 else dict(rtol=2e-4, atol=2e-4)


def _host(t):
    return t.detach().cpu().numpy()


def _run_both(fn, arrays, dtype, sim, grad=True, sync_ok=False):
    """fn on CPU tensors and on device tensors (float arrays require grad); the device run,
    forward and backward, inside forbid_host_sync unless ``sync_ok``.  Returns both outputs
    and both lists of gradients."""
    def make(device):
        ts = []
        for a in arrays:
            t = vl.tensor(a.astype(dtype) if a.dtype.kind == "f" else a)
            if device == "cuda":
                t = t.cuda()
            if grad and a.dtype.kind == "f":
                t.requires_grad_(True)
            ts.append(t)
        return ts

    outs = {}
    for device in ("cpu", "cuda"):
        ts = make(device)
        ctx = sim.forbid_host_sync() if device == "cuda" and not sync_ok else _null()
        with ctx:
            out = fn(*ts)
            outs_t = out if isinstance(out, (tuple, list)) else (out,)
            if grad:
                w = np.random.default_rng(3)
                loss = None
                for o in outs_t:
                    if o.dtype.kind == "f" and o.requires_grad:
                        wt = vl.tensor(w.standard_normal(tuple(o.shape)).astype(dtype))
                        if device == "cuda":
                            wt = wt.cuda()
                        term = (o * wt).sum()
                        loss = term if loss is None else loss + term
                if loss is not None:
                    loss.backward()
        outs[device] = (outs_t, [t.grad for t in ts])
    return outs["cpu"], outs["cuda"]


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def _compare(cpu, dev, dtype, what):
    (co, cg), (do, dg) = cpu, dev
    for i, (a, b) in enumerate(zip(co, do)):
        assert b.is_cuda, f"{what}: output {i} is on {b.device}"
        assert b.dtype == a.dtype, f"{what}: output {i} dtype {b.dtype}, CPU {a.dtype}"
        np.testing.assert_allclose(_host(b), _host(a), **_tol(dtype), err_msg=f"{what} output {i}")
    for i, (a, b) in enumerate(zip(cg, dg)):
        assert (a is None) == (b is None), f"{what}: gradient {i} present on one device only"
        if a is not None:
            assert b.is_cuda, f"{what}: gradient {i} is on {b.device}"
            np.testing.assert_allclose(_host(b), _host(a), **_tol(dtype), err_msg=f"{what} grad {i}")


R = np.random.default_rng(0)
X34 = R.standard_normal((3, 4))
X234 = R.standard_normal((2, 3, 4))
IDX = np.array([2, 0, 2, 1])

# (name, fn, arrays): every fn is differentiable in its float inputs and needs no host read
CASES = [
    ("sum_dim", lambda x: x.sum(1, keepdim=True), [X234]),
    ("mean", lambda x: x.mean((0, 2)), [X234]),
    ("var", lambda x: vl.var(x, 1, correction=0), [X234]),
    ("std", lambda x: x.std(-1), [X34]),
    ("max_all", lambda x: x.max(), [X34]),
    ("max_dim", lambda x: x.max(1), [X34]),
    ("min_dim", lambda x: vl.min(x, 0, keepdim=True), [X34]),
    ("amax", lambda x: vl.amax(x, (0, 1)), [X234]),
    ("argmax", lambda x: vl.argmax(x, 1), [X34]),
    ("argmin_all", lambda x: vl.argmin(x), [X34]),
    ("logsumexp", lambda x: vl.logsumexp(x, 1), [X34]),
    ("softmax0", lambda x: vl.softmax(x, 0), [X34]),
    ("log_softmax", lambda x: vl.log_softmax(x, -1), [X234]),
    ("prod_zero", lambda x: vl.prod(x * (x > 0.5).to(x.dtype), 1), [X34]),
    ("norm", lambda x: vl.linalg.vector_norm(x, 2, 1), [X34]),
    ("cumsum", lambda x: vl.cumsum(x, 1), [X34]),
    ("cumprod_zero", lambda x: vl.cumprod(x * (x > -0.3).to(x.dtype), 1), [X34]),
    ("cummax", lambda x: vl.cummax(x, 1), [X34]),
    ("logcumsumexp", lambda x: vl.logcumsumexp(x, 0), [X34]),
    ("sort", lambda x: vl.sort(x, 1, descending=True), [X34]),
    ("argsort", lambda x: vl.argsort(x, 0), [X34]),
    ("topk", lambda x: vl.topk(x, 2, 1), [X34]),
    ("kthvalue", lambda x: vl.kthvalue(x, 2, 1), [X34]),
    ("median_dim", lambda x: vl.median(x, 1), [X34]),
    ("nanmedian", lambda x: vl.nanmedian(x), [X34]),
    ("mode", lambda x: vl.mode(vl.round(x), 1), [X34]),
    ("matmul", lambda a, b: a @ b, [X34, X34.T.copy()]),
    ("bmm", lambda a, b: vl.bmm(a, b), [X234, R.standard_normal((2, 4, 5))]),
    ("einsum", lambda a, b: vl.einsum("bij,bkj->bik", a, b), [X234, X234]),
    ("einsum_diag", lambda a: vl.einsum("ii->i", a), [X34[:, :3].copy()]),
    ("cat", lambda a, b: vl.cat([a, b], 1), [X34, X34]),
    ("stack", lambda a, b: vl.stack([a, b], 2), [X34, X34]),
    ("split", lambda x: vl.split(x, [1, 3], 1), [X34]),
    ("chunk", lambda x: x.chunk(2, 0), [X34]),
    ("unbind", lambda x: vl.unbind(x, 1), [X34]),
    ("tril", lambda x: vl.tril(x, -1), [X34]),
    ("triu", lambda x: vl.triu(x, 1), [X234]),
    ("diag", lambda x: vl.diag(x, 1), [X34]),
    ("diag_1d", lambda x: vl.diag(x[0], -1), [X34]),
    ("diagonal", lambda x: vl.diagonal(x, 0, 1, 2), [X234]),
    ("diag_embed", lambda x: vl.diag_embed(x), [X34]),
    ("roll", lambda x: vl.roll(x, (1, -2), (0, 1)), [X34]),
    ("flip", lambda x: vl.flip(x, (0, 2)), [X234]),
    ("repeat", lambda x: x.repeat(2, 1, 2), [X34]),
    ("expand", lambda x: x[:, :1].expand(3, 5), [X34]),
    ("tile", lambda x: vl.tile(x, (2,)), [X34]),
    ("movedim", lambda x: vl.movedim(x, 0, 2), [X234]),
    ("unfold", lambda x: x.unfold(1, 2, 1), [X34]),
    ("block_diag", lambda a, b: vl.block_diag(a, b), [X34, X34[:2]]),
    ("gather", lambda x, i: vl.gather(x, 1, i), [X34, np.array([[0, 3], [1, 1], [2, 0]])]),
    ("scatter", lambda x, i, s: vl.scatter(x, 1, i, s), [X34, np.array([[0, 3], [1, 2], [2, 0]]), X34[:, :2].copy()]),
    ("scatter_value", lambda x, i: vl.scatter(x, 1, i, value=2.0), [X34, np.array([[0, 3], [1, 2], [2, 0]])]),
    ("scatter_add", lambda x, i, s: vl.scatter_add(x, 1, i, s), [X34, np.array([[0, 0], [1, 1], [2, 0]]), X34[:, :2].copy()]),
    ("scatter_reduce", lambda x, i, s: vl.scatter_reduce(x, 1, i, s, "amax", include_self=False),
     [X34, np.array([[0, 0], [1, 1], [2, 0]]), X34[:, :2].copy()]),
    ("index_select", lambda x, i: vl.index_select(x, 1, i), [X34, IDX]),
    ("index_add", lambda x, i, s: vl.index_add(x, 1, i, s), [X34, IDX, R.standard_normal((3, 4))]),
    ("index_copy", lambda x, i, s: vl.index_copy(x, 0, i, s), [X34, np.array([2, 0]), X34[:2].copy()]),
    ("index_fill", lambda x, i: vl.index_fill(x, 1, i, -1.5), [X34, np.array([1, 3])]),
    ("take_along_dim", lambda x, i: vl.take_along_dim(x, i, 1), [X34, np.array([[0], [3], [1]])]),
    ("masked_fill", lambda x: x.masked_fill(x > 0.2, 0.5), [X34]),
    ("masked_fill_tensor", lambda x, v: x.masked_fill(x > 0.2, v.detach()), [X34, np.array(3.0)]),
    ("getitem_tensor", lambda x, i: x[i], [X34, IDX[:3] % 3]),
    ("getitem_mixed", lambda x, i: x[1:, i], [X234, IDX]),
    ("getitem_pair", lambda x, i, j: x[i, j], [X34, np.array([0, 2, 2]), np.array([1, 3, 0])]),
    ("getitem_list", lambda x: x[[0, 2], 1:], [X34]),
    ("setitem_fn", lambda x, i, v: vl.index_put(x, (i,), v), [X34, np.array([0, 2]), X34[:2].copy()]),
    ("index_put_acc", lambda x, i, v: vl.index_put(x, (i,), v, accumulate=True), [X34, np.array([0, 0]), X34[:2].copy()]),
    ("one_hot", lambda i: vl.nn.functional.one_hot(i, 5), [np.array([0, 4, 2])]),
    ("searchsorted", lambda s, v: vl.searchsorted(s, v), [np.sort(X34, 1), X34[:, :2].copy()]),
    ("aminmax", lambda x: vl.aminmax(x, dim=1), [X34]),
    ("count_nonzero", lambda x: vl.count_nonzero(x > 0, 1), [X34]),
    ("all_any", lambda x: (vl.all(x > -5, 1), vl.any(x > 1, 0)), [X34]),
    ("clone_contig", lambda x: x.t().contiguous().clone(), [X34]),
    ("trapezoid", lambda y: vl.trapezoid(y, dim=1), [X34]),
    ("diff", lambda x: vl.diff(x, 1, 1), [X34]),
    ("cumulative_trapezoid", lambda y: vl.cumulative_trapezoid(y, dim=0), [X34]),
    ("quantile", lambda x: vl.quantile(x, 0.3, 1), [X34]),
    ("cdist", lambda a, b: vl.cdist(a, b), [X34, X34[:2] + 0.5]),
    ("kron", lambda a, b: vl.kron(a, b), [X34[:2, :2].copy(), X34[1:, 2:].copy()]),
    ("cov", lambda x: vl.cov(x), [X34]),
    ("tensordot", lambda a, b: vl.tensordot(a, b, ([1, 2], [1, 2])), [X234, X234]),
    ("renorm", lambda x: vl.renorm(x, 2, 0, 1.0), [X34]),
    ("diagonal_scatter", lambda a, b: vl.diagonal_scatter(a, b), [X34, X34[0, :3].copy()]),
    ("select_scatter", lambda a, b: vl.select_scatter(a, b, 0, 1), [X34, X34[2].copy()]),
    ("cartesian_prod", lambda a, b: vl.cartesian_prod(a, b), [X34[0].copy(), X34[1, :2].copy()]),
    ("nanmean", lambda x: vl.nanmean(x, 1), [X34]),
    ("take", lambda x, i: vl.take(x, i), [X34, np.array([0, 5, 11])]),
    ("cummin", lambda x: vl.cummin(x, 0), [X34]),
    ("fill_diagonal", lambda x: (x * 1).fill_diagonal_(0.5), [X34]),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_structural_op_on_device_matches_cpu(name, dtype, sim_cuda):
    _, fn, arrays = next(c for c in CASES if c[0] == name)
    cpu, dev = _run_both(fn, arrays, dtype, sim_cuda)
    _compare(cpu, dev, dtype, name)


# ---------------------------------------------------------------- torch.linalg on the device
def _spd(n, batch=()):
    a = R.standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


LINALG = [
    ("inv", lambda a: vl.linalg.inv(a), [_spd(3)]),
    ("solve", lambda a, b: vl.linalg.solve(a, b), [_spd(3, (2,)), R.standard_normal((2, 3, 2))]),
    ("solve_vec", lambda a, b: vl.linalg.solve(a, b), [_spd(3), R.standard_normal(3)]),
    ("det", lambda a: vl.linalg.det(a), [R.standard_normal((2, 3, 3))]),
    ("slogdet", lambda a: vl.linalg.slogdet(a), [R.standard_normal((3, 3))]),
    ("cholesky", lambda a: vl.linalg.cholesky(a), [_spd(4, (2,))]),
    ("cholesky_upper", lambda a: vl.linalg.cholesky(a, upper=True), [_spd(3)]),
    ("solve_triangular", lambda a, b: vl.linalg.solve_triangular(vl.tril(a), b, upper=False),
     [_spd(3), R.standard_normal((3, 2))]),
    ("solve_triangular_right", lambda a, b: vl.linalg.solve_triangular(vl.triu(a), b, upper=True, left=False),
     [_spd(3), R.standard_normal((2, 3))]),
    # (eigen- and singular vectors are defined up to sign, which may differ between LAPACK and
    # cuSOLVER: the cases read sign-free functions of them)
    ("qr", lambda a: tuple(t * t for t in vl.linalg.qr(a)), [R.standard_normal((4, 3))]),
    ("eigh", lambda a: (lambda w, v: (w, v * v))(*vl.linalg.eigh(a)), [_spd(3)]),
    ("eigvalsh", lambda a: vl.linalg.eigvalsh(a), [_spd(3, (2,))]),
    ("svd", lambda a: (lambda u, s, vh: (s, u * u, vh * vh, (u * s[None]) @ vh))(
        *vl.linalg.svd(a, full_matrices=False)), [R.standard_normal((4, 3))]),
    ("svdvals", lambda a: vl.linalg.svdvals(a), [R.standard_normal((3, 5))]),
    ("matrix_norm", lambda a: vl.linalg.matrix_norm(a), [R.standard_normal((3, 5))]),
    ("matrix_power", lambda a: vl.linalg.matrix_power(a, 3), [R.standard_normal((3, 3))]),
    ("cholesky_inverse", lambda a: vl.cholesky_inverse(vl.linalg.cholesky(a)), [_spd(3)]),
    ("cholesky_ex", lambda a: vl.linalg.cholesky_ex(a), [_spd(3)]),
    ("inv_ex", lambda a: vl.linalg.inv_ex(a), [_spd(3)]),
    ("solve_ex", lambda a, b: vl.linalg.solve_ex(a, b), [_spd(3), R.standard_normal((3, 2))]),
    ("pinv", lambda a: vl.linalg.pinv(a), [R.standard_normal((4, 3))]),
    ("pinv_hermitian", lambda a: vl.linalg.pinv(a, hermitian=True), [_spd(3)]),
    ("matrix_rank", lambda a: vl.linalg.matrix_rank(a), [R.standard_normal((2, 4, 3))]),
    ("lstsq", lambda a, b: vl.linalg.lstsq(a, b).solution, [R.standard_normal((2, 5, 3)), R.standard_normal((2, 5, 2))]),
    ("logdet", lambda a: vl.logdet(a), [_spd(3)]),
    ("multi_dot", lambda a, b, c: vl.linalg.multi_dot([a, b, c]), [X34, X34.T.copy(), X34]),
    ("cross", lambda a, b: vl.linalg.cross(a, b), [X34[:, :3].copy(), X34[:, 1:].copy()]),
    ("vander", lambda x: vl.linalg.vander(x, N=3), [X34[0].copy()]),
    ("lu", lambda a: vl.linalg.lu(a), [R.standard_normal((2, 4, 4))]),
    ("lu_wide", lambda a: vl.linalg.lu(a), [R.standard_normal((3, 5))]),
    ("lu_tall", lambda a: vl.linalg.lu(a), [R.standard_normal((5, 3))]),
    ("lu_factor", lambda a: vl.linalg.lu_factor(a), [R.standard_normal((2, 4, 4))]),
    ("lu_solve", lambda a, b: vl.linalg.lu_solve(*vl.linalg.lu_factor(a), b), [R.standard_normal((4, 4)), R.standard_normal((4, 2))]),
    ("lu_solve_adjoint_right", lambda a, b: vl.linalg.lu_solve(*vl.linalg.lu_factor(a), b, left=False, adjoint=True),
     [R.standard_normal((3, 3)), R.standard_normal((2, 3))]),
    ("lu_unpack", lambda a: vl.lu_unpack(*vl.linalg.lu_factor(a)), [R.standard_normal((4, 3))]),
    ("ormqr", lambda a, t, c: vl.ormqr(a, t, c, transpose=True), [R.standard_normal((4, 3)), R.standard_normal(2),
                                                                  R.standard_normal((4, 2))]),
    ("householder", lambda a, t: vl.linalg.householder_product(a, t), [R.standard_normal((4, 3)), R.standard_normal(2)]),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("name", [c[0] for c in LINALG])
def test_linalg_on_device_matches_cpu(name, dtype, sim_cuda):
    _, fn, arrays = next(c for c in LINALG if c[0] == name)
    cpu, dev = _run_both(fn, arrays, dtype, sim_cuda)
    if dtype == np.float32:   # decompositions in float32: compare with a looser tolerance
        (co, cg), (do, dg) = cpu, dev
        for a, b in list(zip(co, do)) + [(a, b) for a, b in zip(cg, dg) if a is not None]:
            assert b.is_cuda and b.dtype == a.dtype
            np.testing.assert_allclose(_host(b), _host(a), rtol=2e-3, atol=2e-3, err_msg=name)
        return
    _compare(cpu, dev, dtype, name)


def test_linalg_matches_torch_on_device(sim_cuda):
    a = _spd(4)
    for name, vfn, tfn in [("inv", vl.linalg.inv, torch.linalg.inv), ("det", vl.linalg.det, torch.linalg.det),
                           ("cholesky", vl.linalg.cholesky, torch.linalg.cholesky),
                           ("eigvalsh", vl.linalg.eigvalsh, torch.linalg.eigvalsh),
                           ("svdvals", vl.linalg.svdvals, torch.linalg.svdvals)]:
        v = vl.tensor(a).cuda().requires_grad_(True)
        t = torch.tensor(a, requires_grad=True)
        with sim_cuda.forbid_host_sync():
            vo = vfn(v)
            vo.sum().backward()
        to = tfn(t)
        to.sum().backward()
        assert vo.is_cuda and v.grad.is_cuda
        np.testing.assert_allclose(_host(vo), to.detach().numpy(), rtol=1e-9, atol=1e-10, err_msg=name)
        np.testing.assert_allclose(_host(v.grad), t.grad.numpy(), rtol=1e-8, atol=1e-9, err_msg=name)


# ---------------------------------------------------------------- in-place methods and copies
@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_inplace_methods_on_device(dtype, sim_cuda):
    a = X34.astype(dtype)
    x = vl.tensor(a).cuda()
    ref = a.copy()
    with sim_cuda.forbid_host_sync():
        x.add_(vl.tensor(a).cuda(), alpha=2)
        x.mul_(0.5)
        x.sub_(1.0)
        x.div_(vl.tensor(np.full((4,), 2.0, dtype)).cuda())
        x.clamp_(-0.5, 0.7)
        x.exp_()
        x += 1
    ref = np.exp(np.clip(((ref + 2 * ref) * 0.5 - 1.0) / 2.0, -0.5, 0.7)) + 1
    assert x.is_cuda and x.dtype == dtype
    np.testing.assert_allclose(_host(x), ref, **_tol(dtype))
    with sim_cuda.forbid_host_sync():   # a CUDA value: no host read
        x.fill_(vl.tensor(np.array(3.0, dtype)).cuda())
    np.testing.assert_array_equal(_host(x), np.full_like(ref, 3.0))
    x.zero_()
    assert not _host(x).any()


def test_inplace_between_devices_raises_torchs_error(sim_cuda):
    x = vl.zeros(3).cuda()
    with pytest.raises(RuntimeError, match="same device"):
        x.add_(vl.ones(3))
    x.add_(vl.tensor(2.0))   # a 0-d CPU value is a scalar, as in PyTorch
    np.testing.assert_array_equal(_host(x), [2.0, 2.0, 2.0])


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_inplace_in_graph_on_device_backward(dtype, sim_cuda):
    a = vl.tensor(X34.astype(dtype)).cuda().requires_grad_(True)
    ta = torch.tensor(X34.astype(dtype), requires_grad=True)
    with sim_cuda.forbid_host_sync():
        y = a * 2
        y.mul_(a)
        y[1:, 0] = 0.0
        y.add_(1.0)
        y.sum().backward()
    ty = ta * 2
    ty.mul_(ta)
    ty[1:, 0] = 0.0
    ty.add_(1.0)
    ty.sum().backward()
    assert y.is_cuda and a.grad.is_cuda
    np.testing.assert_allclose(_host(y), ty.detach().numpy(), **_tol(dtype))
    np.testing.assert_allclose(_host(a.grad), ta.grad.numpy(), **_tol(dtype))


def test_copy_between_devices(sim_cuda):
    src = vl.tensor(X34)
    d = vl.zeros(3, 4, dtype=vl.float64).cuda()
    d.copy_(src)                     # host -> device
    assert d.is_cuda
    np.testing.assert_array_equal(_host(d), X34)
    h = vl.zeros(3, 4, dtype=vl.float64)
    h.copy_(d * 2)                   # device -> host: a copy back, as torch's copy_
    assert not h.is_cuda
    np.testing.assert_array_equal(h.numpy(), 2 * X34)
    row = vl.zeros(3, 4, dtype=vl.float32).cuda()
    with sim_cuda.forbid_host_sync():
        row.copy_(d[0])              # device -> device, broadcast and cast
    np.testing.assert_allclose(_host(row), np.broadcast_to(X34[0], (3, 4)).astype(np.float32))


def test_copy_records_gradient_across_devices(sim_cuda):
    src = vl.tensor(X34).requires_grad_(True)
    d = vl.zeros(3, 4, dtype=vl.float64).cuda()
    d.copy_(src)
    (d * 3).sum().backward()
    assert not src.grad.is_cuda
    np.testing.assert_array_equal(src.grad.numpy(), np.full((3, 4), 3.0))


def test_setitem_with_device_index_on_device(sim_cuda):
    x = vl.zeros(5, 3).cuda()
    idx = vl.tensor([4, 0]).cuda()
    with sim_cuda.forbid_host_sync():
        x[idx] = vl.ones(2, 3).cuda()
        x[1, [0, 2]] = 7.0                      # a list index: copied to the device
        x[vl.tensor([2, 3]).cuda(), 1] = vl.tensor([5.0, 6.0]).cuda()
        x[2:4, 2] = np.array([8.0, 9.0], dtype=np.float32)   # a host array value: copied over
    want = np.zeros((5, 3), np.float32)
    want[[4, 0]] = 1
    want[1, [0, 2]] = 7
    want[[2, 3], 1] = [5, 6]
    want[2:4, 2] = [8, 9]
    assert x.is_cuda
    np.testing.assert_array_equal(_host(x), want)


@pytest.mark.simulator_only
def test_data_dependent_shapes_sync_once_and_stay_on_device(sim_cuda):
    x = vl.tensor([[1.0, -2.0, 3.0], [0.0, 5.0, -6.0]]).cuda()
    before = sim_cuda.host_syncs[0]
    m = x[x > 0]
    nz = vl.nonzero(x > 0)
    u, inv, cnt = vl.unique(vl.tensor([3, 1, 3, 2]).cuda(), return_inverse=True, return_counts=True)
    assert sim_cuda.host_syncs[0] > before      # the sizes need the values: a host read, as on a GPU
    for t in (m, nz, u, inv, cnt):
        assert t.is_cuda
    np.testing.assert_array_equal(_host(m), [1.0, 3.0, 5.0])
    np.testing.assert_array_equal(_host(nz), [[0, 0], [0, 2], [1, 1]])
    np.testing.assert_array_equal(_host(u), [1, 2, 3])
    np.testing.assert_array_equal(_host(inv), [2, 0, 2, 1])
    np.testing.assert_array_equal(_host(cnt), [1, 1, 2])
    with pytest.raises(sim_cuda.HostSyncError):
        with sim_cuda.forbid_host_sync():
            x[x > 0]


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_boolean_mask_backward_reads_nothing(dtype, sim_cuda):
    """The mask is read once in the forward (the result's size); both backwards scatter by the
    integer positions found there, with no host read."""
    a = X34.astype(dtype)
    x = vl.tensor(a).cuda().requires_grad_(True)
    tx = torch.tensor(a, requires_grad=True)
    sel = x[x > 0.1]
    y = x * 2
    y[x < -0.5] = 0.0
    with sim_cuda.forbid_host_sync():
        ((sel * 3).sum() + (y * y).sum()).backward()
    tsel = tx[tx > 0.1]
    ty = tx * 2
    ty[tx < -0.5] = 0.0
    ((tsel * 3).sum() + (ty * ty).sum()).backward()
    assert sel.is_cuda and y.is_cuda and x.grad.is_cuda
    np.testing.assert_allclose(_host(sel), tsel.detach().numpy(), **_tol(dtype))
    np.testing.assert_allclose(_host(y), ty.detach().numpy(), **_tol(dtype))
    np.testing.assert_allclose(_host(x.grad), tx.grad.numpy(), **_tol(dtype))


def test_random_fills_on_device(sim_cuda):
    x = vl.empty(1000).cuda()
    with sim_cuda.forbid_host_sync():
        x.normal_(2.0, 0.5)
        y = vl.empty(1000).cuda().uniform_(-1, 1)
        z = vl.empty(1000).cuda().exponential_(2.0)
    assert x.is_cuda and y.is_cuda and z.is_cuda
    assert abs(float(_host(x).mean()) - 2.0) < 0.1
    assert _host(y).min() >= -1 and _host(y).max() <= 1
    assert _host(z).min() >= 0


def test_apply_on_device_is_cpu_only(sim_cuda):
    with pytest.raises(TypeError, match="CPU tensors"):
        vl.zeros(3).cuda().apply_(lambda v: v + 1)


def test_integer_results_on_device_match_cpu(sim_cuda):
    def both(fn, *arrays, no_sync=False):
        cpu = fn(*[vl.tensor(a) for a in arrays])
        dev_in = [vl.tensor(a).cuda() for a in arrays]
        with sim_cuda.forbid_host_sync() if no_sync else _null():
            dev = fn(*dev_in)
        cpu, dev = (cpu if isinstance(cpu, tuple) else (cpu,)), (dev if isinstance(dev, tuple) else (dev,))
        for c, d in zip(cpu, dev):
            assert d.is_cuda and d.dtype == c.dtype
            np.testing.assert_array_equal(_host(d), c.numpy())
    ints = np.array([3, 1, 1, 4, 3, 3])
    both(lambda i: vl.unravel_index(i, (2, 3)), ints, no_sync=True)
    both(lambda x: vl.searchsorted(vl.sort(x, 1).values, x[:, :2]), X34, no_sync=True)
    both(lambda x: vl.bucketize(x, vl.tensor([-0.5, 0.0, 0.5], dtype=x.dtype).to(x.device)), X34, no_sync=True)
    both(lambda x: vl.cummax(x, 1).indices, X34, no_sync=True)
    both(lambda i: vl.bincount(i, minlength=6), ints)
    both(lambda x: vl.histc(x, 5, -2, 2), X34)
    both(lambda x: vl.histogram(x, 4, range=(-2.0, 2.0)).hist, X34)
    both(lambda i: vl.unique_consecutive(i, return_counts=True), ints)
    both(lambda i: vl.repeat_interleave(i, 2), ints)
    t = vl.tril_indices(4, 3, -1, device="cuda")
    assert t.is_cuda
    np.testing.assert_array_equal(_host(t), vl.tril_indices(4, 3, -1).numpy())


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (3, 3)])
def test_geqrf_on_device_matches_lapack(shape, sim_cuda):
    a = R.standard_normal(shape)
    a[..., 1:, 0] = 0.0 if shape == (3, 3) else a[..., 1:, 0]   # a column needing no reflection
    cpu = vl.geqrf(vl.tensor(a))
    with sim_cuda.forbid_host_sync():
        dev = vl.geqrf(vl.tensor(a).cuda())
    for c, d in zip(cpu, dev):
        assert d.is_cuda and d.dtype == c.dtype
        np.testing.assert_allclose(_host(d), c.numpy(), rtol=1e-9, atol=1e-12)


def test_lu_info_on_device_matches_cpu(sim_cuda):
    a = R.standard_normal((3, 4, 4))
    a[1, :, 2] = 0.0                          # a singular matrix: a zero pivot at column 3
    a[2, 1] = 2 * a[2, 0]                     # rank-deficient rows
    cpu = vl.linalg.lu_factor_ex(vl.tensor(a))
    with sim_cuda.forbid_host_sync():
        dev = vl.linalg.lu_factor_ex(vl.tensor(a).cuda())
    for c, d in zip(cpu, dev):
        assert d.is_cuda and d.dtype == c.dtype
        np.testing.assert_allclose(_host(d), c.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("scale", [0.1, 3.0], ids=["small", "squared"])
def test_matrix_exp_on_device_matches_cpu(dtype, scale, sim_cuda):
    """matrix_exp reads one norm on the host (the number of squarings), as PyTorch's CUDA code;
    its backward (the exp of a block matrix) reads that block's norm."""
    a = R.standard_normal((2, 3, 3)) * scale
    cpu, dev = _run_both(lambda x: vl.linalg.matrix_exp(x), [a], dtype, sim_cuda, sync_ok=True)
    tol = dict(rtol=1e-9, atol=1e-9) if dtype == np.float64 else dict(rtol=1e-3, atol=1e-3)
    for c, d in zip(list(cpu[0]) + cpu[1], list(dev[0]) + dev[1]):
        assert d.is_cuda and d.dtype == c.dtype
        np.testing.assert_allclose(_host(d), _host(c), **tol)


def test_cuda_index_on_cpu_tensor_raises_torchs_error(sim_cuda):
    with pytest.raises(RuntimeError, match="same device"):
        vl.zeros(4)[vl.tensor([1, 2]).cuda()]


def test_inv_ex_solve_ex_info_on_device(sim_cuda):
    good = _spd(3, (2,))
    bad = good.copy()
    bad[1, 2] = bad[1, 0]                     # a singular matrix in the batch
    b = R.standard_normal((2, 3, 2))
    for a in (good, bad):
        for fn in (lambda m: vl.linalg.inv_ex(m), lambda m: vl.linalg.solve_ex(m, vl.tensor(b).to(m.device))):
            cpu = fn(vl.tensor(a))
            dev = fn(vl.tensor(a).cuda())
            for c, d in zip(cpu, dev):
                assert d.is_cuda and d.dtype == c.dtype
                np.testing.assert_allclose(_host(d), c.numpy(), rtol=1e-9, atol=1e-12)
    with pytest.raises(vl.linalg.LinAlgError, match="singular"):
        vl.linalg.inv_ex(vl.tensor(bad).cuda(), check_errors=True)


def test_cholesky_ex_info_on_device(sim_cuda):
    a = _spd(3, (3,))
    a[1, 2, 2] = -50.0                        # not positive-definite at the third leading minor
    a[2, 0, 0] = -1.0                         # ... at the first
    cpu = vl.linalg.cholesky_ex(vl.tensor(a))
    with sim_cuda.forbid_host_sync():
        dev = vl.linalg.cholesky_ex(vl.tensor(a).cuda())
    assert dev.info.is_cuda
    np.testing.assert_array_equal(_host(dev.info), cpu.info.numpy())
    np.testing.assert_allclose(_host(dev.L)[0], cpu.L.numpy()[0], rtol=1e-12)
    assert np.isnan(_host(dev.L)[1, 2, 2]) and np.isnan(_host(dev.L)[2]).any()
    with pytest.raises(vl.linalg.LinAlgError, match="not positive-definite"):
        vl.linalg.cholesky_ex(vl.tensor(a).cuda(), check_errors=True)

"""torch.linalg decompositions and the rest of torch.linalg (varlens/ops/linalg.py): values and
gradients against PyTorch, float64 finite-difference checks, and bad-input errors.

Losses on eigenvectors and singular vectors are gauge-invariant (|V|, V*V, U diag(S) Vh),
since both libraries may pick either sign of each vector."""
import math

import numpy as np
import pytest
import torch

import varlens as vl
from varlens.autograd import gradcheck

from conftest import assert_close

RNG = np.random.default_rng(1234)


def N(*shape):
    return RNG.standard_normal(shape)


def SPD(*shape):
    x = RNG.standard_normal(shape)
    return x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])


def SYM(*shape):
    x = RNG.standard_normal(shape)
    return (x + np.swapaxes(x, -1, -2)) / 2


def LOWER(*shape):
    return np.tril(RNG.standard_normal(shape)) + 3 * np.eye(shape[-1])


def UPPER(*shape):
    return np.triu(RNG.standard_normal(shape)) + 3 * np.eye(shape[-1])


def _outs(o):
    return list(o) if isinstance(o, (tuple, list)) else [o]


def parity(fv, ft, arrays, rtol=1e-7, atol=1e-9, what=""):
    """Same values and the same gradients (of a fixed random weighting of every output)."""
    vs = [vl.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    ov, ot = _outs(fv(*vs)), _outs(ft(*ts))
    assert len(ov) == len(ot), what
    lv, lt = 0, 0
    for i, (a, b) in enumerate(zip(ov, ot)):
        assert_close(a, b, rtol, atol, what=f"{what} value {i}")
        w = RNG.standard_normal(tuple(b.shape))
        lv = lv + (a * vl.tensor(w)).sum()
        lt = lt + (b * torch.tensor(w)).sum()
    lv.backward()
    lt.backward()
    for i, (v, t) in enumerate(zip(vs, ts)):
        assert v.grad is not None, f"{what}: no gradient for input {i}"
        assert_close(v.grad, t.grad, rtol * 100, atol * 100, what=f"{what} grad {i}")


def sym(m):
    return lambda x: (x + m.swapaxes(x, -1, -2)) / 2


L_, T_ = vl.linalg, torch.linalg

PARITY = [
    # Cholesky
    ("cholesky", lambda a: L_.cholesky(a), lambda a: T_.cholesky(a), [SPD(2, 4, 4)]),
    ("cholesky upper", lambda a: L_.cholesky(a, upper=True), lambda a: T_.cholesky(a, upper=True), [SPD(4, 4)]),
    ("torch.cholesky", lambda a: vl.cholesky(a), lambda a: torch.cholesky(a), [SPD(3, 3)]),
    ("Tensor.cholesky upper", lambda a: a.cholesky(True), lambda a: a.cholesky(True), [SPD(3, 3)]),
    ("cholesky_ex", lambda a: L_.cholesky_ex(a).L, lambda a: T_.cholesky_ex(a).L, [SPD(3, 3)]),
    # eigh (gauge-invariant functions of the eigenvectors)
    ("eigh", lambda a: (lambda r: (r.eigenvalues, r.eigenvectors.abs()))(L_.eigh(a)),
     lambda a: (lambda r: (r.eigenvalues, r.eigenvectors.abs()))(T_.eigh(a)), [SYM(2, 4, 4)]),
    ("eigh UPLO=U", lambda a: (lambda r: (r.eigenvalues, r.eigenvectors ** 2))(L_.eigh(a, UPLO="U")),
     lambda a: (lambda r: (r.eigenvalues, r.eigenvectors ** 2))(T_.eigh(a, UPLO="U")), [N(4, 4)]),
    ("eigvalsh", lambda a: L_.eigvalsh(a), lambda a: T_.eigvalsh(a), [SYM(3, 5, 5)]),
    ("eigvalsh U", lambda a: L_.eigvalsh(a, "U"), lambda a: T_.eigvalsh(a, "U"), [N(3, 3)]),
    # SVD
    ("svd tall", lambda a: (lambda r: (r.S, r.U.abs(), r.Vh.abs()))(L_.svd(a, full_matrices=False)),
     lambda a: (lambda r: (r.S, r.U.abs(), r.Vh.abs()))(T_.svd(a, full_matrices=False)), [N(5, 3)]),
    ("svd wide batched", lambda a: (lambda r: (r.S, r.U ** 2, r.Vh ** 2))(L_.svd(a, full_matrices=False)),
     lambda a: (lambda r: (r.S, r.U ** 2, r.Vh ** 2))(T_.svd(a, full_matrices=False)), [N(2, 3, 5)]),
    ("svd full tall", lambda a: (lambda r: (r.S, r.U[:, :3].abs(), r.Vh.abs()))(L_.svd(a)),
     lambda a: (lambda r: (r.S, r.U[:, :3].abs(), r.Vh.abs()))(T_.svd(a)), [N(5, 3)]),
    ("svd full wide", lambda a: (lambda r: (r.S, r.U.abs(), r.Vh[:3].abs()))(L_.svd(a)),
     lambda a: (lambda r: (r.S, r.U.abs(), r.Vh[:3].abs()))(T_.svd(a)), [N(3, 5)]),
    ("svd square", lambda a: (lambda r: r.U * r.S[None, :] @ r.Vh)(L_.svd(a)),
     lambda a: (lambda r: r.U * r.S[None, :] @ r.Vh)(T_.svd(a)), [N(4, 4)]),
    ("svdvals", lambda a: L_.svdvals(a), lambda a: T_.svdvals(a), [N(2, 4, 3)]),
    ("torch.svd V", lambda a: (lambda r: (r.S, r.U.abs(), r.V.abs()))(vl.svd(a)),
     lambda a: (lambda r: (r.S, r.U.abs(), r.V.abs()))(torch.svd(a)), [N(5, 3)]),
    # QR (the same LAPACK routines: Q and R compared as they come)
    ("qr tall", lambda a: tuple(L_.qr(a)), lambda a: tuple(T_.qr(a)), [N(5, 3)]),
    ("qr square batched", lambda a: tuple(L_.qr(a)), lambda a: tuple(T_.qr(a)), [N(2, 4, 4)]),
    ("qr wide", lambda a: tuple(L_.qr(a)), lambda a: tuple(T_.qr(a)), [N(3, 5)]),
    ("qr complete wide", lambda a: tuple(L_.qr(a, "complete")), lambda a: tuple(T_.qr(a, "complete")), [N(2, 4)]),
    ("torch.qr", lambda a: tuple(vl.qr(a)), lambda a: tuple(torch.qr(a)), [N(4, 3)]),
    # pseudo-inverse, least squares
    ("pinv tall", lambda a: L_.pinv(a), lambda a: T_.pinv(a), [N(5, 3)]),
    ("pinv wide batched", lambda a: L_.pinv(a), lambda a: T_.pinv(a), [N(2, 3, 4)]),
    ("pinv hermitian", lambda a: L_.pinv(a, hermitian=True), lambda a: T_.pinv(a, hermitian=True), [SPD(4, 4)]),
    ("pinverse", lambda a: vl.pinverse(a), lambda a: torch.pinverse(a), [N(4, 3)]),
    ("lstsq", lambda a, b: L_.lstsq(a, b).solution, lambda a, b: T_.lstsq(a, b).solution, [N(6, 3), N(6, 2)]),
    ("lstsq vector b", lambda a, b: L_.lstsq(a, b).solution, lambda a, b: T_.lstsq(a, b).solution, [N(5, 3), N(5)]),
    ("lstsq batched broadcast", lambda a, b: L_.lstsq(a, b).solution, lambda a, b: T_.lstsq(a, b).solution,
     [N(2, 5, 3), N(1, 5, 2)]),
    ("lstsq gelsd", lambda a, b: (lambda r: (r.solution, r.residuals, r.singular_values))(L_.lstsq(a, b, driver="gelsd")),
     lambda a, b: (lambda r: (r.solution, r.residuals, r.singular_values))(T_.lstsq(a, b, driver="gelsd")),
     [N(6, 3), N(6, 2)]),
    # exp, powers, triangular and Cholesky solves
    ("matrix_exp", lambda a: L_.matrix_exp(a), lambda a: T_.matrix_exp(a), [N(2, 3, 3) * 0.7]),
    ("Tensor.matrix_exp", lambda a: a.matrix_exp(), lambda a: a.matrix_exp(), [N(4, 4) * 0.5]),
    ("matrix_power 3", lambda a: L_.matrix_power(a, 3), lambda a: T_.matrix_power(a, 3), [N(2, 3, 3)]),
    ("matrix_power 6", lambda a: vl.matrix_power(a, 6), lambda a: torch.matrix_power(a, 6), [N(3, 3) * 0.6]),
    ("matrix_power -2", lambda a: L_.matrix_power(a, -2), lambda a: T_.matrix_power(a, -2), [SPD(3, 3)]),
    ("solve_triangular lower", lambda a, b: L_.solve_triangular(a, b, upper=False),
     lambda a, b: T_.solve_triangular(a, b, upper=False), [LOWER(4, 4), N(4, 2)]),
    ("solve_triangular upper batched", lambda a, b: L_.solve_triangular(a, b, upper=True),
     lambda a, b: T_.solve_triangular(a, b, upper=True), [UPPER(2, 3, 3), N(3, 2)]),
    ("solve_triangular right", lambda a, b: L_.solve_triangular(a, b, upper=True, left=False),
     lambda a, b: T_.solve_triangular(a, b, upper=True, left=False), [UPPER(3, 3), N(2, 3)]),
    ("solve_triangular unit", lambda a, b: L_.solve_triangular(a, b, upper=False, unitriangular=True),
     lambda a, b: T_.solve_triangular(a, b, upper=False, unitriangular=True), [N(3, 3), N(3, 2)]),
    ("solve_triangular full A", lambda a, b: L_.solve_triangular(a, b, upper=False, left=False),
     lambda a, b: T_.solve_triangular(a, b, upper=False, left=False), [N(3, 3) + 4 * np.eye(3), N(2, 3)]),
    ("triangular_solve", lambda b, a: tuple(vl.triangular_solve(b, a)), lambda b, a: tuple(torch.triangular_solve(b, a)),
     [N(3, 2), UPPER(3, 3)]),
    ("triangular_solve transpose", lambda b, a: vl.triangular_solve(b, a, False, True).solution,
     lambda b, a: torch.triangular_solve(b, a, False, True).solution, [N(3, 2), LOWER(3, 3)]),
    ("cholesky_solve", lambda b, l: vl.cholesky_solve(b, l), lambda b, l: torch.cholesky_solve(b, l),
     [N(2, 4, 3), LOWER(2, 4, 4)]),
    ("cholesky_solve upper", lambda b, l: vl.cholesky_solve(b, l, True), lambda b, l: torch.cholesky_solve(b, l, True),
     [N(3, 2), UPPER(3, 3)]),
    ("cholesky_inverse", lambda l: vl.cholesky_inverse(l), lambda l: torch.cholesky_inverse(l), [LOWER(3, 3)]),
    # compositions
    ("linalg.vander", lambda x: L_.vander(x), lambda x: T_.vander(x), [N(2, 4)]),
    ("linalg.vander N=5 at 0", lambda x: L_.vander(x, N=5), lambda x: T_.vander(x, N=5),
     [np.array([0.0, 1.5, -0.5])]),
    ("multi_dot", lambda a, b, c, d: L_.multi_dot([a, b, c, d]), lambda a, b, c, d: T_.multi_dot([a, b, c, d]),
     [N(3), N(3, 6), N(6, 2), N(2)]),
    ("multi_dot matrices", lambda a, b, c: L_.multi_dot([a, b, c]), lambda a, b, c: T_.multi_dot([a, b, c]),
     [N(5, 2), N(2, 6), N(6, 3)]),
    ("linalg.cross", lambda a, b: L_.cross(a, b), lambda a, b: T_.cross(a, b), [N(2, 4, 3), N(1, 4, 3)]),
    ("linalg.diagonal", lambda a: L_.diagonal(a, offset=1), lambda a: T_.diagonal(a, offset=1), [N(2, 3, 4)]),
    ("torch.diagonal 3-D", lambda a: vl.diagonal(a, -1, 2, 0), lambda a: torch.diagonal(a, -1, 2, 0), [N(3, 2, 4)]),
    ("vecdot", lambda a, b: L_.vecdot(a, b, dim=0), lambda a, b: T_.vecdot(a, b, dim=0), [N(3, 2), N(3, 2)]),
    ("tensorinv", lambda a: L_.tensorinv(a, ind=2), lambda a: T_.tensorinv(a, ind=2),
     [(np.eye(6) * 3 + N(6, 6)).reshape(2, 3, 6)]),
    ("tensorsolve", lambda a, b: L_.tensorsolve(a, b), lambda a, b: T_.tensorsolve(a, b),
     [(np.eye(6) * 3 + N(6, 6)).reshape(2, 3, 2, 3), N(2, 3)]),
    ("tensorsolve dims", lambda a, b: L_.tensorsolve(a, b, dims=(0,)), lambda a, b: T_.tensorsolve(a, b, dims=(0,)),
     [(np.eye(6) * 3 + N(6, 6)).reshape(6, 2, 3), N(2, 3)]),
    ("cond", lambda a: L_.cond(a), lambda a: T_.cond(a), [N(2, 3, 3)]),
    # torch cannot differentiate cond(A, 'fro') (an in-place error in its backward): values only
    ("cond fro", lambda a: L_.cond(a, "fro"), lambda a: T_.cond(a, "fro"), [N(3, 3)], False),
    ("cond 1 batched", lambda a: L_.cond(a, 1), lambda a: T_.cond(a, 1), [N(2, 3, 3)], False),
    ("householder_product", lambda a, t: L_.householder_product(a, t), lambda a, t: T_.householder_product(a, t),
     [N(2, 5, 3), N(2, 2)]),
    ("householder_product from geqrf", lambda a, t: L_.householder_product(a, t),
     lambda a, t: T_.householder_product(a, t), [a for a in (lambda r: [r[0].numpy(), r[1].numpy()])(torch.geqrf(torch.tensor(N(4, 3))))]),
    ("orgqr", lambda a, t: vl.orgqr(a, t), lambda a, t: torch.orgqr(a, t), [N(4, 3), N(3)]),
    ("lu_unpack", lambda lu: tuple(vl.lu_unpack(lu, vl.tensor(np.array([[2, 3, 3], [1, 2, 3]], np.int32)))),
     lambda lu: tuple(torch.lu_unpack(lu, torch.tensor([[2, 3, 3], [1, 2, 3]], dtype=torch.int32))), [N(2, 4, 3)]),
    ("torch.lu + lu_solve", lambda a, b: vl.lu_solve(b, *vl.lu(a)), lambda a, b: torch.lu_solve(b, *torch.lu(a)),
     [N(3, 3), N(3, 2)]),
    ("svd_lowrank of rank 2", lambda a: (lambda r: (r[1], (r[0] * r[1][None]) @ r[2].mT))(vl.svd_lowrank(a, q=2)),
     lambda a: (lambda r: (r[1], (r[0] * r[1][None]) @ r[2].mT))(torch.svd_lowrank(a, q=2)), [N(6, 2) @ N(2, 5)]),
    ("linalg.matmul", lambda a, b: L_.matmul(a, b), lambda a, b: T_.matmul(a, b), [N(2, 3), N(3)]),
    ("inv_ex", lambda a: L_.inv_ex(a).inverse, lambda a: T_.inv_ex(a).inverse, [SPD(3, 3)]),
    ("solve_ex", lambda a, b: L_.solve_ex(a, b).result, lambda a, b: T_.solve_ex(a, b).result, [SPD(2, 3, 3), N(3)]),
    ("solve_ex right", lambda a, b: L_.solve_ex(a, b, left=False).result,
     lambda a, b: T_.solve_ex(a, b, left=False).result, [SPD(3, 3), N(2, 3)]),
    # LU (P is a constant; L, U and the compact LU differentiable)
    ("lu square", lambda a: tuple(L_.lu(a)), lambda a: tuple(T_.lu(a)), [N(2, 4, 4)]),
    ("lu tall", lambda a: tuple(L_.lu(a))[1:], lambda a: tuple(T_.lu(a))[1:], [N(5, 3)]),
    ("lu wide", lambda a: tuple(L_.lu(a))[1:], lambda a: tuple(T_.lu(a))[1:], [N(2, 3, 5)]),
    ("lu_factor", lambda a: L_.lu_factor(a).LU, lambda a: T_.lu_factor(a).LU, [N(2, 5, 3)]),
]
for _left in (True, False):
    for _tr in (True, False):
        PARITY.append((f"ormqr left={_left} transpose={_tr}",
                       lambda a, t, c, l=_left, j=_tr: vl.ormqr(a, t, c, l, j),
                       lambda a, t, c, l=_left, j=_tr: torch.ormqr(a, t, c, l, j),
                       [N(4, 3), N(3), N(4, 2) if _left else N(2, 4)]))
for _left in (True, False):
    for _adj in (True, False):
        PARITY.append((f"lu_solve left={_left} adjoint={_adj}",
                       lambda a, b, l=_left, j=_adj: L_.lu_solve(*L_.lu_factor(a), b, left=l, adjoint=j),
                       lambda a, b, l=_left, j=_adj: T_.lu_solve(*T_.lu_factor(a), b, left=l, adjoint=j),
                       [N(2, 3, 3), N(2, 3, 3)]))
for _ord in ("nuc", 2, -2, 1, -1, math.inf, -math.inf):
    PARITY.append((f"matrix_norm {_ord}", lambda a, o=_ord: L_.matrix_norm(a, o),
                   lambda a, o=_ord: T_.matrix_norm(a, o), [N(2, 3, 4)]))
PARITY += [
    ("matrix_norm keepdim dims", lambda a: L_.matrix_norm(a, 1, dim=(0, 2), keepdim=True),
     lambda a: T_.matrix_norm(a, 1, dim=(0, 2), keepdim=True), [N(3, 2, 4)]),
    ("matrix_norm nuc keepdim", lambda a: L_.matrix_norm(a, "nuc", dim=(2, 0), keepdim=True),
     lambda a: T_.matrix_norm(a, "nuc", dim=(2, 0), keepdim=True), [N(3, 2, 4)]),
    ("linalg.norm 2-D ord 2", lambda a: L_.norm(a, 2), lambda a: T_.norm(a, 2), [N(3, 4)]),
    ("linalg.norm nuc", lambda a: L_.norm(a, "nuc"), lambda a: T_.norm(a, "nuc"), [N(3, 4)]),
    ("linalg.norm vector ord 3", lambda a: L_.norm(a, 3), lambda a: T_.norm(a, 3), [N(5)]),
]


@pytest.mark.parametrize("case", PARITY, ids=[p[0] for p in PARITY])
def test_matches_torch(case):
    name, fv, ft, arrays = case[:4]
    if len(case) > 4 and not case[4]:  # values only
        for a, b in zip(_outs(fv(*[vl.tensor(x) for x in arrays])), _outs(ft(*[torch.tensor(x) for x in arrays]))):
            assert_close(a, b, what=name)
        return
    parity(fv, ft, arrays, what=name)


def _t(a):
    return vl.tensor(a, requires_grad=True)


def _sym(x):
    return (x + x.transpose(-2, -1)) * 0.5


def _spd(x):
    return x @ x.transpose(-2, -1) + 3 * vl.eye(x.shape[-1], dtype=x.dtype)


def _usv(r, k):
    return (r.U[..., :, :k] * r.S[..., None, :]) @ r.Vh[..., :k, :]


GRADCHECK = [
    ("cholesky", lambda x: L_.cholesky(_spd(x)), [N(2, 3, 3)]),
    ("cholesky upper", lambda x: L_.cholesky(_spd(x), upper=True), [N(3, 3)]),
    ("eigh values", lambda x: L_.eigh(_sym(x)).eigenvalues, [N(2, 4, 4)]),
    ("eigh |vectors|", lambda x: L_.eigh(_sym(x)).eigenvectors.abs(), [N(4, 4)]),
    ("eigvalsh", lambda x: L_.eigvalsh(_sym(x)), [N(3, 3)]),
    ("svd U S Vh tall", lambda x: _usv(L_.svd(x, full_matrices=False), 3), [N(5, 3)]),
    ("svd S tall", lambda x: L_.svd(x).S, [N(5, 3)]),
    ("svd |U| tall full", lambda x: L_.svd(x).U[..., :, :3].abs(), [N(5, 3)]),
    ("svd |Vh| wide", lambda x: L_.svd(x, full_matrices=False).Vh.abs(), [N(2, 3, 5)]),
    ("svd |U| |Vh| square", lambda x: L_.svd(x).U.abs() + L_.svd(x).Vh.abs(), [N(4, 4)]),
    ("svdvals", lambda x: L_.svdvals(x), [N(3, 4)]),
    ("qr Q tall", lambda x: L_.qr(x).Q, [N(5, 3)]),
    ("qr R tall", lambda x: L_.qr(x).R, [N(2, 5, 3)]),
    ("qr Q R wide", lambda x: L_.qr(x).Q.sum() + L_.qr(x).R, [N(3, 5)]),
    ("qr mode r", lambda x: L_.qr(x, mode="r").R, [N(4, 3)]),
    ("pinv", lambda x: L_.pinv(x), [N(4, 3)]),
    ("pinv hermitian", lambda x: L_.pinv(_sym(x) + 4 * vl.eye(3, dtype=x.dtype), hermitian=True), [N(3, 3)]),
    ("lstsq", lambda a, b: L_.lstsq(a, b).solution, [N(5, 3), N(5, 2)]),
    ("matrix_exp", lambda x: L_.matrix_exp(x), [N(2, 3, 3) * 0.5]),
    ("matrix_power -3", lambda x: L_.matrix_power(x, -3), [N(3, 3) + 3 * np.eye(3)]),
    ("solve_triangular", lambda a, b: L_.solve_triangular(a, b, upper=True), [UPPER(3, 3), N(3, 2)]),
    ("solve_triangular right unit", lambda a, b: L_.solve_triangular(a, b, upper=False, left=False,
                                                                     unitriangular=True), [N(3, 3), N(2, 3)]),
    # only L's triangle is read, so finite differences see the gradient through tril/triu
    ("cholesky_solve", lambda b, l: vl.cholesky_solve(b, l.tril()), [N(3, 2), LOWER(3, 3)]),
    ("cholesky_inverse upper", lambda l: vl.cholesky_inverse(l.triu(), True), [UPPER(3, 3)]),
    ("vander", lambda x: L_.vander(x, N=4), [N(3)]),
    ("multi_dot", lambda a, b, c: L_.multi_dot([a, b, c]), [N(3), N(3, 4), N(4, 2)]),
    ("cross", lambda a, b: L_.cross(a, b), [N(2, 3), N(2, 3)]),
    ("tensorinv", lambda a: L_.tensorinv(a, 1), [(np.eye(4) * 3 + N(4, 4)).reshape(4, 2, 2)]),
    ("matrix_norm nuc", lambda a: L_.matrix_norm(a, "nuc"), [N(3, 4)]),
    ("cond", lambda a: L_.cond(a), [N(3, 3)]),
    ("lu L U square", lambda a: (lambda r: r.L + r.U)(L_.lu(a)), [N(2, 3, 3)]),
    ("lu tall", lambda a: (lambda r: (r.L, r.U))(L_.lu(a)), [N(4, 2)]),
    ("lu wide", lambda a: (lambda r: (r.L, r.U))(L_.lu(a)), [N(2, 4)]),
    ("lu_solve", lambda lu, b: L_.lu_solve(lu, vl.tensor(np.array([2, 2, 3], np.int32)), b, adjoint=True),
     [N(3, 3) + 3 * np.eye(3), N(3, 2)]),
]


@pytest.mark.parametrize("name,fn,arrays", GRADCHECK, ids=[g[0] for g in GRADCHECK])
def test_gradcheck(name, fn, arrays):
    assert gradcheck(fn, tuple(_t(a) for a in arrays))


def test_second_derivatives_match_torch():
    """Backwards are recorded under create_graph: d/dA of the gradient's norm, against torch."""
    cases = [
        (lambda a: (L_.cholesky(a) ** 2).sum(), lambda a: (T_.cholesky(a) ** 2).sum(), SPD(3, 3)),
        (lambda a: (L_.eigh(a).eigenvalues ** 3).sum() + L_.eigh(a).eigenvectors.abs().sum(),
         lambda a: (T_.eigh(a).eigenvalues ** 3).sum() + T_.eigh(a).eigenvectors.abs().sum(), SYM(3, 3)),
        (lambda a: (L_.svdvals(a) ** 3).sum(), lambda a: (T_.svdvals(a) ** 3).sum(), N(4, 3)),
        (lambda a: L_.qr(a).R.sum() + (L_.qr(a).Q ** 3).sum(), lambda a: T_.qr(a).R.sum() + (T_.qr(a).Q ** 3).sum(),
         N(4, 3)),
        (lambda a: (L_.matrix_exp(a) ** 2).sum(), lambda a: (T_.matrix_exp(a) ** 2).sum(), N(3, 3) * 0.5),
        (lambda a: (L_.pinv(a) ** 2).sum(), lambda a: (T_.pinv(a) ** 2).sum(), N(4, 3)),
        (lambda a: (L_.lstsq(a, a[:, :2] + 1).solution ** 2).sum(),
         lambda a: (T_.lstsq(a, a[:, :2] + 1).solution ** 2).sum(), N(5, 3)),
        (lambda a: (L_.lu(a).U ** 2).sum() + (L_.lu(a).L ** 3).sum(),
         lambda a: (T_.lu(a).U ** 2).sum() + (T_.lu(a).L ** 3).sum(), N(3, 3)),
    ]
    for fv, ft, a in cases:
        va, ta = _t(a), torch.tensor(a, requires_grad=True)
        (gv,) = vl.autograd.grad(fv(va), va, create_graph=True)
        (gt,) = torch.autograd.grad(ft(ta), ta, create_graph=True)
        assert_close(gv, gt, 1e-6, 1e-8)
        (hv,) = vl.autograd.grad((gv ** 2).sum(), va)
        (ht,) = torch.autograd.grad((gt ** 2).sum(), ta)
        assert_close(hv, ht, 1e-5, 1e-7)


def test_lstsq_fields_match_torch():
    a, b = N(2, 6, 3), N(2, 6, 2)
    for driver in (None, "gelsy", "gelsd", "gelss", "gels"):
        rv = L_.lstsq(vl.tensor(a), vl.tensor(b), driver=driver)
        rt = T_.lstsq(torch.tensor(a), torch.tensor(b), driver=driver)
        assert type(rv).__name__ == "linalg_lstsq"
        for f in ("solution", "residuals", "rank", "singular_values"):
            assert_close(getattr(rv, f), getattr(rt, f), 1e-7, 1e-9, what=f"{driver} {f}")
            assert getattr(rv, f).dtype == np.dtype(str(getattr(rt, f).dtype).replace("torch.", "")), f
    # rank-deficient: residuals are left empty, rank counts the independent columns
    ad = np.concatenate([a[0], a[0][:, :1]], 1)
    rv = L_.lstsq(vl.tensor(ad), vl.tensor(b[0]), driver="gelsd")
    rt = T_.lstsq(torch.tensor(ad), torch.tensor(b[0]), driver="gelsd")
    assert rv.rank.item() == rt.rank.item() == 3 and rv.residuals.numel() == 0 == rt.residuals.numel()


def test_matrix_rank_matches_torch():
    a = N(3, 5, 2) @ N(3, 2, 4)  # rank 2
    for kw in ({}, {"atol": 1.0}, {"rtol": 0.5}, {"atol": 0.1, "rtol": 0.2}, {"hermitian": False}):
        assert_close(L_.matrix_rank(vl.tensor(a), **kw), T_.matrix_rank(torch.tensor(a), **kw), what=str(kw))
    s = SPD(4, 4)
    s2 = s - np.linalg.eigvalsh(s)[0] * np.eye(4)  # one zero eigenvalue
    assert L_.matrix_rank(vl.tensor(s2), hermitian=True).item() == T_.matrix_rank(torch.tensor(s2), hermitian=True).item()
    r = L_.matrix_rank(vl.tensor(a))
    assert r.dtype == np.int64 and r.tolist() == [2, 2, 2]


def test_no_grad_path_equals_recorded_path_and_float32():
    a = SYM(2, 3, 3).astype(np.float32)
    x = vl.tensor(a)
    w0, v0 = L_.eigh(x)
    w1, v1 = L_.eigh(vl.tensor(a, requires_grad=True))
    np.testing.assert_allclose(w0.numpy(), w1.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(np.abs(v0.numpy()), np.abs(v1.detach().numpy()), rtol=1e-5, atol=1e-6)
    for f in (lambda t: L_.eigh(t).eigenvectors, lambda t: L_.svd(t).U, lambda t: L_.qr(t).R,
              lambda t: L_.cholesky(t @ t.mT + 3 * vl.eye(3)), lambda t: L_.pinv(t), lambda t: L_.matrix_exp(t),
              lambda t: L_.svdvals(t)):
        assert f(x).dtype == np.float32
        assert f(vl.tensor(a, requires_grad=True)).dtype == np.float32
    # mode 'r' and 'complete' shapes, as torch
    q, r = L_.qr(vl.tensor(N(5, 3)), mode="complete")
    assert q.shape == (5, 5) and r.shape == (5, 3)
    q, r = L_.qr(vl.tensor(N(5, 3)), mode="r")
    tq, tr = T_.qr(torch.tensor(N(5, 3)), mode="r")
    assert tuple(q.shape) == tuple(tq.shape) == (0,) and r.shape == (3, 3)
    u, s, vh = L_.svd(vl.tensor(N(5, 3)))
    assert u.shape == (5, 5) and s.shape == (3,) and vh.shape == (3, 3)


def test_named_tuples_and_methods():
    a = vl.tensor(SPD(3, 3))
    assert type(L_.eigh(a)).__name__ == "linalg_eigh" and L_.eigh(a)._fields == ("eigenvalues", "eigenvectors")
    assert L_.qr(a)._fields == ("Q", "R") and L_.svd(a)._fields == ("U", "S", "Vh")
    assert vl.svd(a)._fields == ("U", "S", "V") and L_.cholesky_ex(a)._fields == ("L", "info")
    assert np.allclose((a.cholesky() @ a.cholesky().mT).numpy(), a.numpy())
    u, s, v = a.svd()
    assert np.allclose(((u * s) @ v.mT).numpy(), a.numpy())
    q, r = a.qr()
    assert np.allclose((q @ r).numpy(), a.numpy())
    assert np.allclose((a.pinverse() @ a).numpy(), np.eye(3))
    assert np.allclose(a.matrix_power(2).numpy(), a.numpy() @ a.numpy())
    assert np.allclose(a.cholesky_inverse().numpy(), torch.tensor(a.numpy()).cholesky_inverse().numpy())
    m = L_.matrix_power(vl.tensor(N(2, 3, 3)), 0)
    assert np.array_equal(m.numpy(), np.broadcast_to(np.eye(3), (2, 3, 3)))


def test_cholesky_not_positive_definite():
    bad = np.diag([1.0, -1.0, 2.0])
    with pytest.raises(L_.LinAlgError, match="not positive-definite.*leading minor of order 2"):
        L_.cholesky(vl.tensor(bad))
    assert issubclass(L_.LinAlgError, RuntimeError)
    batch = np.stack([np.eye(3), bad])
    with pytest.raises(RuntimeError, match=r"\(Batch element 1\).*order 2"):
        L_.cholesky(vl.tensor(batch))
    with pytest.raises(RuntimeError, match="^cholesky: .*positive-definite"):
        vl.cholesky(vl.tensor(bad))
    rv, rt = L_.cholesky_ex(vl.tensor(batch)), T_.cholesky_ex(torch.tensor(batch))
    assert rv.info.tolist() == rt.info.tolist() == [0, 2] and rv.info.dtype == np.int32
    assert_close(rv.L[0], rt.L[0])
    with pytest.raises(RuntimeError, match="positive-definite"):
        L_.cholesky_ex(vl.tensor(batch), check_errors=True)


def test_bad_input_errors():
    sq = vl.tensor(N(3, 4))
    for fn, name in ((L_.cholesky, "cholesky"), (L_.eigh, "eigh"), (L_.eigvalsh, "eigvalsh"),
                     (L_.matrix_exp, "matrix_exp"), (L_.cholesky_ex, "cholesky_ex")):
        with pytest.raises(RuntimeError, match=rf"linalg\.{name}: A must be a square matrix.*\(3, 4\)"):
            fn(sq)
        with pytest.raises(RuntimeError, match=rf"linalg\.{name}: .*A must have at least 2 dimensions.*\(3,\)"):
            fn(vl.tensor(N(3)))
        with pytest.raises(RuntimeError, match=rf"linalg\.{name}: .*floating point.*A.*int64"):
            fn(vl.ones(3, 3, dtype=vl.int64))
    for fn, name in ((L_.svd, "svd"), (L_.qr, "qr"), (L_.pinv, "pinv"), (L_.svdvals, "svdvals"),
                     (L_.matrix_rank, "matrix_rank")):
        with pytest.raises(RuntimeError, match=rf"linalg\.{name}: .*at least 2 dimensions"):
            fn(vl.tensor(N(4)))
        with pytest.raises(RuntimeError, match=rf"linalg\.{name}: .*int64"):
            fn(vl.ones(3, 3, dtype=vl.int64))
    with pytest.raises(RuntimeError, match="low precision.*float16"):
        L_.cholesky(vl.ones(2, 2, dtype=vl.float16))
    with pytest.raises(TypeError, match="argument 'A' must be a Tensor, got list"):
        L_.eigh([[1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(RuntimeError, match="mode must be 'reduced', 'complete' or 'r', got 'full'"):
        L_.qr(sq, mode="full")
    with pytest.raises(RuntimeError, match="UPLO must be 'L' or 'U', got 'X'"):
        L_.eigh(vl.eye(2, dtype=vl.float64), UPLO="X")
    with pytest.raises(RuntimeError, match="solve_triangular: incompatible shapes.*needs 3 rows"):
        L_.solve_triangular(vl.tensor(UPPER(3, 3)), vl.tensor(N(4, 2)), upper=True)
    with pytest.raises(RuntimeError, match="same dtype"):
        L_.solve_triangular(vl.tensor(UPPER(3, 3)), vl.tensor(N(3, 2).astype(np.float32)), upper=True)
    with pytest.raises(RuntimeError, match="lstsq: A has 5 rows, so B must have 5 rows"):
        L_.lstsq(vl.tensor(N(5, 3)), vl.tensor(N(4, 2)))
    with pytest.raises(RuntimeError, match="driver must be one of"):
        L_.lstsq(vl.tensor(N(5, 3)), vl.tensor(N(5, 2)), driver="magic")
    with pytest.raises(RuntimeError, match=r"multi_dot: tensors\[1\] and tensors\[2\] cannot be multiplied"):
        L_.multi_dot([vl.tensor(N(2, 3)), vl.tensor(N(3, 4)), vl.tensor(N(5, 2))])
    with pytest.raises(RuntimeError, match=r"multi_dot: tensors\[1\] must be 2-D"):
        L_.multi_dot([vl.tensor(N(2, 3)), vl.tensor(N(3)), vl.tensor(N(3, 2))])
    with pytest.raises(RuntimeError, match="at least 2 tensors"):
        L_.multi_dot([vl.tensor(N(2, 3))])
    with pytest.raises(TypeError, match="argument 'n' must be an int, got float"):
        L_.matrix_power(vl.tensor(N(2, 2)), 1.5)
    with pytest.raises(RuntimeError, match=r"matrix_power: A must be a square.*\(2, 3\)"):
        L_.matrix_power(vl.tensor(N(2, 3)), 2)
    with pytest.raises(RuntimeError, match="cross: inputs dimension -1 must have length 3"):
        L_.cross(vl.tensor(N(2, 4)), vl.tensor(N(2, 4)))
    with pytest.raises(IndexError, match="dim1=3 is out of range"):
        L_.diagonal(vl.tensor(N(2, 3)), dim1=3)
    with pytest.raises(RuntimeError, match="tensorinv: expected prod"):
        L_.tensorinv(vl.tensor(N(2, 3, 4)), ind=1)
    with pytest.raises(RuntimeError, match="matrix_norm: order 3 not supported"):
        L_.matrix_norm(sq, 3)
    with pytest.raises(NotImplementedError, match="no complex dtypes"):
        L_.eig(sq)
    with pytest.raises(NotImplementedError, match="LDL"):
        L_.ldl_factor(sq)
    with pytest.raises(RuntimeError, match="householder_product: expected A of shape"):
        L_.householder_product(vl.tensor(N(3, 2)), vl.tensor(N(3)))
    with pytest.raises(RuntimeError, match="vander: N must be greater than 1"):
        L_.vander(vl.tensor(N(3)), N=1)


def test_backward_refusals_are_clear():
    x = _t(N(5, 3))
    q, r = L_.qr(x, mode="complete")
    with pytest.raises(RuntimeError, match="mode='complete' when the input has more rows than columns"):
        q.sum().backward()


def test_lu_pivots_and_singular_ex_functions():
    a = N(2, 4, 3)
    rv, rt = L_.lu_factor_ex(vl.tensor(a)), T_.lu_factor_ex(torch.tensor(a))
    assert rv.pivots.tolist() == rt.pivots.tolist() and rv.pivots.dtype == np.int32
    assert rv.info.tolist() == rt.info.tolist() == [0, 0]
    sing = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    assert L_.lu_factor_ex(vl.tensor(sing)).info.item() == T_.lu_factor_ex(torch.tensor(sing)).info.item() > 0
    z = np.zeros((2, 3, 3))
    iv, it = L_.inv_ex(vl.tensor(z)), T_.inv_ex(torch.tensor(z))
    assert iv.info.tolist() == it.info.tolist() == [1, 1] and iv.info.dtype == np.int32
    sv, st = L_.solve_ex(vl.tensor(z[0]), vl.ones(3, dtype=vl.float64)), T_.solve_ex(torch.tensor(z[0]), torch.ones(3, dtype=torch.float64))
    assert sv.info.item() == st.info.item() == 1 and tuple(sv.result.shape) == tuple(st.result.shape) == (3,)
    with pytest.raises(RuntimeError, match="singular"):
        L_.inv_ex(vl.tensor(z), check_errors=True)
    with pytest.raises(RuntimeError, match="pivot=False.*not implemented"):
        L_.lu(vl.tensor(a), pivot=False)
    with pytest.raises(RuntimeError, match="pivots must be an integer tensor of shape"):
        L_.lu_solve(vl.tensor(N(3, 3)), vl.tensor(np.ones(3)), vl.tensor(N(3, 1)))


def test_composite_double_backward_with_dependent_inputs():
    """Engine fix (varlens/core/function.py): a fused op's composite gives each argument its
    partial derivative, also when one argument is computed from another (b = f(a))."""
    a = N(4, 4) + 4 * np.eye(4)
    c = N(4, 2)
    for f_v, f_t in ((lambda x: L_.solve(x, x @ vl.tensor(c) + 1.0), lambda x: T_.solve(x, x @ torch.tensor(c) + 1.0)),
                     (lambda x: L_.lstsq(x, x[:, :2] * 2.0).solution, lambda x: T_.lstsq(x, x[:, :2] * 2.0).solution)):
        va, ta = _t(a), torch.tensor(a, requires_grad=True)
        (g0,) = vl.autograd.grad((f_v(va) ** 2).sum(), va)
        (g1,) = vl.autograd.grad((f_v(va) ** 2).sum(), va, create_graph=True)
        (gt,) = torch.autograd.grad((f_t(ta) ** 2).sum(), ta, create_graph=True)
        assert_close(g1, gt, 1e-6, 1e-8)
        assert_close(g0, gt, 1e-6, 1e-8)
        (h,) = vl.autograd.grad(g1.sum(), va)
        (ht,) = torch.autograd.grad(gt.sum(), ta)
        assert_close(h, ht, 1e-5, 1e-7)


def test_geqrf_and_pca_lowrank():
    a = N(2, 5, 3)
    rv, rt = vl.geqrf(vl.tensor(a)), torch.geqrf(torch.tensor(a))
    assert_close(rv.a, rt.a)
    assert_close(rv.tau, rt.tau)
    assert_close(vl.orgqr(*rv), T_.qr(torch.tensor(a)).Q)
    x = N(8, 2) @ N(2, 4) + N(1, 4)  # rank 2 after centring
    pv, pt = vl.pca_lowrank(vl.tensor(x), q=2), torch.pca_lowrank(torch.tensor(x), q=2)
    assert_close(pv[1], pt[1], 1e-6, 1e-8)
    assert_close((pv[0] * pv[1][None]) @ pv[2].mT, (pt[0] * pt[1][None]) @ pt[2].mT, 1e-6, 1e-8)


def test_singular_inv_and_solve_raise_torch_linalg_error():
    """A singular matrix: PyTorch raises torch.linalg.LinAlgError (a RuntimeError) from inv,
    inverse and solve; varlens raises its LinAlgError, also a RuntimeError."""
    s = [[1.0, 2.0], [2.0, 4.0]]
    for M in (vl, torch):
        for f in (lambda: M.linalg.inv(M.tensor(s)), lambda: M.inverse(M.tensor(s)),
                  lambda: M.linalg.solve(M.tensor(s), M.ones(2))):
            with pytest.raises(M.linalg.LinAlgError):
                f()
            with pytest.raises(RuntimeError):
                f()

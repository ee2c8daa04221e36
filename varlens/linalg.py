"""varlens.linalg: torch.linalg (differentiable): norms, inverse, determinant and solve
(varlens/ops/linalg.py); decompositions and the rest (varlens/ops/linalg.py)."""
from __future__ import annotations

from varlens.ops.linalg import det, inv, slogdet, solve  # noqa: F401
from varlens.ops.linalg import LinAlgError, cholesky, cholesky_ex, cond, eig, eigh, eigvals, eigvalsh, inv_ex, lstsq, lu, lu_factor, lu_factor_ex, lu_solve, matrix_exp, matrix_power, solve_ex, matrix_rank, multi_dot, pinv, qr, solve_triangular, svd, svdvals, tensorinv, tensorsolve, vecdot, householder_product, ldl_factor, ldl_factor_ex, ldl_solve
from varlens.ops.linalg import matmul  # noqa: F401
from varlens.ops.linalg import linalg_cross as cross, linalg_diagonal as diagonal, linalg_vander as vander  # noqa: F401
from varlens.ops.linalg import matrix_norm as _matrix_norm
from varlens.ops.linalg import norm as _norm


def vector_norm(x, ord=2, dim=None, keepdim=False):  # noqa: A002
    return _norm(x, ord, dim, keepdim)


def matrix_norm(x, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None, out=None):  # noqa: A002
    if ord != "fro" or dtype is not None:
        return _matrix_norm(x, ord, dim, keepdim, dtype=dtype)
    return _norm(x, 2, dim, keepdim)


def norm(x, ord=None, dim=None, keepdim=False):  # noqa: A002
    """torch.linalg.norm: the 2-norm of the flattened input by default."""
    if ord is None or ord == "fro":
        return _norm(x, 2, dim, keepdim)
    if ord == "nuc" or (isinstance(dim, (tuple, list)) and len(dim) == 2) or (dim is None and x.ndim == 2):
        return _matrix_norm(x, ord, (-2, -1) if dim is None else tuple(dim), keepdim)  # a matrix norm
    return _norm(x, ord, dim, keepdim)

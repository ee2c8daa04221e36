"""varlens.linalg: the norms, inverse, determinant and solve of torch.linalg (differentiable)."""
from __future__ import annotations

from varlens.ops.linalg import det, inv, slogdet, solve  # noqa: F401
from varlens.ops.reduce import norm as _norm


def vector_norm(x, ord=2, dim=None, keepdim=False):  # noqa: A002
    return _norm(x, ord, dim, keepdim)


def matrix_norm(x, ord="fro", dim=(-2, -1), keepdim=False):  # noqa: A002
    if ord != "fro":
        raise NotImplementedError(f"matrix_norm: only ord='fro' is implemented, got {ord!r}")
    return _norm(x, 2, dim, keepdim)


def norm(x, ord=None, dim=None, keepdim=False):  # noqa: A002
    """torch.linalg.norm: the 2-norm of the flattened input by default."""
    if ord is None or ord == "fro":
        return _norm(x, 2, dim, keepdim)
    return _norm(x, ord, dim, keepdim)

"""Distances: cosine_similarity, pairwise_distance, pdist.
"""
from __future__ import annotations

from varlens import ops as _ops
from varlens.core import array as B
from varlens.core.array import xp
from varlens.core.tensor import Tensor
from varlens.nn.functional._common import _tensor_args, _require_tensor, _shape, _straight_through



@_tensor_args("x1", "x2")
def pairwise_distance(x1, x2, p=2.0, eps=1e-06, keepdim=False):
    return _ops.norm(x1 - x2 + eps, p, -1, keepdim)


# ---------------------------------------------------------------- distances, normalisation
@_tensor_args("x1", "x2")
def cosine_similarity(x1, x2, dim=1, eps=1e-08):
    """sum((x1/|x1|) (x2/|x2|)) along dim, each norm clamped below at eps.  As PyTorch, the
    clamp changes the value only: the derivative is taken as if the norm were unclamped."""
    if _shape(x1) != _shape(x2):
        try:
            shape = xp.broadcast_shapes(_shape(x1), _shape(x2))
        except ValueError:
            raise RuntimeError(f"cosine_similarity: x1 of shape {_shape(x1)} and x2 of shape {_shape(x2)} "
                               "cannot be broadcast together") from None
        x1, x2 = _ops.expand(x1, shape), _ops.expand(x2, shape)
    n1 = _ops.norm(x1, 2, dim, keepdim=True)
    n2 = _ops.norm(x2, 2, dim, keepdim=True)
    ns = B.namespace(n1._data)
    n1 = _straight_through(n1, ns.maximum(n1._data, eps))
    n2 = _straight_through(n2, ns.maximum(n2._data, eps))
    return _ops.sum((x1 / n1) * (x2 / n2), dim)


def pdist(input, p=2):
    """Distances ||x_i - x_j||_p between the rows of (N, M) input for i < j, row-major."""
    op = "pdist"
    _require_tensor(input, "input", op)
    if input.ndim != 2:
        raise RuntimeError(f"{op}: only supports 2D tensors, got: {input.ndim}D (shape {_shape(input)})")
    if p < 0:
        raise RuntimeError(f"{op}: only supports non-negative p values, got {p}")
    ns = B.namespace(input._data)
    i, j = ns.triu_indices(input.shape[0], 1)
    d = _ops.index_select(input, 0, Tensor._make(i)) - _ops.index_select(input, 0, Tensor._make(j))
    return _ops.norm(d, p, 1)

"""Matrix products, kept as BLAS primitives (NumPy's matmul calls the BLAS GEMM).

For out = a @ b:  dL/da = g @ b^T  and  dL/db = a^T @ g  (seed 003 eq. 1.6.5:
the weight gradient is the stored input transposed times the output cotangent).
Batch dimensions that were broadcast are summed away by the engine.
"""
from __future__ import annotations

from varlens.autograd.function import Function
from varlens import backend as B
from varlens.backend import xp
from varlens.ops import dual as D


class MatMul(Function):
    """out = a @ b (vectors, matrices, batches);  dL/da = g b^T, dL/db = a^T g."""

    def forward(self, a, b):
        if a.ndim == 0 or b.ndim == 0:
            raise RuntimeError(f"matmul: both arguments need at least 1 dimension, got shapes "
                               f"{tuple(a.shape)} and {tuple(b.shape)}")
        ka = a.shape[-1]
        kb = b.shape[-2] if b.ndim > 1 else b.shape[0]
        if ka != kb:
            raise RuntimeError(f"matmul: shapes {tuple(a.shape)} and {tuple(b.shape)} cannot be "
                               f"multiplied ({ka} != {kb} in the contracted dimension)")
        self.save_for_backward(a, b)
        return B.matmul(a, b)

    def backward(self, g):
        a, b = self.saved
        n = self.next
        a1, b1 = a.ndim == 1, b.ndim == 1
        if a1 and b1:  # dot product: g is a scalar
            return (g * b if n[0] is not None else None), (g * a if n[1] is not None else None)
        if a1:
            a = D.reshape(a, (1, a.shape[0]))
            g = D.reshape(g, tuple(g.shape[:-1]) + (1, g.shape[-1]))
        if b1:
            b = D.reshape(b, (b.shape[0], 1))
            g = D.reshape(g, tuple(g.shape) + (1,))
        ga = D.matmul(g, D.mT(b)) if n[0] is not None else None
        gb = D.matmul(D.mT(a), g) if n[1] is not None else None
        if a1 and ga is not None:
            ga = D.sum_to(ga, (1, ga.shape[-1]))
            ga = D.reshape(ga, (ga.shape[-1],))
        if b1 and gb is not None:
            gb = D.sum_to(gb, (gb.shape[-2], 1))
            gb = D.reshape(gb, (gb.shape[-2],))
        return ga, gb


def matmul(a, b):
    return MatMul.apply(a, b)


def mm(a, b):
    if a.ndim != 2 or b.ndim != 2:
        raise RuntimeError(f"mm: expected 2-D tensors, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    return MatMul.apply(a, b)


def bmm(a, b):
    if a.ndim != 3 or b.ndim != 3:
        raise RuntimeError(f"bmm: expected 3-D tensors, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    return MatMul.apply(a, b)


def dot(a, b):
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"dot: expected 1-D tensors, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    return MatMul.apply(a, b)


def outer(a, b):
    from varlens.ops.shape import reshape
    return MatMul.apply(reshape(a, (-1, 1)), reshape(b, (1, -1)))


def einsum(equation, *operands):
    """einsum built from transposes, reshapes and one matmul where possible is future work;
    this version handles any equation through a differentiable composite of products and sums."""
    from varlens.ops.einsum import einsum as _einsum
    return _einsum(equation, *operands)

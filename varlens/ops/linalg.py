"""Matrix products, kept as BLAS primitives (NumPy's matmul calls the BLAS GEMM).

For out = a @ b:  dL/da = g @ b^T  and  dL/db = a^T @ g  (seed 003 eq. 1.6.5:
the weight gradient is the stored input transposed times the output cotangent).
Batch dimensions that were broadcast are summed away by the engine.
"""
from __future__ import annotations

from varlens.core.function import Function
from varlens.core import array as B
from varlens.core.array import xp
from varlens.core import primitives as D


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


_C_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half", "int64": "long int",
            "int32": "int", "int16": "short int", "int8": "signed char", "uint8": "unsigned char",
            "bool": "bool", "complex64": "c10::complex<float>", "complex128": "c10::complex<double>"}


def _dtype_mismatch(a, b, op):
    """torch refuses matmul of mixed dtypes (no promotion): one comparison on the hot path."""
    da, db = str(a._data.dtype), str(b._data.dtype)
    raise RuntimeError(f"{op}: expected m1 and m2 to have the same dtype, but got: {_C_NAMES.get(da, da)} != "
                       f"{_C_NAMES.get(db, db)} ({da} and {db}; convert one with .to(dtype))")


def _check_pair(a, b, op):
    try:
        if a._data.dtype != b._data.dtype:
            _dtype_mismatch(a, b, op)
    except AttributeError:  # a NumPy array from internal code: no check (varlens.matmul checks Tensor args)
        pass


def matmul(a, b):
    try:
        if a._data.dtype != b._data.dtype:
            _dtype_mismatch(a, b, "matmul")
    except AttributeError:
        pass
    return MatMul.apply(a, b)


def mm(a, b):
    if a.ndim != 2 or b.ndim != 2:
        raise RuntimeError(f"mm: expected 2-D tensors, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    _check_pair(a, b, "mm")
    return MatMul.apply(a, b)


def bmm(a, b):
    if a.ndim != 3 or b.ndim != 3:
        raise RuntimeError(f"bmm: expected 3-D tensors, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    _check_pair(a, b, "bmm")
    return MatMul.apply(a, b)


def dot(a, b):
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"dot: expected 1-D tensors, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    _check_pair(a, b, "dot")
    return MatMul.apply(a, b)


def outer(a, b):
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"outer: Expected 1-D arguments, but got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    from varlens.ops.shape import reshape
    return MatMul.apply(reshape(a, (-1, 1)), reshape(b, (1, -1)))


def einsum(equation, *operands):
    """einsum built from transposes, reshapes and one matmul where possible is future work;
    this version handles any equation through a differentiable composite of products and sums."""
    from varlens.ops.einsum import einsum as _einsum
    return _einsum(equation, *operands)


# ---------------------------------------------------------------- inverse, determinant, solve
def _square(a, what):
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise RuntimeError(f"{what}: expected a square matrix or a batch of them (..., n, n), got shape "
                           f"{tuple(a.shape)}")


class Inv(Function):
    """Y = A^{-1};  dL/dA = -Y^T G Y^T (from dY = -Y dA Y), batched over leading axes."""

    def forward(self, a):
        y = xp.linalg.inv(a)
        self.save_for_backward(y)
        return y

    def backward(self, g):
        (y,) = self.saved
        yt = D.mT(y)
        return -D.matmul(D.matmul(yt, g), yt)


def _vector_rhs(a, b):
    """torch's rule: b is a (batch of) vector(s) if 1-D, or shaped like a without its last dim."""
    return b.ndim == 1 or (b.ndim == a.ndim - 1 and tuple(b.shape) == tuple(a.shape[:-1]))


class Solve(Function):
    """X = A^{-1} B;  dL/dB = A^{-T} G,  dL/dA = -(A^{-T} G) X^T."""

    differentiable_backward = False

    def forward(self, a, b):
        self.vec = _vector_rhs(a, b)
        x = xp.linalg.solve(a, b[..., None] if self.vec else b)
        self.a, self.x = a, x
        return x[..., 0] if self.vec else x

    def backward(self, g):
        g2 = g[..., None] if self.vec else g
        gb = xp.linalg.solve(xp.swapaxes(self.a, -1, -2), g2)
        ga = -gb @ xp.swapaxes(self.x, -1, -2)
        return ga, (gb[..., 0] if self.vec else gb)

    @staticmethod
    def composite(a, b):
        from varlens import ops
        return ops.matmul(Inv.apply(a), b[..., None])[..., 0] if _vector_rhs(a, b) else \
            ops.matmul(Inv.apply(a), b)


class LogAbsDet(Function):
    """log |det A|;  d/dA = A^{-T} (Jacobi's formula divided by det A)."""

    differentiable_backward = False

    def forward(self, a):
        sign, la = xp.linalg.slogdet(a)
        self.a = a
        return xp.asarray(la, dtype=a.dtype)

    def backward(self, g):
        ginv = xp.swapaxes(xp.linalg.inv(self.a), -1, -2)
        return xp.asarray(g)[..., None, None] * ginv

    @staticmethod
    def composite(a):
        raise NotImplementedError("logdet: second derivatives are not implemented")


def inv(a):
    _square(a, "inv")
    return Inv.apply(a)


def solve(a, b):
    _square(a, "solve")
    return Solve.apply(a, b)


def slogdet(a):
    """(sign, logabsdet), as torch.linalg.slogdet; logabsdet is differentiable."""
    from collections import namedtuple
    _square(a, "slogdet")
    sign = xp.linalg.slogdet(a._data)[0]
    from varlens.core.tensor import Tensor
    return namedtuple("slogdet", ["sign", "logabsdet"])(Tensor._make(xp.asarray(sign, dtype=a.dtype)),
                                                        LogAbsDet.apply(a))


def det(a):
    """det A = sign * exp(log |det A|), so its gradient is det(A) A^{-T} (Jacobi's formula)."""
    from varlens import ops
    s = slogdet(a)
    return s.sign * ops.exp(s.logabsdet)


def logdet(a):
    """log det A (NaN where det A < 0), as torch.logdet."""
    from varlens import ops
    s = slogdet(a)
    neg = (s.sign._data < 0)
    return ops.where(neg, s.logabsdet * float("nan"), s.logabsdet) if neg.any() else s.logabsdet

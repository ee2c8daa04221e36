"""Linear algebra: matrix products kept as BLAS primitives (NumPy's matmul calls the BLAS GEMM), the
product family (addmm, baddbmm, tensordot, kron, ...), norms, and torch.linalg's decompositions
(cholesky, qr, svd, eigh, lu, lstsq, pinv, matrix_exp, solve_triangular, ...).  The
decompositions' notes follow the matrix products' below.

For out = a @ b:  dL/da = g @ b^T  and  dL/db = a^T @ g  (seed 003 eq. 1.6.5:
the weight gradient is the stored input transposed times the output cotangent).
Batch dimensions that were broadcast are summed away by the engine.
"""
from __future__ import annotations

from varlens.core.arg_rules import torch_args
from varlens.core.function import Function
from varlens.core import array as B
from varlens.core.array import xp
from varlens.core import primitives as D
from varlens.ops.pointwise import exp, where
from varlens.ops.pointwise import abs as _pointwise_abs
from varlens.ops.reduce import amax
from varlens.ops.shape import cat
from varlens.ops.index import diagonal
import math
from varlens.ops.shape import reshape
from varlens.ops.pointwise import sqrt
from varlens.ops.shape import unsqueeze
from varlens.core import dtypes as DT
from varlens.core.tensor import Tensor
from varlens.ops._args import _dim
from varlens.ops._args import _float
from varlens.ops.pointwise import pow as _pointwise_pow
from varlens.ops.reduce import mean as _reduce_mean
from varlens.ops.reduce import sum as _reduce_sum
from varlens.ops.shape import t as _shape_t
from varlens.ops._args import _tensor
from varlens.ops.pointwise import add
from varlens.ops.pointwise import cast
from varlens.ops.pointwise import clamp
from varlens.ops.pointwise import clone
from varlens.ops.scan import cumprod
from varlens.ops.index import diag
from varlens.ops.pointwise import div
from varlens.ops.shape import expand
from varlens.ops.shape import flip
from varlens.ops.pointwise import mul
from varlens.ops.shape import permute
from varlens.ops.pointwise import sub
from varlens.core import grad_mode as _gm
from varlens.ops.shape import transpose as _shape_transpose
from varlens.ops.reduce import amin
from varlens.ops.reduce import mean
from collections import namedtuple
from varlens.ops.shape import squeeze
from varlens.ops.shape import stack
from varlens.ops.index import tril
from varlens.ops.index import triu
from varlens.ops.index import _diagonal, _ns, _on
from varlens.ops.shape import narrow
from varlens.ops import pointwise as E
from varlens.ops.reduce import Norm2
from varlens.ops.reduce import _tname
from varlens.ops.compare import ne
from varlens.ops.reduce import norm_dims


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


@torch_args(tensor_first=True)
def matmul(a, b):
    try:
        if a._data.dtype != b._data.dtype:
            _dtype_mismatch(a, b, "matmul")
    except AttributeError:
        pass
    return MatMul.apply(a, b)


@torch_args(tensor_first=True)
def mm(a, b):
    if a.ndim != 2 or b.ndim != 2:
        raise RuntimeError(f"mm: expected 2-D tensors, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    _check_pair(a, b, "mm")
    return MatMul.apply(a, b)


@torch_args(tensor_first=True)
def bmm(a, b):
    if a.ndim != 3 or b.ndim != 3:
        raise RuntimeError(f"bmm: expected 3-D tensors, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    _check_pair(a, b, "bmm")
    return MatMul.apply(a, b)


@torch_args(tensor_first=True)
def dot(a, b):
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"dot: expected 1-D tensors, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    _check_pair(a, b, "dot")
    return MatMul.apply(a, b)


@torch_args(tensor_first=True)
def outer(a, b):
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"outer: Expected 1-D arguments, but got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    return MatMul.apply(reshape(a, (-1, 1)), reshape(b, (1, -1)))


# ---------------------------------------------------------------- inverse, determinant, solve
def _square(a, what):
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise RuntimeError(f"{what}: expected a square matrix or a batch of them (..., n, n), got shape "
                           f"{tuple(a.shape)}")


class Inv(Function):
    """Y = A^{-1};  dL/dA = -Y^T G Y^T (from dY = -Y dA Y), batched over leading axes."""

    def forward(self, a):
        xp = self.xp
        try:
            y = xp.linalg.inv(a)
        except xp.linalg.LinAlgError:   # PyTorch's torch.linalg.LinAlgError, a RuntimeError
            raise LinAlgError("linalg.inv: the input matrix is singular (not invertible)") from None
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
        xp = self.xp
        self.vec = _vector_rhs(a, b)
        try:
            x = xp.linalg.solve(a, b[..., None] if self.vec else b)
        except xp.linalg.LinAlgError:   # PyTorch's torch.linalg.LinAlgError, a RuntimeError
            raise LinAlgError("linalg.solve: the input matrix A is singular") from None
        self.a, self.x = a, x
        return x[..., 0] if self.vec else x

    def backward(self, g):
        xp = self.xp
        g2 = g[..., None] if self.vec else g
        gb = xp.linalg.solve(xp.swapaxes(self.a, -1, -2), g2)
        ga = -gb @ xp.swapaxes(self.x, -1, -2)
        return ga, (gb[..., 0] if self.vec else gb)

    @staticmethod
    def composite(a, b):
        return matmul(Inv.apply(a), b[..., None])[..., 0] if _vector_rhs(a, b) else \
            matmul(Inv.apply(a), b)


class LogAbsDet(Function):
    """log |det A|;  d/dA = A^{-T} (Jacobi's formula divided by det A)."""

    differentiable_backward = False

    def forward(self, a):
        xp = self.xp
        sign, la = xp.linalg.slogdet(a)
        self.a = a
        return xp.asarray(la, dtype=a.dtype)

    def backward(self, g):
        xp = self.xp
        ginv = xp.swapaxes(xp.linalg.inv(self.a), -1, -2)
        return xp.asarray(g)[..., None, None] * ginv

    @staticmethod
    def composite(a):
        raise NotImplementedError("logdet: second derivatives are not implemented")


@torch_args(tensor_first=True)
def inv(a):
    _square(a, "inv")
    return Inv.apply(a)


def solve(a, b):
    _square(a, "solve")
    return Solve.apply(a, b)


@torch_args(tensor_first=True)
def slogdet(a):
    """(sign, logabsdet), as torch.linalg.slogdet; logabsdet is differentiable."""
    from collections import namedtuple
    _square(a, "slogdet")
    lib = _ns(a._data)
    sign = lib.linalg.slogdet(a._data)[0]
    return namedtuple("slogdet", ["sign", "logabsdet"])(Tensor._make(lib.asarray(sign, dtype=a.dtype)),
                                                        LogAbsDet.apply(a))


@torch_args(tensor_first=True)
def det(a):
    """det A = sign * exp(log |det A|), so its gradient is det(A) A^{-T} (Jacobi's formula)."""
    s = slogdet(a)
    return s.sign * exp(s.logabsdet)


@torch_args(tensor_first=True)
def logdet(a):
    """log det A (NaN where det A < 0), as torch.logdet."""
    s = slogdet(a)
    neg = (s.sign._data < 0)
    if neg.__class__ is not xp.ndarray:   # on a device: no host read, the where always
        return where(Tensor._make(neg), s.logabsdet * float("nan"), s.logabsdet)
    return where(neg, s.logabsdet * float("nan"), s.logabsdet) if neg.any() else s.logabsdet


@torch_args(tensor_first=True)
def mv(a, v):
    return matmul(a, v)


# ---------------------------------------------------------------- matrices
@torch_args(tensor_first=True)
def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """beta * input + alpha * (mat1 @ mat2)."""
    p = matmul(mat1, mat2)
    return (input * beta if beta != 1 else input) + (p * alpha if alpha != 1 else p)


@torch_args(tensor_first=True)
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    p = bmm(batch1, batch2)
    return (input * beta if beta != 1 else input) + (p * alpha if alpha != 1 else p)


@torch_args(tensor_first=True)
def addmv(input, mat, vec, *, beta=1, alpha=1):
    p = mv(mat, vec)
    return (input * beta if beta != 1 else input) + (p * alpha if alpha != 1 else p)


@torch_args(tensor_first=True)
def addr(input, vec1, vec2, *, beta=1, alpha=1):
    p = outer(vec1, vec2)
    return (input * beta if beta != 1 else input) + (p * alpha if alpha != 1 else p)


@torch_args(tensor_first=True)
def trace(x):
    if x.ndim != 2:
        raise RuntimeError(f"trace: expected a 2-D tensor, got shape {tuple(x.shape)}")
    return diagonal(x).sum()


@torch_args(tensor_first=True)
def cross(input, other, dim=None):
    """The cross product along ``dim`` (the first axis of size 3 if None, as torch.cross)."""
    if dim is None:
        dims = [i for i, s in enumerate(input.shape) if s == 3]
        if not dims:
            raise RuntimeError(f"cross: no dimension of size 3 in input of shape {tuple(input.shape)}")
        dim = dims[0]
    d = dim % input.ndim
    if input.shape[d] != 3 or other.shape[d] != 3:
        raise RuntimeError(f"cross: dimension {d} must have size 3 in both inputs, got "
                           f"{tuple(input.shape)} and {tuple(other.shape)}")
    a = [narrow(input, d, i, 1) for i in range(3)]
    b = [narrow(other, d, i, 1) for i in range(3)]
    return cat([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]], d)


@torch_args(tensor_first=True)
def kron(input, other):
    """Kronecker product: out[i*m + k, j*n + l] = a[i, j] b[k, l] (any equal number of dims)."""
    a, b = input, other
    nd = max(a.ndim, b.ndim)
    a = reshape(a, (1,) * (nd - a.ndim) + tuple(a.shape))
    b = reshape(b, (1,) * (nd - b.ndim) + tuple(b.shape))
    ai = [s for s in a.shape]
    bi = [s for s in b.shape]
    a_ex = reshape(a, tuple(x for s in ai for x in (s, 1)))
    b_ex = reshape(b, tuple(x for s in bi for x in (1, s)))
    return reshape(a_ex * b_ex, tuple(p * q for p, q in zip(ai, bi)))


@torch_args(tensor_first=True)
def cdist(x1, x2, p=2.0):
    """Pairwise p-norm distances between the rows of x1 (..., P, M) and x2 (..., R, M)."""
    diff = unsqueeze(x1, -2) - unsqueeze(x2, -3)
    if p == 2:  # sqrt with a zero gradient at zero distance (as PyTorch), not inf * 0
        sq = (diff * diff).sum(-1)
        pos = (sq > 0)._data
        return where(pos, sqrt(where(pos, sq, sq * 0 + 1)), sq * 0)
    if p == 1:
        return _pointwise_abs(diff).sum(-1)
    if p == math.inf:
        return amax(_pointwise_abs(diff), -1)
    return (_pointwise_abs(diff) ** p).sum(-1) ** (1.0 / p)


@torch_args(tensor_first=True)
def vander(x, N=None, increasing=False):  # noqa: N803
    """Columns x^0, x^1, ..., x^(N-1) (reversed unless ``increasing``), built as a running
    product so the gradient is right at x = 0."""
    xp = _lib(x)
    x = _tensor(x, "vander: x")
    if x.ndim != 1:
        raise RuntimeError(f"vander: x must be 1-D, got shape {tuple(x.shape)}")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise ValueError(f"vander: N must be non-negative, got {N}")
    if x.dtype.kind == "b":
        x = cast(x, DT.int64)
    if n == 0:
        return Tensor._make(xp.zeros((x.shape[0], 0), dtype=x.dtype))
    cols = [Tensor._make(xp.ones((x.shape[0], 1), dtype=x.dtype))]
    if n > 1:
        cols.append(expand(reshape(x, (-1, 1)), (x.shape[0], n - 1)))
    out = cumprod(cat(cols, 1), 1)
    return out if increasing else flip(out, (1,))


# ---------------------------------------------------------------- products
def tensordot(a, b, dims=2):
    """Contract ``dims`` of a with those of b: an int (a's last n with b's first n), a pair of
    lists, or a 2 x n tensor; the rest is one matmul on the permuted, flattened operands."""
    a, b = _tensor(a, "tensordot: a"), _tensor(b, "tensordot: b")
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0 or dims > min(a.ndim, b.ndim):
            raise RuntimeError(f"tensordot: dims must be in [0, {min(a.ndim, b.ndim)}], got {dims}")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        try:
            da, db = dims
        except (TypeError, ValueError):
            raise TypeError(f"tensordot: dims must be an int or a pair of lists of dims, got {dims!r}") from None
        da = [da] if isinstance(da, int) else list(da)
        db = [db] if isinstance(db, int) else list(db)
        if len(da) != len(db):
            raise RuntimeError(f"tensordot: both lists in dims must have the same length, got {da} and {db}")
        da = [_dim(a, d, "tensordot") for d in da]
        db = [_dim(b, d, "tensordot") for d in db]
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j]:
            raise RuntimeError(f"tensordot: contracted dimensions must match in size, but a's dim {i} is "
                               f"{a.shape[i]} and b's dim {j} is {b.shape[j]}")
    fa = [i for i in range(a.ndim) if i not in da]
    fb = [j for j in range(b.ndim) if j not in db]
    k = 1
    for i in da:
        k *= a.shape[i]
    A = reshape(permute(a, fa + da) if fa + da != list(range(a.ndim)) else a, (-1, k))
    Bm = reshape(permute(b, db + fb) if db + fb != list(range(b.ndim)) else b, (k, -1))
    return reshape(matmul(A, Bm), tuple(a.shape[i] for i in fa) + tuple(b.shape[j] for j in fb))


@torch_args(tensor_first=True)
def inner(input, other):  # noqa: A002
    a, b = _tensor(input, "inner: input"), _tensor(other, "inner: other")
    if a.ndim == 0 or b.ndim == 0:
        return mul(a, b)
    if a.shape[-1] != b.shape[-1]:
        raise RuntimeError(f"inner: the last dimensions must match, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    return tensordot(a, b, ([a.ndim - 1], [b.ndim - 1]))


@torch_args(tensor_first=True)
def vdot(input, other):  # noqa: A002
    a, b = _tensor(input, "vdot: input"), _tensor(other, "vdot: other")
    if a.ndim != 1 or b.ndim != 1 or a.shape != b.shape:
        raise RuntimeError(f"vdot: expected two 1-D tensors of the same size, got shapes "
                           f"{tuple(a.shape)} and {tuple(b.shape)}")
    return dot(a, b)


@torch_args(tensor_first=True)
def ger(input, vec2):  # noqa: A002
    return outer(input, vec2)


def chain_matmul(*matrices):
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    if not matrices:
        raise RuntimeError("chain_matmul: expected one or more matrices")
    for i, m in enumerate(matrices):
        if _tensor(m, f"chain_matmul: matrices[{i}]").ndim != 2:
            raise RuntimeError(f"chain_matmul: matrices[{i}] must be 2-D, got shape {tuple(m.shape)}")
    out = matrices[0]
    for m in matrices[1:]:
        out = mm(out, m)
    return out if len(matrices) > 1 else clone(out)


@torch_args(tensor_first=True)
def addbmm(input, batch1, batch2, *, beta=1, alpha=1):  # noqa: A002
    for nm, t in (("batch1", batch1), ("batch2", batch2)):
        if _tensor(t, f"addbmm: {nm}").ndim != 3:
            raise RuntimeError(f"addbmm: {nm} must be 3-D, got shape {tuple(t.shape)}")
    s = _reduce_sum(bmm(batch1, batch2), 0)
    s = mul(s, alpha) if alpha != 1 else s
    return add(mul(input, beta) if beta != 1 else input, s)


@torch_args(tensor_first=True)
def cov(input, *, correction=1, fweights=None, aweights=None):  # noqa: A002
    """Covariance of the rows (variables) over the columns (observations), optionally with
    integer frequency weights and float observation weights, as torch.cov."""
    x = _tensor(input, "cov: input")
    if x.ndim > 2:
        raise RuntimeError(f"cov: expected input to have two or fewer dimensions but got {x.ndim}")
    if x.ndim < 2:
        x = reshape(x, (1, -1))
    x = _float(x)
    n = x.shape[1]
    w = None
    if fweights is not None:
        f = _tensor(fweights, "cov: fweights")
        if f.ndim > 1 or f.numel() != n:
            raise RuntimeError(f"cov: expected fweights to have one dimension of size {n}, got shape {tuple(f.shape)}")
        if f.dtype.kind not in "iu":
            raise RuntimeError(f"cov: expected fweights to have an integral dtype, got {f.dtype}")
        if bool((f._data < 0).any()):
            raise RuntimeError("cov: fweights cannot be negative")
        w = cast(reshape(f, (-1,)), x.dtype)
    if aweights is not None:
        a = _tensor(aweights, "cov: aweights")
        if a.ndim > 1 or a.numel() != n:
            raise RuntimeError(f"cov: expected aweights to have one dimension of size {n}, got shape {tuple(a.shape)}")
        if a.dtype.kind != "f":
            raise RuntimeError(f"cov: expected aweights to have a floating point dtype, got {a.dtype}")
        if bool((a._data < 0).any()):
            raise RuntimeError("cov: aweights cannot be negative")
        a = cast(reshape(a, (-1,)), x.dtype)
        w = a if w is None else mul(w, a)
    if w is None:
        wsum = float(n)
        avg = _reduce_mean(x, 1, keepdim=True)
        fact = wsum - correction
    else:
        wsum = _reduce_sum(w)
        avg = div(_reduce_sum(mul(x, w), 1, keepdim=True), wsum)
        if aweights is None:
            fact = sub(wsum, correction)
        else:
            fact = sub(wsum, div(mul(_reduce_sum(mul(w, a)), correction), wsum))
    if isinstance(fact, Tensor):
        fact = clamp(fact, 0.0, None)
    else:
        fact = max(fact, 0.0)
    xc = sub(x, avg)
    xw = xc if w is None else mul(xc, w)
    c = div(matmul(xw, _shape_t(xc)), fact)
    return reshape(c, ()) if input.ndim < 2 else c


@torch_args(tensor_first=True)
def corrcoef(input):  # noqa: A002
    """Pearson correlation of the rows: cov / (std_i std_j), clipped to [-1, 1]."""
    c = cov(input)
    if c.ndim == 0:
        return div(c, c)
    s = sqrt(diag(c))
    c = div(div(c, reshape(s, (-1, 1))), reshape(s, (1, -1)))
    return clamp(c, -1.0, 1.0)


@torch_args(tensor_first=True)
def renorm(input, p, dim, maxnorm):  # noqa: A002
    """Each slice along ``dim`` whose p-norm exceeds maxnorm is scaled to norm maxnorm (by
    maxnorm / (norm + 1e-7), as PyTorch); the norm stays in the graph."""
    x = _tensor(input, "renorm: input")
    if x.dtype.kind != "f":
        raise RuntimeError(f"renorm: expected a floating point input, got dtype {x.dtype}")
    if not p > 0:
        raise RuntimeError(f"renorm: non-positive norm p={p} is not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0, got {maxnorm}")
    if x.ndim <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {x.ndim}")
    d = _dim(x, dim, "renorm")
    others = tuple(i for i in range(x.ndim) if i != d)
    a = _pointwise_abs(x)
    if p == math.inf:
        nrm = amax(a, others, keepdim=True)
    elif p == 2:
        nrm = sqrt(_reduce_sum(mul(x, x), others, keepdim=True))
    else:
        nrm = _pointwise_pow(_reduce_sum(_pointwise_pow(a, p), others, keepdim=True), 1.0 / p)
    over = Tensor._make(nrm._data > maxnorm)
    factor = where(over, div(maxnorm, add(nrm, 1e-7)), 1.0)
    return mul(x, cast(factor, x.dtype) if factor.dtype != x.dtype else factor)


class LinAlgError(RuntimeError):
    """A matrix failed a numerical requirement (not positive-definite, singular), as
    torch.linalg.LinAlgError (also a RuntimeError)."""


def _sla():
    import scipy.linalg as sla  # LAPACK routines NumPy does not expose (trtrs, expm, potrf info)
    return sla


# named tuples with torch.return_types' names and fields
EighResult = namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])


QRResult = namedtuple("linalg_qr", ["Q", "R"])


SVDResult = namedtuple("linalg_svd", ["U", "S", "Vh"])


OldSVDResult = namedtuple("svd", ["U", "S", "V"])


OldQRResult = namedtuple("qr", ["Q", "R"])


LstsqResult = namedtuple("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])


CholeskyExResult = namedtuple("linalg_cholesky_ex", ["L", "info"])


InvExResult = namedtuple("linalg_inv_ex", ["inverse", "info"])


SolveExResult = namedtuple("linalg_solve_ex", ["result", "info"])


TriangularSolveResult = namedtuple("triangular_solve", ["solution", "cloned_coefficient"])


# ---------------------------------------------------------------- argument checks
def _check(A, fn, name="A", square=False, min_dim=2):
    """The checks torch.linalg makes on a matrix argument, with messages naming it."""
    if not isinstance(A, Tensor):
        raise TypeError(f"{fn}: argument '{name}' must be a Tensor, got {type(A).__name__}")
    if A.ndim < min_dim:
        raise RuntimeError(f"{fn}: the input tensor {name} must have at least {min_dim} dimensions "
                           f"(..., rows, cols), got shape {tuple(A.shape)}")
    k = A.dtype
    if k.kind != "f":
        raise RuntimeError(f"{fn}: expected a floating point tensor as input {name} (float32 or "
                           f"float64), got dtype {k}")
    if k.itemsize < 4:
        raise RuntimeError(f"{fn}: low precision dtypes are not supported for {name}: expected float32 "
                           f"or float64, got {k}")
    if square and A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{fn}: {name} must be a square matrix or a batch of them (..., n, n), but "
                           f"it has shape {tuple(A.shape)} ({A.shape[-2]} by {A.shape[-1]} matrices)")


def _same_dtype(A, B, fn, na="A", nb="B"):
    if A.dtype != B.dtype:
        raise RuntimeError(f"{fn}: expected {na} and {nb} to have the same dtype, got {A.dtype} and "
                           f"{B.dtype}")


def _needs_grad(*ts):
    return _gm._enabled[0] and any(isinstance(t, Tensor) and t._rg for t in ts)


# ---------------------------------------------------------------- helpers for arrays or Tensors
def _lib(v):
    """The array library of an array or a Tensor."""
    return _ns(v._data if isinstance(v, Tensor) else v)


def _eye(n, dtype, xp=xp):
    return xp.eye(n, dtype=dtype)


def _diag_embed(v):
    """(..., n) -> (..., n, n) with v on the diagonal (array or Tensor)."""
    n = v.shape[-1]
    return v[..., :, None] * _eye(n, v.dtype, _lib(v))


def _cat(xs, axis):
    if any(isinstance(x, Tensor) for x in xs):
        return cat([x if isinstance(x, Tensor) else Tensor._make(x) for x in xs], axis)
    return _ns(xs[0]).concatenate(xs, axis=axis)


def _tri_mask(n, lower, dtype, k=0, xp=xp):
    return (xp.tril if lower else xp.triu)(xp.ones((n, n), dtype=dtype), k)


def _is_zero(g):
    """True where g is all zeros; None on a device (finding out would read the device: the
    callers then take the general path, which is right for zeros too)."""
    a = g._data if isinstance(g, Tensor) else g
    if a.__class__ is not xp.ndarray and B.is_device_array(a):
        return None
    return not a.any()


def _trsolve(A, B, upper, left=True, unit=False):
    """Triangular solve on arrays, or recorded (SolveTriangular) on Tensors."""
    if isinstance(A, Tensor) or isinstance(B, Tensor):
        A = A if isinstance(A, Tensor) else Tensor._make(A)
        B = B if isinstance(B, Tensor) else Tensor._make(B)
        return SolveTriangular.apply(A, B, upper=upper, left=left, unitriangular=unit)
    return _trsolve_arrays(A, B, upper, left, unit)


def _trsolve_arrays(a, b, upper, left, unit):
    if a.__class__ is not xp.ndarray or b.__class__ is not xp.ndarray:
        return _trsolve_device(a, b, upper, left, unit)
    batch = xp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = xp.broadcast_to(a, batch + a.shape[-2:])
    b = xp.broadcast_to(b, batch + b.shape[-2:])
    sla = _sla()
    if left:
        x = sla.solve_triangular(a, b, lower=not upper, unit_diagonal=unit, check_finite=False)
    else:  # X A = B  <=>  A^T X^T = B^T
        x = xp.swapaxes(sla.solve_triangular(a, xp.swapaxes(b, -1, -2), trans="T", lower=not upper,
                                             unit_diagonal=unit, check_finite=False), -1, -2)
    return xp.ascontiguousarray(x, dtype=xp.result_type(a.dtype, b.dtype))


def _trsolve_device(a, b, upper, left, unit):
    """The triangular solve on a device: the triangle (unit diagonal if ``unit``) handed to the
    library's batched general solve (cuSOLVER's getrf/getrs through CuPy; SciPy's trtrs is host only)."""
    lib = B.namespace(a, b)
    n = a.shape[-1]
    t = lib.triu(a) if upper else lib.tril(a)
    if unit:
        t = t * (1 - lib.eye(n, dtype=a.dtype)) + lib.eye(n, dtype=a.dtype)
    batch = tuple(lib.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    t = lib.broadcast_to(t, batch + t.shape[-2:])
    if left:
        x = lib.linalg.solve(t, lib.broadcast_to(b, batch + b.shape[-2:]))
    else:  # X T = B  <=>  T^T X^T = B^T
        bt = lib.swapaxes(lib.broadcast_to(b, batch + b.shape[-2:]), -1, -2)
        x = lib.swapaxes(lib.linalg.solve(lib.swapaxes(t, -1, -2), bt), -1, -2)
    return lib.ascontiguousarray(x.astype(lib.result_type(a.dtype, b.dtype), copy=False))


def _pack(arrs, nb):
    """Join several results into one array: each flattened past the nb batch axes, then
    concatenated along a new last axis (the single output of a multi-result Function)."""
    batch = arrs[0].shape[:nb]
    xp = _ns(arrs[0])
    return xp.concatenate([xp.reshape(a, batch + (-1,)) for a in arrs], axis=-1)


def _unpack(x, shapes):
    """Inverse of _pack for arrays or Tensors: slices of x reshaped to batch + shape."""
    batch = tuple(x.shape[:-1])
    out, o = [], 0
    for s in shapes:
        k = math.prod(s)
        out.append(D.reshape(x[..., o:o + k], batch + tuple(s)))
        o += k
    return out


def _results(packed, shapes):
    """The user's tensors from a packed Function output (differentiable slices when recorded)."""
    if packed._rg:
        return _unpack(packed, shapes)
    lib = _ns(packed._data)
    return [Tensor._make(lib.ascontiguousarray(a)) for a in _unpack(packed._data, shapes)]


# ---------------------------------------------------------------- Cholesky
def _cholesky_info(a):
    """Lower Cholesky factors and LAPACK's info per matrix (0, or the order of the first
    leading minor that is not positive-definite)."""
    batch = a.shape[:-2]
    if a.__class__ is not xp.ndarray:   # a device: no check here (it would read the device)
        return _cholesky_device(a), None
    try:
        return xp.linalg.cholesky(a), xp.zeros(batch, dtype=xp.int32)
    except xp.linalg.LinAlgError:
        pass
    sla = _sla()
    flat = a.reshape((-1,) + a.shape[-2:])
    out = xp.empty_like(flat)
    info = xp.zeros(flat.shape[0], dtype=xp.int32)
    (potrf,) = sla.get_lapack_funcs(("potrf",), (flat,))
    for i, m in enumerate(flat):
        c, inf = potrf(m, lower=True, clean=True)
        out[i] = c
        info[i] = inf
    return out.reshape(a.shape), info.reshape(batch)


def _cholesky_device(a):
    """The lower Cholesky factor on a device; where a matrix is not positive-definite the factor
    holds NaN from the failing column on, whatever the library does (CuPy fills NaN; a library
    that raises instead gets the same NaN factor from a column-by-column loop)."""
    lib = B.namespace(a)
    try:
        return lib.linalg.cholesky(a)
    except xp.linalg.LinAlgError:
        pass
    n = a.shape[-1]
    L = lib.zeros_like(a)
    with lib.errstate(invalid="ignore", divide="ignore"):
        for j in range(n):
            lj = L[..., j, :j]
            d = lib.sqrt(a[..., j, j] - (lj * lj).sum(-1))
            d = lib.where(d > 0, d, lib.nan)
            L[..., j, j] = d
            if j + 1 < n:
                L[..., j + 1:, j] = (a[..., j + 1:, j] - (L[..., j + 1:, :j] * lj[..., None, :]).sum(-1)) / d[..., None]
    return L


def _cholesky_device_info(L):
    """LAPACK potrf's info from a device factor: the order of the first leading minor whose pivot
    is not positive (NaN or <= 0 on L's diagonal), 0 where the factor is complete."""
    lib = B.namespace(L)
    bad = ~(lib.diagonal(L, 0, -2, -1) > 0)
    return lib.where(bad.any(-1), lib.argmax(bad, -1) + 1, 0).astype(xp.int32)


def _raise_cholesky(info, fn):
    bad = xp.flatnonzero(info.reshape(-1))
    i = int(bad[0])
    order = int(info.reshape(-1)[i])
    where = f"(Batch element {i}): " if info.ndim else ""
    raise LinAlgError(f"{fn}: {where}The factorization could not be completed because the input is "
                      f"not positive-definite (the leading minor of order {order} is not "
                      "positive-definite).")


class Cholesky(Function):
    """A = L L^T.  With Phi(X) = the lower triangle of X with its diagonal halved, the adjoint
    of dL = L Phi(L^{-1} dA L^{-T}) is  gA = L^{-T} Phi(L^T gL) L^{-1}, symmetrised (A is
    symmetric, so only its symmetric part is meaningful; this is PyTorch's convention).
    A standard matrix-calculus result, not from the seed notes."""

    def forward(self, a, upper=False, fn="linalg.cholesky"):
        xp = self.xp
        L, info = _cholesky_info(a)
        if info is not None and info.any():
            _raise_cholesky(info, fn)
        self.upper = upper
        out = xp.ascontiguousarray(xp.swapaxes(L, -1, -2)) if upper else L
        self.save_for_backward(out)
        return out

    def backward(self, g):
        (L,) = self.saved
        if self.upper:
            L, g = D.mT(L), D.mT(g)
        n = L.shape[-1]
        lib = self.xp
        phi = D.matmul(D.mT(L), g) * (_tri_mask(n, True, L.dtype, 0, lib) - 0.5 * _eye(n, L.dtype, lib))
        gA = _trsolve(L, _trsolve(D.mT(L), phi, upper=True), upper=False, left=False)
        return (gA + D.mT(gA)) * 0.5


def cholesky(A, *, upper=False, out=None):
    """torch.linalg.cholesky: L with A = L L^T (or U with A = U^T U when upper=True)."""
    _check(A, "linalg.cholesky", square=True)
    return Cholesky.apply(A, upper=upper)


def cholesky_ex(A, *, upper=False, check_errors=False, out=None):
    """torch.linalg.cholesky_ex: (L, info) without raising; info > 0 is the order of the
    leading minor that is not positive-definite.  L is differentiable where info == 0."""
    _check(A, "linalg.cholesky_ex", square=True)
    L, info = _cholesky_info(A._data)
    if info is None:   # a device: info from the factor's diagonal, read on the host only to raise
        info = _cholesky_device_info(L)
        if check_errors and bool(info.any()):
            _raise_cholesky(B.to_host(info), "linalg.cholesky_ex")
        Lt = Cholesky.apply(A, upper=upper)
    elif info.any():
        if check_errors:
            _raise_cholesky(info, "linalg.cholesky_ex")
        Lt = Tensor._make(xp.ascontiguousarray(xp.swapaxes(L, -1, -2)) if upper else L)
    else:
        Lt = Cholesky.apply(A, upper=upper)
    return CholeskyExResult(Lt, Tensor._make(info))


@torch_args(tensor_first=True)
def cholesky_old(input, upper=False, *, out=None):  # noqa: A002
    """torch.cholesky (and Tensor.cholesky): the same factor, upper=False by default."""
    _check(input, "cholesky", "input", square=True)
    return Cholesky.apply(input, upper=upper, fn="cholesky")


# ---------------------------------------------------------------- triangular solves
class SolveTriangular(Function):
    """X = T^{-1} B (left) or B T^{-1} (right), T the upper/lower triangle of A (unit diagonal if
    unitriangular).  Left: gB = T^{-T} G, gA = -gB X^T; right: gB = G T^{-T}, gA = -X^T gB;
    gA is kept to T's triangle (strict if unitriangular).  From dX = T^{-1}(dB - dT X)."""

    def forward(self, a, b, upper, left=True, unitriangular=False):
        self.upper, self.left, self.unit = upper, left, unitriangular
        x = _trsolve_arrays(a, b, upper, left, unitriangular)
        self.save_for_backward(a, x)
        return x

    def backward(self, g):
        a, x = self.saved
        gb = _trsolve(D.mT(a), g, upper=not self.upper, left=self.left, unit=self.unit)
        if self.next[0] is None:
            return None, gb
        ga = -(D.matmul(gb, D.mT(x)) if self.left else D.matmul(D.mT(x), gb))
        n = a.shape[-1]
        k = (-1 if not self.upper else 1) if self.unit else 0
        return ga * _tri_mask(n, not self.upper, a.dtype, k, self.xp), gb


def solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None):
    """torch.linalg.solve_triangular: X with A X = B (left) or X A = B, A triangular."""
    fn = "linalg.solve_triangular"
    _check(A, fn, "A", square=True)
    _check(B, fn, "B")
    _same_dtype(A, B, fn)
    n = A.shape[-1]
    m = B.shape[-2] if left else B.shape[-1]
    if m != n:
        side = "rows" if left else "columns"
        raise RuntimeError(f"{fn}: incompatible shapes of A and B: A is {tuple(A.shape)} so B needs {n} "
                           f"{side}, but B has shape {tuple(B.shape)}")
    _batch_ok(A, B, fn)
    return SolveTriangular.apply(A, B, upper=bool(upper), left=bool(left),
                                 unitriangular=bool(unitriangular))


def _batch_ok(A, B, fn, na="A", nb="B"):
    try:
        xp.broadcast_shapes(tuple(A.shape[:-2]), tuple(B.shape[:-2]))
    except ValueError:
        raise RuntimeError(f"{fn}: the batch dimensions of {na} {tuple(A.shape)} and {nb} "
                           f"{tuple(B.shape)} cannot be broadcast together") from None


@torch_args(tensor_first=True)
def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False):
    """torch.triangular_solve (deprecated in torch): (solution, cloned_coefficient) of
    op(A) X = b with op = transpose if transpose=True."""
    _check(A, "triangular_solve", "A", square=True)
    _check(b, "triangular_solve", "b")
    T = _shape_transpose(A, -2, -1) if transpose else A
    x = solve_triangular(T, b, upper=upper != bool(transpose), unitriangular=unitriangular)
    return TriangularSolveResult(x, clone(A))


def _chol_solve_arrays(b, l, upper):
    xp = _ns(l)
    lo = xp.swapaxes(l, -1, -2) if upper else l
    return _trsolve_arrays(xp.swapaxes(lo, -1, -2), _trsolve_arrays(lo, b, False, True, False),
                           True, True, False)


class CholeskySolve(Function):
    """X = (L L^T)^{-1} B (or (U^T U)^{-1} B).  gB = (L L^T)^{-1} G and, with L taken as a full
    matrix (PyTorch's convention), gL = -(gB X^T + X gB^T) L  (gU = -U (gB X^T + X gB^T)),
    from d(L L^T) = dL L^T + L dL^T."""

    def forward(self, b, l, upper=False):
        self.upper = upper
        x = _chol_solve_arrays(b, l, upper)
        self.save_for_backward(l, x)
        return x

    def backward(self, g):
        l, x = self.saved
        if isinstance(g, Tensor):
            gb = CholeskySolve.apply(g, l if isinstance(l, Tensor) else Tensor._make(l), upper=self.upper)
        else:
            gb = _chol_solve_arrays(g, l, self.upper)
        if self.next[1] is None:
            return gb, None
        c = D.matmul(gb, D.mT(x))
        c = c + D.mT(c)
        return gb, -(D.matmul(l, c) if self.upper else D.matmul(c, l))


@torch_args(tensor_first=True)
def cholesky_solve(B, L, upper=False, *, out=None):
    """torch.cholesky_solve(B, L): X with (L L^T) X = B (or (U^T U) X = B when upper=True)."""
    fn = "cholesky_solve"
    _check(L, fn, "L", square=True)
    _check(B, fn, "B")
    _same_dtype(B, L, fn, "B", "L")
    if B.shape[-2] != L.shape[-1]:
        raise RuntimeError(f"{fn}: B must have {L.shape[-1]} rows to match L of shape {tuple(L.shape)}, "
                           f"got shape {tuple(B.shape)}")
    _batch_ok(B, L, fn, "B", "L")
    return CholeskySolve.apply(B, L, upper=bool(upper))


@torch_args(tensor_first=True)
def cholesky_inverse(L, upper=False, *, out=None):
    """torch.cholesky_inverse: (L L^T)^{-1} from its Cholesky factor."""
    _check(L, "cholesky_inverse", "L", square=True)
    n = L.shape[-1]
    lib = _ns(L._data)
    eye = Tensor._make(lib.broadcast_to(_eye(n, L.dtype, lib), tuple(L.shape)).copy())
    return CholeskySolve.apply(eye, L, upper=bool(upper))


# ---------------------------------------------------------------- QR
class QR(Function):
    """A = Q R (Householder, LAPACK geqrf/orgqr).  m >= n:  gA = (gQ + Q copyltu(M)) R^{-T} with
    M = R gR^T - gQ^T Q.  m < n: A = [X | Y] with X = Q R1 square and Y = Q R2, so
    gY = Q gR2 and X's gradient is the square case with gQ + Y gR2^T.  Follows from dQ = Q Omega
    + (I - Q Q^T) dA R^{-1} with Omega skew and dR = (Q^T dA - Omega R) upper-triangular."""

    def forward(self, a, mode="reduced"):
        xp = self.xp
        q, r = xp.linalg.qr(a, mode=mode)
        self.mode = mode
        self.m, self.n = a.shape[-2], a.shape[-1]
        self.shapes = (q.shape[-2:], r.shape[-2:])
        out = _pack([q, r], a.ndim - 2)
        self.save_for_backward(out)
        return out

    def backward(self, g):
        (out,) = self.saved
        m, n = self.m, self.n
        if self.mode == "complete" and m > n:
            raise RuntimeError("linalg.qr: the derivative is not defined for mode='complete' when the "
                               f"input has more rows than columns ({m} > {n}); use mode='reduced'")
        Q, R = _unpack(out, self.shapes)
        gQ, gR = _unpack(g, self.shapes)
        if m >= n:
            return _qr_grad(gQ, gR, Q, R)
        R1, R2 = R[..., :, :m], R[..., :, m:]
        gR1, gR2 = gR[..., :, :m], gR[..., :, m:]
        Y = D.matmul(Q, R2)
        gX = _qr_grad(gQ + D.matmul(Y, D.mT(gR2)), gR1, Q, R1)
        return _cat([gX, D.matmul(Q, gR2)], -1)


def _qr_grad(gQ, gR, Q, R):
    n = R.shape[-1]
    M = D.matmul(R, D.mT(gR)) - D.matmul(D.mT(gQ), Q)
    lib = _lib(R)
    low = M * _tri_mask(n, True, R.dtype, -1, lib)
    X = gQ + D.matmul(Q, low + D.mT(low) + M * _eye(n, R.dtype, lib))
    # X R^{-T}: solve Z R^T = X, R^T lower triangular
    return _trsolve(D.mT(R), X, upper=False, left=False)


def qr(A, mode="reduced", *, out=None):
    """torch.linalg.qr: (Q, R) with mode 'reduced' (default), 'complete' or 'r' (Q empty).
    Differentiable for 'reduced', for 'complete' when rows <= cols, and (unlike PyTorch,
    which refuses) for 'r', whose R is the reduced R."""
    xp = _lib(A)
    _check(A, "linalg.qr")
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"linalg.qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    m, n = A.shape[-2], A.shape[-1]
    if not _needs_grad(A):
        if mode == "r":
            r = xp.linalg.qr(A._data, mode="r")
            return QRResult(Tensor._make(xp.empty((0,), dtype=A.dtype)), Tensor._make(r))
        q, r = xp.linalg.qr(A._data, mode=mode)
        return QRResult(Tensor._make(q), Tensor._make(r))
    fmode = "reduced" if mode == "r" else mode
    k = m if fmode == "complete" else min(m, n)
    Q, R = _results(QR.apply(A, mode=fmode), [(m, k), (k, n)])
    if mode == "r":
        return QRResult(Tensor._make(xp.empty((0,), dtype=A.dtype)), R)
    return QRResult(Q, R)


@torch_args(tensor_first=True)
def qr_old(input, some=True, *, out=None):  # noqa: A002
    """torch.qr (and Tensor.qr): (Q, R), reduced when some=True."""
    return OldQRResult(*qr(input, "reduced" if some else "complete"))


# ---------------------------------------------------------------- symmetric eigendecomposition
class Eigh(Function):
    """A = V diag(w) V^T (A symmetric; only the UPLO triangle is read).  With E_ij = w_j - w_i
    (1 on the diagonal), gA = V (diag(gw) + skew(V^T gV) / E) V^T, skew(X) = (X - X^T)/2,
    which is symmetric (PyTorch's convention).  From dw = diag(V^T dA V) and
    dV = V (F o (V^T dA V)), F_ij = 1/(w_j - w_i); needs distinct eigenvalues when gV != 0."""

    def forward(self, a, UPLO="L"):
        xp = self.xp
        w, v = xp.linalg.eigh(a, UPLO=UPLO)
        n = a.shape[-1]
        self.shapes = ((n,), (n, n))
        out = _pack([w, v], a.ndim - 2)
        self.save_for_backward(out)
        return out

    def backward(self, g):
        (out,) = self.saved
        w, V = _unpack(out, self.shapes)
        gw, gV = _unpack(g, self.shapes)
        mid = _diag_embed(gw)
        zero = _is_zero(gV)
        if not zero:
            X = D.matmul(D.mT(V), gV)
            E = w[..., None, :] - w[..., :, None] + _eye(w.shape[-1], w.dtype, self.xp)
            if zero is None:   # a device, gV possibly zero: repeated eigenvalues must not give 0/0
                E = D.where(E == 0, float("inf"), E)
            mid = mid + (X - D.mT(X)) * 0.5 / E
        return D.matmul(D.matmul(V, mid), D.mT(V))


def _uplo(UPLO, fn):
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"{fn}: UPLO must be 'L' or 'U', got {UPLO!r}")


def eigh(A, UPLO="L", *, out=None):
    """torch.linalg.eigh: (eigenvalues ascending, eigenvectors as columns) of a symmetric A."""
    xp = _lib(A)
    _check(A, "linalg.eigh", square=True)
    _uplo(UPLO, "linalg.eigh")
    if not _needs_grad(A):
        w, v = xp.linalg.eigh(A._data, UPLO=UPLO)
        return EighResult(Tensor._make(w), Tensor._make(v))
    n = A.shape[-1]
    return EighResult(*_results(Eigh.apply(A, UPLO=UPLO), [(n,), (n, n)]))


def eigvalsh(A, UPLO="L", *, out=None):
    """torch.linalg.eigvalsh: the eigenvalues of a symmetric A, ascending (gA = V diag(gw) V^T)."""
    xp = _lib(A)
    _check(A, "linalg.eigvalsh", square=True)
    _uplo(UPLO, "linalg.eigvalsh")
    if not _needs_grad(A):
        return Tensor._make(xp.linalg.eigvalsh(A._data, UPLO=UPLO))
    return eigh(A, UPLO).eigenvalues


def _unavailable(name, why):
    """linalg.<name>: a stub that raises NotImplementedError saying ``why`` and what to use instead."""
    def f(*args, **kwargs):
        raise NotImplementedError(f"linalg.{name}: {why}")
    f.__name__ = name
    return f


_NO_COMPLEX = ("varlens has no complex dtypes, and the eigenvalues of a general matrix are complex; for a "
               "symmetric matrix use linalg.eigh / linalg.eigvalsh")


eig = _unavailable("eig", _NO_COMPLEX)


eigvals = _unavailable("eigvals", _NO_COMPLEX)


# ---------------------------------------------------------------- SVD
class SVD(Function):
    """A = U diag(S) Vh (LAPACK gesdd).  With k = min(m, n), E_ij = S_j^2 - S_i^2 (1 on the
    diagonal) and skew(X) = X - X^T:
        core = (skew(U^T gU) S_row + S_col skew(Vh gVh^T)) / E + diag(gS),
    gA = U core Vh, plus the parts of gU (m > n) or gVh (m < n) outside the span of U or Vh:
    (I - U U^T) gU S^{-1} Vh, or U S^{-1} gVh (I - Vh^T Vh).  From dS = diag(U^T dA V) and the
    skew parts of U^T dU, V^T dV.  Distinct nonzero singular values needed when gU, gVh != 0.
    With full_matrices=True only the first k columns of U / rows of Vh carry gradient (the
    others are not determined by A), as PyTorch."""

    def forward(self, a, full_matrices=False):
        xp = self.xp
        u, s, vh = xp.linalg.svd(a, full_matrices=full_matrices)
        self.m, self.n = a.shape[-2], a.shape[-1]
        self.shapes = (u.shape[-2:], s.shape[-1:], vh.shape[-2:])
        out = _pack([u, s, vh], a.ndim - 2)
        self.save_for_backward(out)
        return out

    def backward(self, g):
        (out,) = self.saved
        m, n = self.m, self.n
        k = min(m, n)
        U, S, Vh = _unpack(out, self.shapes)
        gU, gS, gVh = _unpack(g, self.shapes)
        if U.shape[-1] != k:
            U, gU = U[..., :, :k], gU[..., :, :k]
        if Vh.shape[-2] != k:
            Vh, gVh = Vh[..., :k, :], gVh[..., :k, :]
        zu, zv = _is_zero(gU), _is_zero(gVh)
        has_u, has_v = not zu, not zv
        if not has_u and not has_v:
            return D.matmul(U * gS[..., None, :], Vh)
        core = _diag_embed(gS)
        S2 = S * S
        E = S2[..., None, :] - S2[..., :, None] + _eye(k, S.dtype, self.xp)
        if zu is None or zv is None:   # a device, gU/gVh possibly zero: no 0/0 at repeated values
            E = D.where(E == 0, float("inf"), E)
        num = None
        if has_u:
            X = D.matmul(D.mT(U), gU)
            num = (X - D.mT(X)) * S[..., None, :]
        if has_v:
            Y = D.matmul(Vh, D.mT(gVh))
            t = S[..., :, None] * (Y - D.mT(Y))
            num = t if num is None else num + t
        core = core + num / E
        if m > n and has_u:
            gUS = gU / S[..., None, :]
            gA = D.matmul(U, core) + gUS - D.matmul(U, D.matmul(D.mT(U), gUS))
            return D.matmul(gA, Vh)
        if m < n and has_v:
            gVS = gVh / S[..., :, None]
            gA = D.matmul(core, Vh) + gVS - D.matmul(D.matmul(gVS, D.mT(Vh)), Vh)
            return D.matmul(U, gA)
        return D.matmul(D.matmul(U, core), Vh)


def svd(A, full_matrices=True, *, driver=None, out=None):
    """torch.linalg.svd: (U, S, Vh), S descending; full_matrices=True by default as torch
    (``driver`` is a CUDA option in torch and is accepted and ignored)."""
    xp = _lib(A)
    _check(A, "linalg.svd")
    if not _needs_grad(A):
        u, s, vh = xp.linalg.svd(A._data, full_matrices=full_matrices)
        return SVDResult(Tensor._make(u), Tensor._make(s), Tensor._make(vh))
    m, n = A.shape[-2], A.shape[-1]
    k = min(m, n)
    shapes = [(m, m), (k,), (n, n)] if full_matrices else [(m, k), (k,), (k, n)]
    return SVDResult(*_results(SVD.apply(A, full_matrices=bool(full_matrices)), shapes))


def svdvals(A, *, driver=None, out=None):
    """torch.linalg.svdvals: the singular values, descending (gA = U diag(gS) Vh)."""
    xp = _lib(A)
    _check(A, "linalg.svdvals")
    if not _needs_grad(A):
        return Tensor._make(xp.linalg.svd(A._data, compute_uv=False))
    return svd(A, full_matrices=False).S


@torch_args(tensor_first=True)
def svd_old(input, some=True, compute_uv=True, *, out=None):  # noqa: A002
    """torch.svd (and Tensor.svd): (U, S, V) with V, not Vh; reduced when some=True."""
    xp = _lib(input)
    _check(input, "svd", "input")
    if not compute_uv:
        S = svdvals(input)
        m, n = input.shape[-2], input.shape[-1]
        b = tuple(input.shape[:-2])
        z = Tensor._make
        return OldSVDResult(z(xp.zeros(b + (m, m), input.dtype)), S, z(xp.zeros(b + (n, n), input.dtype)))
    U, S, Vh = svd(input, full_matrices=not some)
    return OldSVDResult(U, S, _shape_transpose(Vh, -2, -1))


# ---------------------------------------------------------------- pseudo-inverse, rank, least squares
def _tol(s_max, m, n, dtype, atol, rtol):
    """max(atol, rtol * s_max) with torch's defaults: rtol = eps * max(m, n) unless only an
    atol > 0 is given (then rtol = 0)."""
    xp = _ns(s_max)

    def arr(v):
        return v._data if isinstance(v, Tensor) else xp.asarray(v, dtype=dtype)
    if rtol is None:
        # (whether atol > 0 decides the default: a host read when atol is a CUDA tensor)
        rtol = 0.0 if atol is not None and bool(B.to_host(arr(atol) > 0).all()) else xp.finfo(dtype).eps * max(m, n)
    a = 0.0 if atol is None else arr(atol)
    return xp.maximum(a, arr(rtol) * s_max)


def _max_last(s):
    """The largest value along the last axis, 0 for an empty axis (``max(-1, initial=0)``, which
    CuPy lacks)."""
    if s.shape[-1]:
        return s.max(-1)
    return _ns(s).zeros(s.shape[:-1], s.dtype)


class Pinv(Function):
    """P = A^+ (via the SVD, singular values below the tolerance dropped).  For constant rank,
    dP = -P dA P + P P^T dA^T (I - A P) + (I - P A) dA^T P^T P, whose adjoint is
    gA = -P^T G P^T + (I - A P) G^T P P^T + P^T P G^T (I - P A)  (Golub and Pereyra)."""

    def forward(self, a, atol=None, rtol=None, hermitian=False):
        xp = self.xp
        m, n = a.shape[-2], a.shape[-1]
        if hermitian:
            w, v = xp.linalg.eigh(a)
            tol = _tol(_max_last(xp.abs(w)), m, n, a.dtype, atol, rtol)
            keep = xp.abs(w) > tol[..., None]
            inv = xp.where(keep, 1.0 / xp.where(keep, w, 1), 0).astype(a.dtype)
            p = (v * inv[..., None, :]) @ xp.swapaxes(v, -1, -2)
        else:
            u, s, vh = xp.linalg.svd(a, full_matrices=False)
            smax = s[..., 0] if s.shape[-1] else xp.zeros(s.shape[:-1], a.dtype)
            tol = _tol(smax, m, n, a.dtype, atol, rtol)
            keep = s > xp.asarray(tol)[..., None]
            inv = xp.where(keep, 1.0 / xp.where(keep, s, 1), 0).astype(a.dtype)
            p = (xp.swapaxes(vh, -1, -2) * inv[..., None, :]) @ xp.swapaxes(u, -1, -2)
        self.save_for_backward(a, p)
        return xp.ascontiguousarray(p, dtype=a.dtype)

    def backward(self, g):
        a, p = self.saved
        return _pinv_grad(g, a, p)


def _pinv_grad(g, a, p):
    pt, gt = D.mT(p), D.mT(g)
    gtppt = D.matmul(gt, D.matmul(p, pt))
    pptgt = D.matmul(D.matmul(pt, p), gt)
    return (-D.matmul(D.matmul(pt, g), pt) + gtppt - D.matmul(a, D.matmul(p, gtppt))
            + pptgt - D.matmul(D.matmul(pptgt, p), a))


def pinv(A, rcond=None, hermitian=False, *, atol=None, rtol=None, out=None):
    """torch.linalg.pinv: the Moore-Penrose pseudo-inverse; singular values at or below
    max(atol, rtol * largest) count as zero (rtol defaults to eps * max(m, n), or 0 when only
    atol is given).  ``rcond`` (positional, as torch's older signature) is rtol's old name."""
    _check(A, "linalg.pinv")
    if rcond is not None:
        rtol = rcond
    if hermitian and A.shape[-1] != A.shape[-2]:
        _check(A, "linalg.pinv", square=True)
    return Pinv.apply(A, atol=atol, rtol=rtol, hermitian=bool(hermitian))


@torch_args(tensor_first=True)
def pinverse(input, rcond=1e-15):  # noqa: A002
    """torch.pinverse (and Tensor.pinverse): pinv with a relative cutoff ``rcond``."""
    _check(input, "pinverse", "input")
    return Pinv.apply(input, atol=None, rtol=rcond, hermitian=False)


def matrix_rank(A, tol=None, hermitian=False, *, atol=None, rtol=None, out=None):
    """torch.linalg.matrix_rank: the number of singular values above max(atol, rtol * largest)
    (int64; not differentiable).  ``tol`` is the deprecated name of atol."""
    xp = _lib(A)
    _check(A, "linalg.matrix_rank")
    if tol is not None:
        atol, rtol = tol, (0.0 if rtol is None else rtol)
    a = A._data
    m, n = a.shape[-2], a.shape[-1]
    if hermitian:
        _check(A, "linalg.matrix_rank", square=True)
        s = xp.abs(xp.linalg.eigvalsh(a))
    else:
        s = xp.linalg.svd(a, compute_uv=False)
    smax = _max_last(s)
    t = _tol(smax, m, n, a.dtype, atol, rtol)
    return Tensor._make((s > xp.asarray(t)[..., None]).sum(-1).astype(xp.int64))


class Lstsq(Function):
    """X = argmin ||A X - B|| (LAPACK gelsd per matrix); X = A^+ B, so gB = A^{+T} G and
    gA = the pinv adjoint applied to G B^T (as PyTorch).  Second derivatives go through
    the composite pinv(A) @ B."""

    differentiable_backward = False

    def forward(self, a, b, rcond=None):
        xp = self.xp
        batch = xp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        a = xp.broadcast_to(a, batch + a.shape[-2:])
        b = xp.broadcast_to(b, batch + b.shape[-2:])
        fa = a.reshape((-1,) + a.shape[-2:])
        fb = b.reshape((-1,) + b.shape[-2:])
        xs, ranks, svs = [], [], []
        for ai, bi in zip(fa, fb):
            x, _, r, sv = xp.linalg.lstsq(ai, bi, rcond=rcond)
            xs.append(x)
            ranks.append(r)
            svs.append(sv)
        n, k = a.shape[-1], b.shape[-1]
        x = xp.stack(xs).reshape(batch + (n, k)).astype(a.dtype, copy=False) if xs else \
            xp.zeros(batch + (n, k), a.dtype)
        self.rank = (xp.stack([xp.asarray(r, dtype=xp.int64) for r in ranks]) if ranks else
                     xp.zeros((0,), xp.int64)).reshape(batch)
        self.sv = (xp.stack(svs) if svs else xp.zeros((0, min(a.shape[-2:])), a.dtype)).reshape(
            batch + (-1,)).astype(a.dtype, copy=False)
        self.a, self.b, self.x, self.rcond = a, b, x, rcond
        return x

    def backward(self, g):
        a, b = self.a, self.b
        pf = Pinv()
        pf.xp = self.xp
        p = pf.forward(a, rtol=self.rcond)
        gb = D.matmul(D.mT(p), g) if self.next[1] is not None else None
        ga = _pinv_grad(D.matmul(g, D.mT(b)), a, p) if self.next[0] is not None else None
        return ga, gb

    @staticmethod
    def composite(a, b, rcond=None):
        return matmul(Pinv.apply(a, rtol=rcond), b)


def lstsq(A, B, rcond=None, *, driver=None):
    """torch.linalg.lstsq: (solution, residuals, rank, singular_values).  As torch on CPU, the
    default driver 'gelsy' gives the rank and empty residuals and singular values; 'gelsd' and
    'gelss' also give the singular values, and the squared residuals when m > n and A has full
    rank; 'gels' gives the solution alone.  B may be (..., m, k) or (..., m)."""
    xp = _lib(A)
    fn = "linalg.lstsq"
    _check(A, fn, "A")
    _check(B, fn, "B", min_dim=1)
    _same_dtype(A, B, fn)
    if driver not in (None, "gels", "gelsy", "gelsd", "gelss"):
        raise RuntimeError(f"{fn}: driver must be one of 'gels', 'gelsy', 'gelsd', 'gelss', got {driver!r}")
    driver = driver or "gelsy"
    vec = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))  # torch's rule
    Bm = unsqueeze(B, -1) if vec else B
    m, n = A.shape[-2], A.shape[-1]
    if Bm.shape[-2] != m:
        raise RuntimeError(f"{fn}: A has {m} rows, so B must have {m} rows too: got A {tuple(A.shape)} and "
                           f"B {tuple(B.shape)}")
    _batch_ok(A, Bm, fn)
    if _needs_grad(A, Bm):
        X = Lstsq.apply(A, Bm, rcond=rcond)
        info = X._node                      # the recorded node keeps the rank and singular values
    else:
        info = Lstsq()
        info.xp = xp
        X = Tensor._make(info.forward(A._data, Bm._data, rcond))
    empty = Tensor._make(xp.empty((0,), dtype=A.dtype))
    rank = Tensor._make(info.rank) if driver != "gels" else Tensor._make(xp.empty((0,), xp.int64))
    sv = Tensor._make(info.sv) if driver in ("gelsd", "gelss") else empty
    res = empty
    if driver != "gelsy" and m > n and bool((info.rank == n).all()):
        r = matmul(A, X) - Bm
        res = _reduce_sum(r * r, -2)
        if vec:
            res = squeeze(res, -1)
    if vec:
        X = squeeze(X, -1)
    return LstsqResult(X, res, rank, sv)


# ---------------------------------------------------------------- matrix exponential, powers
_PADE13 = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
           129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920., 40840800.,
           960960., 16380., 182., 1.)


def _expm(a):
    """exp of a (batch of) square matrix array: SciPy's expm on the host; on a device Higham's
    scaling and squaring with the degree-13 Pade approximant (the degree SciPy uses for all but
    small norms), batched.  The number of squarings comes from the largest 1-norm in the batch:
    one host read, as PyTorch's CUDA matrix_exp reads its norms on the host."""
    if a.__class__ is xp.ndarray:
        return _sla().expm(a)
    lib = B.namespace(a)
    n = a.shape[-1]
    norm = float(lib.abs(a).sum(-2).max()) if a.size else 0.0
    s = max(0, int(math.ceil(math.log2(norm / 5.371920351148152)))) if norm > 0 else 0
    A = a * (0.5 ** s)
    b = _PADE13
    eye = lib.eye(n, dtype=a.dtype)
    A2 = A @ A
    A4 = A2 @ A2
    A6 = A4 @ A2
    U = A @ (A6 @ (b[13] * A6 + b[11] * A4 + b[9] * A2) + b[7] * A6 + b[5] * A4 + b[3] * A2 + b[1] * eye)
    V = A6 @ (b[12] * A6 + b[10] * A4 + b[8] * A2) + b[6] * A6 + b[4] * A4 + b[2] * A2 + b[0] * eye
    R = lib.linalg.solve(V - U, V + U)
    for _ in range(s):
        R = R @ R
    return R.astype(a.dtype, copy=False)


class MatrixExp(Function):
    """exp(A) (SciPy's scaled Pade expm).  The adjoint of the Frechet derivative L(A, E) is
    L(A^T, G), read off the upper-right block of exp([[A^T, G], [0, A^T]])."""

    def forward(self, a):
        xp = self.xp
        self.save_for_backward(a)
        return xp.asarray(_expm(a), dtype=a.dtype)

    def backward(self, g):
        xp = self.xp
        (a,) = self.saved
        n = a.shape[-1]
        at = D.mT(a)
        batch = tuple(g.shape[:-2])
        at = D.broadcast_to(at, batch + (n, n)) if tuple(at.shape) != batch + (n, n) else at
        z = xp.zeros(batch + (n, n), dtype=a.dtype)
        block = _cat([_cat([at, g], -1), _cat([z, at], -1)], -2)
        e = MatrixExp.apply(block) if isinstance(block, Tensor) else _expm(block)
        return e[..., :n, n:]


@torch_args(tensor_first=True)
def matrix_exp(A):
    """torch.linalg.matrix_exp (and torch.matrix_exp, Tensor.matrix_exp)."""
    _check(A, "linalg.matrix_exp", square=True)
    return MatrixExp.apply(A)


@torch_args(tensor_first=True)
def matrix_power(A, n, *, out=None):
    """torch.linalg.matrix_power: A^n for an integer n (n < 0: inv(A)^|n|; n = 0: identity),
    by repeated squaring, so the gradient is that of the products."""
    xp = _lib(A)
    fn = "linalg.matrix_power"
    if not isinstance(A, Tensor):
        raise TypeError(f"{fn}: argument 'A' must be a Tensor, got {type(A).__name__}")
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{fn}: A must be a square matrix or a batch of them (..., n, n), got shape "
                           f"{tuple(A.shape)}")
    if isinstance(n, bool) or not isinstance(n, (int, xp.integer)):
        raise TypeError(f"{fn}: argument 'n' must be an int, got {type(n).__name__}")
    if n == 0:
        eye = xp.broadcast_to(_eye(A.shape[-1], A.dtype, xp), tuple(A.shape)).copy()
        return Tensor._make(eye)
    if n < 0:
        _check(A, fn, square=True)
        _inv = inv
        A, n = _inv(A), -n
    result, base = None, A
    while n:
        if n & 1:
            result = base if result is None else matmul(result, base)
        n >>= 1
        if n:
            base = matmul(base, base)
    return result


# ---------------------------------------------------------------- compositions
def multi_dot(tensors, *, out=None):
    """torch.linalg.multi_dot: the chained product in the cheapest order (dynamic programme over
    the chain's dimensions); the first argument may be 1-D (a row), the last 1-D (a column)."""
    fn = "linalg.multi_dot"
    ts = list(tensors)
    if len(ts) < 2:
        raise RuntimeError(f"{fn}: expected at least 2 tensors but got {len(ts)}")
    for i, t in enumerate(ts):
        if not isinstance(t, Tensor):
            raise TypeError(f"{fn}: tensors[{i}] must be a Tensor, got {type(t).__name__}")
        ok = t.ndim == 2 or (t.ndim == 1 and i in (0, len(ts) - 1))
        if not ok:
            want = "1-D or 2-D" if i in (0, len(ts) - 1) else "2-D"
            raise RuntimeError(f"{fn}: tensors[{i}] must be {want}, got shape {tuple(t.shape)}")
    first_vec, last_vec = ts[0].ndim == 1, ts[-1].ndim == 1
    if first_vec:
        ts[0] = unsqueeze(ts[0], 0)
    if last_vec:
        ts[-1] = unsqueeze(ts[-1], 1)
    for i in range(len(ts) - 1):
        if ts[i].shape[1] != ts[i + 1].shape[0]:
            raise RuntimeError(f"{fn}: tensors[{i}] and tensors[{i + 1}] cannot be multiplied: shapes "
                               f"{tuple(ts[i].shape)} and {tuple(ts[i + 1].shape)}")
    dims = [ts[0].shape[0]] + [t.shape[1] for t in ts]
    k = len(ts)
    cost = [[0] * k for _ in range(k)]
    split = [[0] * k for _ in range(k)]
    for length in range(1, k):
        for i in range(k - length):
            j = i + length
            cost[i][j] = math.inf
            for s in range(i, j):
                c = cost[i][s] + cost[s + 1][j] + dims[i] * dims[s + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, s

    def build(i, j):
        if i == j:
            return ts[i]
        s = split[i][j]
        return matmul(build(i, s), build(s + 1, j))

    r = build(0, k - 1)
    if first_vec:
        r = squeeze(r, 0)
    if last_vec:
        r = squeeze(r, -1)
    return r


def linalg_vander(x, *, N=None):
    """torch.linalg.vander: (..., n) -> (..., n, N) with columns x^0, x^1, ..., x^(N-1), built by
    repeated products (so d x^k / dx = k x^(k-1), also at x = 0)."""
    xp = _lib(x)
    fn = "linalg.vander"
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}: argument 'x' must be a Tensor, got {type(x).__name__}")
    if x.ndim < 1:
        raise RuntimeError(f"{fn}: x must have at least 1 dimension, got a 0-d tensor")
    n = x.shape[-1] if N is None else N
    if n <= 1:
        raise RuntimeError(f"{fn}: N must be greater than 1, got {n}")
    cols = [Tensor._make(xp.ones_like(x._data)), x]
    for _ in range(2, n):
        cols.append(cols[-1] * x)
    return stack(cols, -1)


def linalg_diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """torch.linalg.diagonal (and torch.diagonal for any number of dims): the diagonal of the
    (dim1, dim2) planes, as a last dimension."""
    return _diagonal(A, offset, dim1, dim2, "linalg.diagonal")


def linalg_cross(input, other, *, dim=-1, out=None):  # noqa: A002
    """torch.linalg.cross: the cross product along ``dim`` (default -1, unlike torch.cross),
    inputs broadcast."""
    _cross = cross
    for name, t in (("input", input), ("other", other)):
        if not isinstance(t, Tensor):
            raise TypeError(f"linalg.cross: argument '{name}' must be a Tensor, got {type(t).__name__}")
    if input.ndim != other.ndim:
        raise RuntimeError(f"linalg.cross: inputs must have the same number of dimensions, got shapes "
                           f"{tuple(input.shape)} and {tuple(other.shape)}")
    nd = input.ndim
    if not -nd <= dim < nd:
        raise IndexError(f"linalg.cross: dim={dim} is out of range for {nd}-dimensional inputs")
    shape = xp.broadcast_shapes(tuple(input.shape), tuple(other.shape))
    a = input if tuple(input.shape) == shape else expand(input, shape)
    b = other if tuple(other.shape) == shape else expand(other, shape)
    if shape[dim] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3, got shapes "
                           f"{tuple(input.shape)} and {tuple(other.shape)}")
    return _cross(a, b, dim=dim % nd)


def householder_product(A, tau, *, out=None):
    """torch.linalg.householder_product: the first n columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^T
    with v_i = (0, ..., 0, 1, A[i+1:, i]) (LAPACK orgqr), composed from products (differentiable)."""
    xp = _lib(A)
    fn = "linalg.householder_product"
    _check(A, fn, "A")
    if not isinstance(tau, Tensor):
        raise TypeError(f"{fn}: argument 'tau' must be a Tensor, got {type(tau).__name__}")
    m, n = A.shape[-2], A.shape[-1]
    k = tau.shape[-1] if tau.ndim else -1
    if m < n or tau.ndim != A.ndim - 1 or not 0 <= k <= n:
        raise RuntimeError(f"{fn}: expected A of shape (..., m, n) with m >= n and tau of shape (..., k) with "
                           f"k <= n, got A {tuple(A.shape)} and tau {tuple(tau.shape)}")
    V = tril(A, -1) + Tensor._make(xp.eye(m, n, dtype=A.dtype))
    Q = Tensor._make(xp.broadcast_to(_eye(m, A.dtype, xp), tuple(A.shape[:-2]) + (m, m)).copy())
    for i in range(k):
        v = V[..., :, i:i + 1]
        Q = Q - matmul(matmul(Q, v) * tau[..., i:i + 1, None], _shape_transpose(v, -2, -1))
    return Q[..., :, :n]


_NO_LDL = ("the LDL^T factorisation is not implemented in varlens; for a positive-definite matrix use "
           "linalg.cholesky / cholesky_solve, otherwise linalg.lu_factor / lu_solve or linalg.solve")


ldl_factor = _unavailable("ldl_factor", _NO_LDL)


ldl_factor_ex = _unavailable("ldl_factor_ex", _NO_LDL)


ldl_solve = _unavailable("ldl_solve", _NO_LDL)


def vecdot(x, y, *, dim=-1, out=None):
    """torch.linalg.vecdot: sum(x * y) along ``dim`` (broadcast)."""
    return _reduce_sum(x * y, dim)


def tensorinv(A, ind=2, *, out=None):
    """torch.linalg.tensorinv: the inverse of A seen as a (prod(shape[:ind]), prod(shape[ind:]))
    matrix, reshaped to shape[ind:] + shape[:ind]."""
    fn = "linalg.tensorinv"
    if not isinstance(A, Tensor):
        raise TypeError(f"{fn}: argument 'A' must be a Tensor, got {type(A).__name__}")
    if not isinstance(ind, int) or ind <= 0:
        raise RuntimeError(f"{fn}: expected a strictly positive integer for 'ind', got {ind!r}")
    s = tuple(A.shape)
    rows, cols = math.prod(s[:ind]), math.prod(s[ind:])
    if rows != cols:
        raise RuntimeError(f"{fn}: expected prod(A.shape[:ind]) == prod(A.shape[ind:]), got {rows} and "
                           f"{cols} for shape {s} and ind={ind}")
    _inv = inv
    return reshape(_inv(reshape(A, (rows, cols))), s[ind:] + s[:ind])


def tensorsolve(A, B, dims=None, *, out=None):
    """torch.linalg.tensorsolve: X with tensordot(A, X, X.ndim) = B; ``dims`` of A are moved
    to the end first."""
    fn = "linalg.tensorsolve"
    for name, t in (("A", A), ("B", B)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{fn}: argument '{name}' must be a Tensor, got {type(t).__name__}")
    if dims is not None:
        dims = [d % A.ndim for d in dims]
        A = permute(A, [i for i in range(A.ndim) if i not in dims] + dims)
    rest = tuple(A.shape[B.ndim:])
    rows, cols = B.numel(), math.prod(rest)
    if tuple(A.shape[:B.ndim]) != tuple(B.shape) or rows != cols:
        raise RuntimeError(f"{fn}: A's leading dimensions must equal B's shape {tuple(B.shape)} and the "
                           f"rest must have as many elements, got A of shape {tuple(A.shape)}")
    _solve = solve
    x = _solve(reshape(A, (rows, cols)), reshape(B, (rows,)))
    return reshape(x, rest)


def _getrf(a):
    """Per matrix LAPACK getrf: packed LU factors, 1-based pivots (int32) and info (0, or the
    1-based index of the first exactly-zero pivot of U)."""
    if a.__class__ is not xp.ndarray:
        return _getrf_device(a)
    sla = _sla()
    m, n = a.shape[-2], a.shape[-1]
    batch = a.shape[:-2]
    flat = a.reshape((-1, m, n))
    lu = xp.empty_like(flat)
    piv = xp.empty((flat.shape[0], min(m, n)), dtype=xp.int32)
    info = xp.zeros(flat.shape[0], dtype=xp.int32)
    if flat.shape[0]:
        (getrf,) = sla.get_lapack_funcs(("getrf",), (flat,))
        for i, mat in enumerate(flat):
            lu[i], p, inf = getrf(mat)
            piv[i] = p + 1
            info[i] = inf
    return lu.reshape(a.shape), piv.reshape(batch + (min(m, n),)), info.reshape(batch)


def _getrf_device(a):
    """_getrf on a device: right-looking LU with partial pivoting (LAPACK's getf2 order: the first
    largest |entry| of each column is the pivot), batched, one vectorised step per column, so no
    pivot is read on the host.  An exactly zero pivot leaves its column as it is and sets info."""
    lib = B.namespace(a)
    m, n = a.shape[-2], a.shape[-1]
    k = min(m, n)
    batch = a.shape[:-2]
    lu = a.reshape((-1, m, n)).copy()
    nb = lu.shape[0]
    piv = lib.zeros((nb, k), dtype=xp.int32)
    info = lib.zeros(nb, dtype=xp.int32)
    rows = lib.arange(nb)
    for j in range(k):
        p = lib.argmax(lib.abs(lu[:, j:, j]), axis=1) + j
        piv[:, j] = p + 1
        rj = lu[:, j, :].copy()
        lu[:, j, :] = lu[rows, p, :]
        lu[rows, p, :] = rj
        d = lu[:, j, j]
        zero = d == 0
        info = lib.where((info == 0) & zero, j + 1, info).astype(xp.int32)
        if j + 1 < m:
            col = lib.where(zero[:, None], lu[:, j + 1:, j], lu[:, j + 1:, j] / lib.where(zero, 1, d)[:, None])
            lu[:, j + 1:, j] = col
            if j + 1 < n:
                lu[:, j + 1:, j + 1:] -= col[:, :, None] * lu[:, j, None, j + 1:]
    return lu.reshape(a.shape), piv.reshape(batch + (k,)), info.reshape(batch)


def _perm_matrix(piv, m, dtype):
    """P (..., m, m) with A = P L U, from 1-based row swaps."""
    if piv.__class__ is not xp.ndarray:
        return _perm_matrix_device(piv, m, dtype)
    batch = piv.shape[:-1]
    fp = piv.reshape((-1, piv.shape[-1]))
    P = xp.zeros((fp.shape[0], m, m), dtype=dtype)
    for b, row in enumerate(fp):
        perm = list(range(m))
        for i, p in enumerate(row):
            j = int(p) - 1
            perm[i], perm[j] = perm[j], perm[i]
        P[b, perm, range(m)] = 1
    return P.reshape(batch + (m, m))


def _perm_matrix_device(piv, m, dtype):
    """_perm_matrix on a device: the swaps applied to a batch of index vectors, one vectorised
    step per pivot (no pivot read on the host), then P[r, c] = (perm[c] == r)."""
    lib = B.namespace(piv)
    batch = piv.shape[:-1]
    fp = piv.reshape((-1, piv.shape[-1])).astype(xp.int64) - 1
    nb = fp.shape[0]
    perm = lib.broadcast_to(lib.arange(m), (nb, m)).copy()
    rows = lib.arange(nb)
    for i in range(fp.shape[1]):
        j = fp[:, i]
        pi = perm[:, i].copy()
        perm[:, i] = perm[rows, j]
        perm[rows, j] = pi
    P = (perm[:, None, :] == lib.arange(m)[:, None]).astype(dtype)
    return P.reshape(batch + (m, m))


class LU(Function):
    """A = P L U (partial pivoting; L unit lower m x k, U upper k x n, k = min(m, n)); P is a
    constant.  Square: with A' = P^T A, X = L^{-1} dA' U^{-1} splits into dL = L tril(X, -1) and
    dU = triu(X) U, so gA = P L^{-T} (tril(L^T gL, -1) + triu(gU U^T)) U^{-T}.  Wide (m < n):
    U = [U1 U2], U2 = L^{-1} P^T A2 gives gA2 = P L^{-T} gU2 and adds -L^{-T} gU2 U2^T to gL.
    Tall (m > n): L = [L1; L2], L2 = (P^T A)_2 U^{-1} gives (P^T gA)_2 = gL2 U^{-T} and adds
    -L2^T gL2 U^{-T} to gU."""

    def forward(self, a):
        xp = self.xp
        m, n = a.shape[-2], a.shape[-1]
        k = min(m, n)
        lu, piv, _ = _getrf(a)
        self.P = _perm_matrix(piv, m, a.dtype)
        self.piv = piv
        L = xp.tril(lu[..., :, :k], -1) + xp.eye(m, k, dtype=a.dtype)
        U = xp.triu(lu[..., :k, :])
        self.shapes = ((m, k), (k, n))
        out = _pack([L, U], a.ndim - 2)
        self.save_for_backward(out)
        return out

    def backward(self, g):
        (out,) = self.saved
        (m, k), (_, n) = self.shapes
        L, U = _unpack(out, self.shapes)
        gL, gU = _unpack(g, self.shapes)
        P = self.P
        if m == n:
            return D.matmul(P, _lu_square_grad(L, U, gL, gU))
        if m < n:
            U1, U2 = U[..., :, :m], U[..., :, m:]
            gU1, gU2 = gU[..., :, :m], gU[..., :, m:]
            LtgU2 = _trsolve(D.mT(L), gU2, upper=True, unit=True)     # L^{-T} gU2
            g1 = _lu_square_grad(L, U1, gL - D.matmul(LtgU2, D.mT(U2)), gU1)
            return D.matmul(P, _cat([g1, LtgU2], -1))
        L1, L2 = L[..., :n, :], L[..., n:, :]
        gL1, gL2 = gL[..., :n, :], gL[..., n:, :]
        gL2Ut = _trsolve(D.mT(U), gL2, upper=False, left=False)
        g1 = _lu_square_grad(L1, U, gL1, gU - D.matmul(D.mT(L2), gL2Ut))
        return D.matmul(P, _cat([g1, gL2Ut], -2))


def _lu_square_grad(L, U, gL, gU):
    n = L.shape[-1]
    lib = _lib(L)
    phi = D.matmul(D.mT(L), gL) * _tri_mask(n, True, L.dtype, -1, lib) + \
        D.matmul(gU, D.mT(U)) * _tri_mask(n, False, L.dtype, 0, lib)
    # L^{-T} phi U^{-T}
    y = _trsolve(D.mT(L), phi, upper=True, unit=True)
    return _trsolve(D.mT(U), y, upper=False, left=False)


LUResult = namedtuple("linalg_lu", ["P", "L", "U"])


LUFactorResult = namedtuple("linalg_lu_factor", ["LU", "pivots"])


LUFactorExResult = namedtuple("linalg_lu_factor_ex", ["LU", "pivots", "info"])


def _lu_parts(A, fn):
    _check(A, fn)
    m, n = A.shape[-2], A.shape[-1]
    k = min(m, n)
    if _needs_grad(A):
        packed = LU.apply(A)
        L, U = _results(packed, [(m, k), (k, n)])
        node = packed._node
        return node.P, node.piv, L, U
    ctx = LU()
    ctx.xp = _lib(A)
    packed = Tensor._make(ctx.forward(A._data))
    L, U = _results(packed, [(m, k), (k, n)])
    return ctx.P, ctx.piv, L, U


def _no_pivot(pivot, fn):
    if not pivot:
        raise RuntimeError(f"{fn}: LU without pivoting (pivot=False) is not implemented on the CPU, as in "
                           "PyTorch; use pivot=True")


def lu(A, *, pivot=True, out=None):
    """torch.linalg.lu: (P, L, U) with A = P L U; L and U differentiable (P is a constant)."""
    _no_pivot(pivot, "linalg.lu")
    P, _, L, U = _lu_parts(A, "linalg.lu")
    return LUResult(Tensor._make(P), L, U)


def _lu_compact(L, U):
    """L - I and U in one (m, n) matrix, as LAPACK stores them (differentiable)."""
    m, k = L.shape[-2], L.shape[-1]
    n = U.shape[-1]
    batch = tuple(L.shape[:-2])
    xp = _lib(L)
    if n > k:
        L = cat([L, Tensor._make(xp.zeros(batch + (m, n - k), L.dtype))], -1)
    if m > k:
        U = cat([U, Tensor._make(xp.zeros(batch + (m - k, n), U.dtype))], -2)
    return L * _tri_mask_rect(m, n, L.dtype, xp) + U


def _tri_mask_rect(m, n, dtype, xp=xp):
    return xp.tril(xp.ones((m, n), dtype=dtype), -1)


def lu_factor(A, *, pivot=True, out=None):
    """torch.linalg.lu_factor: (LU, pivots), LAPACK's compact form (1-based int32 pivots)."""
    _no_pivot(pivot, "linalg.lu_factor")
    _, piv, L, U = _lu_parts(A, "linalg.lu_factor")
    return LUFactorResult(_lu_compact(L, U), Tensor._make(piv))


def lu_factor_ex(A, *, pivot=True, check_errors=False, out=None):
    """torch.linalg.lu_factor_ex: (LU, pivots, info); info > 0 marks an exactly zero pivot."""
    _no_pivot(pivot, "linalg.lu_factor_ex")
    _, piv, L, U = _lu_parts(A, "linalg.lu_factor_ex")
    info = _getrf(A._data)[2]
    if check_errors and info.any():
        raise LinAlgError(f"linalg.lu_factor_ex: U[{int(info.reshape(-1)[info.reshape(-1) > 0][0]) - 1}, ...] "
                          "is exactly zero: the matrix is singular")
    return LUFactorExResult(_lu_compact(L, U), Tensor._make(piv), Tensor._make(info))


def lu_solve(LU, pivots, B, *, left=True, adjoint=False, out=None):
    """torch.linalg.lu_solve: X with A X = B (A^T X = B when adjoint; X A = B when not left),
    A = P L U given by lu_factor; composed from triangular solves, so differentiable in LU
    and B."""
    fn = "linalg.lu_solve"
    _check(LU, fn, "LU", square=True)
    _check(B, fn, "B")
    _same_dtype(LU, B, fn, "LU", "B")
    n = LU.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise RuntimeError(f"{fn}: incompatible shapes of LU {tuple(LU.shape)} and B {tuple(B.shape)}")
    piv = pivots._data if isinstance(pivots, Tensor) else xp.asarray(pivots)
    if piv.shape != tuple(LU.shape[:-1]) or piv.dtype.kind not in "iu":
        raise RuntimeError(f"{fn}: pivots must be an integer tensor of shape {tuple(LU.shape[:-1])}, got "
                           f"{piv.dtype} of shape {piv.shape}")
    P = Tensor._make(_perm_matrix(_on(piv, LU._data), n, LU.dtype))
    Pt = _shape_transpose(P, -2, -1)
    LUt = _shape_transpose(LU, -2, -1)
    st = solve_triangular
    if left and not adjoint:    # X = U^{-1} L^{-1} P^T B
        return st(LU, st(LU, matmul(Pt, B), upper=False, unitriangular=True), upper=True)
    if left:                    # A^T = U^T L^T P^T:  X = P L^{-T} U^{-T} B
        return matmul(P, st(LUt, st(LUt, B, upper=False), upper=True, unitriangular=True))
    if not adjoint:             # X = B U^{-1} L^{-1} P^T
        return matmul(st(LU, st(LU, B, upper=True, left=False), upper=False, left=False,
                           unitriangular=True), Pt)
    # X A^T = B:  X = B P L^{-T} U^{-T}
    return st(LUt, st(LUt, matmul(B, P), upper=True, left=False, unitriangular=True), upper=False, left=False)


def _ex(A, check_errors, fn, matrix, compute, nan_shape):
    """(compute(), info = 0); where LAPACK finds A singular, (NaN of nan_shape(), info > 0: the
    1-based index of the first exactly zero pivot of A's LU factorisation), or with check_errors
    a LinAlgError naming the op (``matrix`` is how the message names A)."""
    if A._data.__class__ is not xp.ndarray:
        return _ex_device(A, check_errors, fn, matrix, compute, nan_shape)
    try:
        return compute(), Tensor._make(xp.zeros(tuple(A.shape[:-2]), dtype=xp.int32))
    except (xp.linalg.LinAlgError, LinAlgError):   # (inv/solve re-raise NumPy's as varlens's)
        pass
    info = _getrf(A._data)[2]
    if check_errors:
        raise LinAlgError(f"{fn}: {matrix} is singular (a pivot of its LU factorisation is exactly zero)")
    return Tensor._make(xp.full(nan_shape(), xp.nan, dtype=A.dtype)), Tensor._make(info)


def _ex_device(A, check_errors, fn, matrix, compute, nan_shape):
    """_ex on a device: info from the device LU (no host read), the result NaN where any matrix
    is singular (as on the CPU); only check_errors reads info on the host, as PyTorch's does."""
    lib = B.namespace(A._data)
    info = _getrf(A._data)[2]
    if check_errors and bool((info > 0).any()):
        raise LinAlgError(f"{fn}: {matrix} is singular (a pivot of its LU factorisation is exactly zero)")
    try:
        res = compute()
    except (xp.linalg.LinAlgError, LinAlgError):   # (a library that raises for a singular matrix)
        return Tensor._make(lib.full(nan_shape(), xp.nan, dtype=A.dtype)), Tensor._make(info)
    return where(Tensor._make((info > 0).any()), float("nan"), res), Tensor._make(info)


def inv_ex(A, *, check_errors=False, out=None):
    """torch.linalg.inv_ex: (inverse, info); info > 0 is the 1-based index of an exactly zero
    pivot (the matrix is singular; its inverse is then NaN)."""
    _inv = inv
    _check(A, "linalg.inv_ex", square=True)
    return InvExResult(*_ex(A, check_errors, "linalg.inv_ex", "the matrix", lambda: _inv(A), lambda: tuple(A.shape)))


def solve_ex(A, B, *, left=True, check_errors=False, out=None):
    """torch.linalg.solve_ex: (result, info) as inv_ex; left=False solves X A = B."""
    _solve = solve
    _check(A, "linalg.solve_ex", square=True)

    def compute():
        if left:
            return _solve(A, B)
        return _shape_transpose(_solve(_shape_transpose(A, -2, -1), _shape_transpose(B, -2, -1)), -2, -1)

    def nan_shape():
        if B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1])):  # vectors
            return xp.broadcast_shapes(tuple(A.shape[:-2]), tuple(B.shape[:-1])) + (A.shape[-1],)
        return xp.broadcast_shapes(tuple(A.shape[:-2]), tuple(B.shape[:-2])) + tuple(B.shape[-2:])

    return SolveExResult(*_ex(A, check_errors, "linalg.solve_ex", "the matrix A", compute, nan_shape))


def cond(A, p=None, *, out=None):
    """torch.linalg.cond: the 2-norm condition number S_max / S_min by default; p='fro', 'nuc',
    1, -1, inf, -inf, 2, -2 as torch (norm(A, p) * norm(inv(A), p) for the others)."""
    _check(A, "linalg.cond")
    if p is None or p in (2, -2):
        S = svdvals(A)
        r = S[..., 0] / S[..., -1]
        return r if p != -2 else S[..., -1] / S[..., 0]
    _check(A, "linalg.cond", square=True)
    _inv = inv
    return matrix_norm(A, p) * matrix_norm(_inv(A), p)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None, out=None):  # noqa: A002
    """torch.linalg.matrix_norm: 'fro', 'nuc', 2/-2 (largest/smallest singular value), and
    1/-1/inf/-inf (max/min absolute column/row sum)."""
    fn = "linalg.matrix_norm"
    _check(A, fn)
    nd = A.ndim
    d0, d1 = dim[0] % nd, dim[1] % nd
    if dtype is not None:
        A = A.to(dtype)
    if ord == "fro":
        r = sqrt(_reduce_sum(A * A, (d0, d1), keepdim=keepdim))
        return r
    if ord in ("nuc", 2, -2):
        x = permute(A, [i for i in range(nd) if i not in (d0, d1)] + [d0, d1])
        S = svdvals(x)
        r = _reduce_sum(S, -1) if ord == "nuc" else (S[..., 0] if ord == 2 else S[..., -1])
        if keepdim:
            for d in sorted((d0, d1)):
                r = unsqueeze(r, d)
        return r
    inf = math.inf
    if ord in (1, -1, inf, -inf):
        red = d0 if ord in (1, -1) else d1     # sum over rows for column sums (ord 1)
        other = d1 if ord in (1, -1) else d0
        s = _reduce_sum(_pointwise_abs(A), red, keepdim=True)
        r = amax(s, other, keepdim=True) if ord > 0 else amin(s, other, keepdim=True)
        if not keepdim:
            r = squeeze(squeeze(r, max(d0, d1)), min(d0, d1))
        return r
    raise RuntimeError(f"{fn}: order {ord!r} not supported: expected 'fro', 'nuc', 2, -2, 1, -1, inf or -inf")


# ---------------------------------------------------------------- older torch.* names
GeqrfResult = namedtuple("geqrf", ["a", "tau"])


LUUnpackResult = namedtuple("lu_unpack", ["P", "L", "U"])


@torch_args(tensor_first=True)
def geqrf(input, *, out=None):  # noqa: A002
    """torch.geqrf: LAPACK's compact QR (Householder vectors below R, and tau); not
    differentiable, as in PyTorch (use linalg.qr for gradients)."""
    _check(input, "geqrf", "input")
    a = input._data
    if a.__class__ is not xp.ndarray:
        qr_, tau = _geqrf_device(a)
        return GeqrfResult(Tensor._make(qr_), Tensor._make(tau))
    m, n = a.shape[-2], a.shape[-1]
    flat = a.reshape((-1, m, n))
    qr_ = xp.empty_like(flat)
    tau = xp.empty((flat.shape[0], min(m, n)), dtype=a.dtype)
    if flat.shape[0]:
        (fn,) = _sla().get_lapack_funcs(("geqrf",), (flat,))
        for i, mat in enumerate(flat):
            qr_[i], tau[i], _, _ = fn(mat)
    return GeqrfResult(Tensor._make(qr_.reshape(a.shape)), Tensor._make(tau.reshape(a.shape[:-2] + (min(m, n),))))


def _geqrf_device(a):
    """geqrf on a device: LAPACK's Householder steps (dlarfg's reflector: beta = -sign(alpha) *
    ||x||, tau = (beta - alpha) / beta, v = x[1:] / (alpha - beta); tau = 0 where x[1:] = 0),
    batched, one vectorised step per column, so nothing is read on the host."""
    lib = B.namespace(a)
    m, n = a.shape[-2], a.shape[-1]
    k = min(m, n)
    r = a.copy()
    tau = lib.zeros(a.shape[:-2] + (k,), dtype=a.dtype)
    for j in range(k):
        alpha = r[..., j, j]
        tail = r[..., j + 1:, j]
        xn2 = (tail * tail).sum(-1)
        skip = xn2 == 0
        beta = -lib.where(alpha >= 0, 1.0, -1.0) * lib.sqrt(alpha * alpha + xn2)
        safe = lib.where(skip, 1.0, beta)
        t = lib.where(skip, 0.0, (beta - alpha) / safe)
        v = lib.where(skip[..., None], 0.0, tail / lib.where(skip, 1.0, alpha - beta)[..., None])
        r[..., j + 1:, j] = lib.where(skip[..., None], tail, v)
        r[..., j, j] = lib.where(skip, alpha, beta)
        tau[..., j] = t
        if j + 1 < n:   # apply H = I - t w w^T, w = (1, v), to the columns on the right
            rest = r[..., j:, j + 1:]
            w = lib.concatenate([lib.ones(v.shape[:-1] + (1,), a.dtype), v], -1)
            wr = (w[..., :, None] * rest).sum(-2)
            r[..., j:, j + 1:] = rest - t[..., None, None] * w[..., :, None] * wr[..., None, :]
    return r.astype(a.dtype, copy=False), tau.astype(a.dtype, copy=False)


@torch_args(tensor_first=True)
def orgqr(input, tau):  # noqa: A002
    """torch.orgqr: linalg.householder_product."""
    return householder_product(input, tau)


@torch_args(tensor_first=True)
def ormqr(input, tau, other, left=True, transpose=False, *, out=None):  # noqa: A002
    """torch.ormqr: Q @ other (Q^T, on the right, as the flags say), Q = H_1 ... H_k given by geqrf's
    reflectors, applied one reflector at a time (differentiable)."""
    fn = "ormqr"
    _check(input, fn, "input")
    _check(other, fn, "other")
    mq = input.shape[-2]
    if (other.shape[-2] if left else other.shape[-1]) != mq:
        raise RuntimeError(f"{fn}: other must have {mq} {'rows' if left else 'columns'} to match input of shape "
                           f"{tuple(input.shape)}, got shape {tuple(other.shape)}")
    k = tau.shape[-1]
    V = tril(input, -1) + Tensor._make(_lib(input).eye(mq, input.shape[-1], dtype=input.dtype))
    order = range(k)
    # left: Q C = H_1 (... (H_k C)), Q^T C = H_k (... (H_1 C)); right: C Q = ((C H_1) ...) H_k
    if left != transpose:
        order = reversed(order)
    C = other
    for i in order:
        v = V[..., :, i:i + 1]
        t = tau[..., i:i + 1, None]
        if left:
            C = C - matmul(v * t, matmul(_shape_transpose(v, -2, -1), C))
        else:
            C = C - matmul(matmul(C, v) * t, _shape_transpose(v, -2, -1))
    return C


@torch_args(tensor_first=True)
def lu_old(A, pivot=True, get_infos=False, *, out=None):
    """torch.lu (deprecated in torch): (A_LU, pivots) or (A_LU, pivots, infos)."""
    r = lu_factor_ex(A, pivot=pivot)
    return (r.LU, r.pivots, r.info) if get_infos else (r.LU, r.pivots)


@torch_args(tensor_first=True)
def lu_solve_old(b, LU_data, LU_pivots, *, out=None):  # noqa: N803
    """torch.lu_solve(b, LU_data, LU_pivots): linalg.lu_solve with the arguments reordered."""
    return lu_solve(LU_data, LU_pivots, b)


@torch_args(tensor_first=True)
def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True, *, out=None):  # noqa: N803
    """torch.lu_unpack: (P, L, U) from lu_factor's compact form (L and U differentiable)."""
    fn = "lu_unpack"
    _check(LU_data, fn, "LU_data")
    m, n = LU_data.shape[-2], LU_data.shape[-1]
    k = min(m, n)
    empty = Tensor._make(_lib(LU_data).empty((0,), dtype=LU_data.dtype))
    P = empty
    if unpack_pivots:
        piv = LU_pivots._data if isinstance(LU_pivots, Tensor) else xp.asarray(LU_pivots)
        if piv.shape != tuple(LU_data.shape[:-2]) + (k,):
            raise RuntimeError(f"{fn}: LU_pivots must have shape {tuple(LU_data.shape[:-2]) + (k,)}, got {piv.shape}")
        P = Tensor._make(_perm_matrix(_on(piv, LU_data._data), m, LU_data.dtype))
    if not unpack_data:
        return LUUnpackResult(P, empty, empty)
    L = tril(LU_data[..., :, :k], -1) + Tensor._make(_lib(LU_data).eye(m, k, dtype=LU_data.dtype))
    U = triu(LU_data[..., :k, :])
    return LUUnpackResult(P, L, U)


def svd_lowrank(A, q=6, niter=2, M=None):
    """torch.svd_lowrank: (U, S, V) of the q largest singular triplets of A - M.  PyTorch uses a
    randomised range finder (an approximation); varlens returns the exact truncated SVD."""
    _check(A, "svd_lowrank")
    q = min(6 if q is None else q, A.shape[-2], A.shape[-1])
    X = A - M if M is not None else A
    U, S, Vh = svd(X, full_matrices=False)
    return OldSVDResult(U[..., :, :q], S[..., :q], _shape_transpose(Vh[..., :q, :], -2, -1))


def pca_lowrank(A, q=None, center=True, niter=2):
    """torch.pca_lowrank: svd_lowrank of A with its column means removed (when center=True)."""
    _check(A, "pca_lowrank")
    q = min(6, A.shape[-2], A.shape[-1]) if q is None else q
    X = A - mean(A, -2, keepdim=True) if center else A
    return svd_lowrank(X, q)


def norm(x, p=2, dim=None, keepdim=False):
    """Vector p-norm over dim (all elements if None), differentiable."""
    if x._data.dtype.kind in "biu":
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as input. "
                           f"Got {_tname(x.dtype)} (dtype {x.dtype}); convert it with .float() first")
    if isinstance(p, str) and p != "fro":
        if p == "nuc":
            return matrix_norm(x, "nuc", dim=(-2, -1) if dim is None else dim, keepdim=keepdim)
        raise RuntimeError(f"norm: Order {p!r} not supported; p must be a number (2, 1, inf, -inf, 0, ...), "
                           f"'fro' or 'nuc'")
    if p is None or p in ("fro", 2, 2.0):
        return Norm2.apply(x, norm_dims(dim, x.ndim, "norm"), keepdim)
    if p == 0:
        return _reduce_sum((x != 0).to(x.dtype), dim, keepdim)
    if p == float("-inf"):
        return amin(E.abs(x), dim, keepdim)
    if p in (1, 1.0):
        return _reduce_sum(E.abs(x), dim, keepdim)
    if p == float("inf"):
        return amax(E.abs(x), dim, keepdim)
    return E.pow(_reduce_sum(E.pow(E.abs(x), p), dim, keepdim), 1.0 / p)


@torch_args(tensor_first=True)
def dist(input, other, p=2):  # noqa: A002
    """p-norm of (input - other) over all elements (p = inf, -inf, 0 allowed)."""
    diff = reshape(sub(input, other), (-1,))
    a = _pointwise_abs(diff)
    if p == math.inf:
        return amax(a)
    if p == -math.inf:
        return amin(a)
    if p == 0:
        return _reduce_sum(cast(ne(diff, 0), diff.dtype))
    if p == 2:
        return norm(diff)
    return _pointwise_pow(_reduce_sum(_pointwise_pow(a, p)), 1.0 / p)

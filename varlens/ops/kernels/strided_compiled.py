"""The compiled strided elementwise loops (numba), at module level so their machine code is
cached.  Imported on first use by ``varlens.ops.kernels.strided``, which documents them;
importing this module imports numba.

Each operand is passed as the flat, C-contiguous 1-D array over the memory it views (``af``)
with the view itself (``a``, any layout, of shape (R1, R2, L) after the caller's axis
permutation), so the offset of its first element is known; each row of L elements is then a
contiguous slice of the flat array and the inner loop vectorises (numba's loops over an
'A'-layout array index with a run-time stride and do not)."""
import numba as nb
import numpy as np

from varlens.ops.kernels import jit

k = jit(nb)


@nb.njit(inline="always", cache=True)
def _layout(a, af, b1, b2, R1, R2, L):
    """(element offset of a's first element in af, row strides 1 and 2 in elements), or offset
    -1 when the (R1, R2, L) rows at byte strides (b1, b2, itemsize) from a's first element do
    not all lie inside af (then the caller computes with NumPy).  Inside af means af is a view
    of a's memory: a copy would be a separate allocation, disjoint from it."""
    isz = af.itemsize
    d = np.int64(a.ctypes.data) - np.int64(af.ctypes.data)   # (signed: the pointers are unsigned)
    off = d // isz
    if d % isz != 0 or b1 % isz != 0 or b2 % isz != 0:
        return -1, 0, 0
    s1 = b1 // isz
    s2 = b2 // isz
    last = off + (R1 - 1) * s1 + (R2 - 1) * s2 + L
    if off < 0 or s1 < 0 or s2 < 0 or last > af.size:
        return -1, 0, 0
    return off, s1, s2


@k
def binary_rows(op, a, af, sa1, sa2, b, bf, sb1, sb2, out):
    """out[i, j, :] = A[i, j, :] (op) B[i, j, :] for op 0 add, 1 subtract, 2 multiply (no
    divide: the kernels' fast-math would make it a reciprocal times), where A is the
    (R1, R2, L) array at a's first element with byte strides (sa1, sa2, itemsize) (B likewise);
    out (R1, R2, L) C-contiguous.  Returns False (having written nothing) when an operand's
    rows are not inside its flat array."""
    R1, R2, L = out.shape
    ao, a1, a2 = _layout(a, af, sa1, sa2, R1, R2, L)
    bo, b1, b2 = _layout(b, bf, sb1, sb2, R1, R2, L)
    if ao < 0 or bo < 0:
        return False
    for i in range(R1):
        for j in range(R2):
            pa = ao + i * a1 + j * a2
            pb = bo + i * b1 + j * b2
            ar = af[pa:pa + L]
            br = bf[pb:pb + L]
            o = out[i, j]
            if op == 0:
                for t in range(L):
                    o[t] = ar[t] + br[t]
            elif op == 1:
                for t in range(L):
                    o[t] = ar[t] - br[t]
            else:
                for t in range(L):
                    o[t] = ar[t] * br[t]
    return True

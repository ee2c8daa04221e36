"""Embedding lookup as one op: out = W[idx];  dL/dW adds each output row's cotangent at its index
(repeated indices accumulate), as the adjoint of indexing."""
from __future__ import annotations
from varlens.core import array as B
from varlens.core import primitives as D
from varlens.core.function import Function
from varlens.core.array import xp as _np

_ndarray = _np.ndarray


class Embedding(Function):
    """out = W[idx] (rows of the table);  dL/dW[r] = sum of g over the positions where idx == r
    (repeats accumulate), zero for ``padding_idx``.  A lookup is a product with a one-hot matrix,
    out = onehot(idx) W, so this is the weight gradient X^T g of seed 003 eq. 1.6.5 with X one-hot."""

    def forward(self, w, idx, padding_idx=None):
        self.idx, self.wshape, self.pad = idx, w.shape, padding_idx
        return self.xp.take(w, idx, axis=0)

    def backward(self, g):
        xp = self.xp
        shape, idx = self.wshape, self.idx
        if g.__class__ is _ndarray:
            dw = xp.zeros(shape, dtype=g.dtype)
            flat = idx.reshape(-1)
            g2 = g.reshape(flat.size, -1)
            if flat.size:
                # group the rows by index (one sort + segment sums): measured 1.5-6x faster than
                # NumPy's scattered add.at for lookup counts from 0.2x to 20x the table size
                order = xp.argsort(flat, kind="stable")
                fs = flat[order]
                starts = xp.flatnonzero(xp.r_[True, fs[1:] != fs[:-1]])
                dw.reshape(shape[0], -1)[fs[starts]] = xp.add.reduceat(g2[order], starts, axis=0)
            if self.pad is not None:
                dw[self.pad] = 0
            return dw, None
        if B.is_device_array(g):
            # on the device: one scatter-add of the rows (atomic adds; no sort, no host sync)
            dw = xp.zeros(shape, dtype=g.dtype)
            flat = idx.reshape(-1)
            if flat.size:
                B.add_at(xp, dw.reshape(shape[0], -1), flat, g.reshape(flat.size, -1))
            if self.pad is not None:
                dw[self.pad] = 0
            return dw, None
        dw = D.index_scatter(g, idx, shape)   # a Tensor cotangent (create_graph): recorded
        if self.pad is not None:
            ns = B.namespace(g._data)
            m = ns.ones((shape[0],) + (1,) * (len(shape) - 1), dtype=g.dtype)
            m[self.pad] = 0
            dw = dw * m
        return dw, None

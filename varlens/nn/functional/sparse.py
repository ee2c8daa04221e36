"""Sparse functions (torch's name for lookups): embedding, embedding_bag, one_hot.
"""
from __future__ import annotations

from varlens import ops as _ops
from varlens.core import array as B
from varlens.core.array import xp
from varlens.core.tensor import Tensor
from varlens.nn.functional._common import _arr, _require_tensor, _shape, IndexTypeError
from varlens.ops.index import one_hot  # noqa: F401
from varlens.ops.nn import embedding as _nn_embedding_mod


# ---------------------------------------------------------------- embedding, padding
def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of ``weight`` picked by integer ``input``; gradients of repeated rows accumulate,
    the ``padding_idx`` row gets none."""
    idx = _arr(input)
    if not hasattr(idx, "dtype") or idx.dtype.kind not in "iu":
        raise IndexTypeError(f"Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                             f"Long, Int; but got {getattr(idx, 'dtype', type(idx).__name__)} instead (embedding: "
                             f"input must hold integer indices (int64))")
    V = weight._data.shape[0]
    # the range check reads values on the host: CPU only (on CUDA an index out of range is not
    # checked here; docs/conventions.md, "Layers, losses and attention on CUDA").  int64 indices:
    # one unsigned max (a negative index reads as a huge one) instead of a min and a max
    if idx.__class__ is xp.ndarray and idx.size and (
            idx.view(xp.uint64).max() >= V if idx.dtype == xp.int64
            else idx.min() < 0 or idx.max() >= V):
        bad = int(idx.max()) if idx.max() >= V else int(idx.min())
        raise IndexError(f"embedding: index {bad} is out of range for an embedding table with {V} rows "
                         f"(valid 0..{V - 1})")
    if padding_idx is not None and padding_idx < 0:
        padding_idx += V
    if max_norm is not None:
        _renorm_rows(weight, idx, max_norm, norm_type)
    if scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: scale_grad_by_freq and sparse gradients are not supported")
    out = _nn_embedding_mod.Embedding.apply(weight, idx, padding_idx)
    if (padding_idx is None and max_norm is None and idx.__class__ is xp.ndarray
            and (isinstance(input, Tensor) or idx is not input)):
        # where the lookup came from, for an LSTM fed by it (varlens/ops/nn/rnn.py,
        # ``embedding_source``): table, indices, and the versions that must stay unchanged (a
        # caller's own ndarray of indices has no version: not marked)
        iv = input._version if isinstance(input, Tensor) else None
        out.__dict__["_emb_src"] = (weight, idx, out._version, out._version[0], weight._version[0],
                                    iv, iv[0] if iv is not None else 0)
    return out


def _renorm_rows(weight, idx, max_norm, norm_type):
    """In place (outside autograd), as PyTorch: rows looked up with norm > max_norm are rescaled."""
    w = weight._data
    if w.__class__ is not xp.ndarray:
        # on the device: every looked-up row (repeats included, each writing the same value)
        # rescaled where its norm exceeds max_norm; no unique(), no host sync
        ns = B.namespace(w, idx)
        rows = idx.reshape(-1)
        norms = ns.linalg.norm(w[rows], ord=norm_type, axis=1)
        scale = ns.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0).astype(w.dtype)
        w[rows] = w[rows] * scale[:, None]
        weight._version[0] += 1
        return
    rows = xp.unique(idx)
    norms = xp.linalg.norm(w[rows], ord=norm_type, axis=1)
    big = norms > max_norm
    w[rows[big]] *= (max_norm / (norms[big] + 1e-7))[:, None]
    weight._version[0] += 1


# ---------------------------------------------------------------- embedding_bag
def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
                  mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
                  padding_idx=None):
    """Sum, mean or max of the embedding rows in each bag.  Bags are the rows of a 2-D input,
    or the slices input[offsets[b]:offsets[b+1]] of a 1-D input.  ``padding_idx`` entries are
    left out of their bag (and of the mean's count); an empty bag gives zeros."""
    op = "embedding_bag"
    _require_tensor(weight, "weight", op)
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"{op}: mode has to be one of sum, mean or max, got {mode!r}")
    if scale_grad_by_freq or sparse:
        raise NotImplementedError(f"{op}: scale_grad_by_freq and sparse gradients are not supported")
    idx = input._data if isinstance(input, Tensor) else xp.asarray(input)
    if idx.dtype.kind not in "iu":
        raise TypeError(f"{op}: input must hold integer indices (int64), got {idx.dtype}")
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(f"{op}: per_sample_weights was not None. per_sample_weights is only "
                                      f"supported for mode='sum' (got mode='{mode}')")
        if _shape(per_sample_weights) != idx.shape:
            raise ValueError(f"{op}: per_sample_weights of shape {_shape(per_sample_weights)} must have the "
                             f"input's shape {idx.shape}")
    if idx.__class__ is not xp.ndarray:
        return _embedding_bag_device(idx, weight, offsets, max_norm, norm_type, mode, per_sample_weights,
                                     include_last_offset, padding_idx, op)
    if idx.ndim == 2:
        if offsets is not None:
            raise ValueError(f"{op}: if input is 2D, then offsets has to be None, as input is treated as a "
                             "mini-batch of fixed length sequences")
        B, n = idx.shape
        starts = xp.arange(B) * n
        flat = idx.reshape(-1)
        ends = starts + n
    elif idx.ndim == 1:
        off = _bag_offsets(offsets, xp, op)
        flat = idx
        if include_last_offset:
            starts, ends = off[:-1], off[1:]
        else:
            starts, ends = off, xp.append(off[1:], idx.size)
        B = starts.size
        if B and (starts[0] != 0):
            raise ValueError(f"{op}: offsets[0] has to be 0, i.e., the first sequence in the mini-batch has "
                             f"to start from position 0. However, got {int(starts[0])}")
        if xp.any(ends < starts) or (ends.size and ends[-1] > idx.size):
            raise ValueError(f"{op}: offsets must be non-decreasing and at most the input length {idx.size}, "
                             f"got {off.tolist()}")
    else:
        raise ValueError(f"{op}: input has to be 1D or 2D Tensor, but got Tensor of dimension {idx.ndim}")
    V, D = _shape(weight)
    if padding_idx is not None and padding_idx < 0:
        padding_idx += V
    emb = embedding(Tensor._make(flat), weight, None, max_norm, norm_type)
    bag = xp.repeat(xp.arange(B), ends - starts)
    keep = xp.ones(flat.size, dtype=bool) if padding_idx is None else flat != padding_idx
    if per_sample_weights is not None:
        emb = emb * _ops.unsqueeze(_ops.reshape(per_sample_weights, (-1,)), 1)
    if mode == "max":
        # scatter each bag into rows of a (B, longest, D) block filled with -inf, take the max
        # along the row (gradient to the arg max); empty bags give 0
        counts = xp.bincount(bag[keep], minlength=B)
        Lmax = max(int(counts.max()) if B else 0, 1)
        pos = xp.zeros(flat.size, dtype=xp.int64)
        k = xp.flatnonzero(keep)
        kb = bag[k]
        first = xp.searchsorted(kb, kb, side="left")
        pos[k] = xp.arange(k.size) - first
        block = Tensor._make(xp.full((B, Lmax, D), -xp.inf, dtype=weight.dtype))
        block = _ops.setitem(block, (kb, pos[k]), _ops.index_select(emb, 0, Tensor._make(k)))
        m = _ops.max(block, 1).values
        empty = counts == 0
        return _ops.where(empty[:, None], 0.0, m) if empty.any() else m
    w = keep.astype(weight.dtype)
    if mode == "mean":
        counts = xp.bincount(bag, weights=w, minlength=B)
        w = w / xp.maximum(counts, 1)[bag]
    emb = emb * Tensor._make(w[:, None].astype(weight.dtype))
    zeros = Tensor._make(xp.zeros((B, D), dtype=weight.dtype))
    return _ops.index_add(zeros, 0, Tensor._make(bag), emb)


def _bag_offsets(offsets, xp, op):
    """embedding_bag's 1-D ``offsets`` as an int64 array of library ``xp`` (checked)."""
    if offsets is None:
        raise ValueError(f"{op}: offsets has to be a 1D Tensor but got None")
    off = offsets._data if isinstance(offsets, Tensor) else xp.asarray(offsets)
    if off.ndim != 1:
        raise ValueError(f"{op}: offsets has to be a 1D Tensor, got shape {off.shape}")
    return off.astype(xp.int64)


def _embedding_bag_device(idx, weight, offsets, max_norm, norm_type, mode, per_sample_weights,
                          include_last_offset, padding_idx, op):
    """embedding_bag with the indices on the device.  A 2-D input (fixed-size bags) is a lookup and a
    masked reduction over axis 1.  A 1-D input with offsets gives each entry its bag by a binary
    search of the offsets (no host read) and sums with a scatter-add; mode='max' there reads the
    offsets on the host once (the longest bag sets the block the maximum is taken over).  Offsets
    are not value-checked on the device (docs/conventions.md, "Layers, losses and attention on CUDA")."""
    ns = B.namespace(idx)
    V, D = _shape(weight)
    if padding_idx is not None and padding_idx < 0:
        padding_idx += V
    psw = None if per_sample_weights is None else _ops.reshape(per_sample_weights, (-1,))
    if idx.ndim == 2:
        if offsets is not None:
            raise ValueError(f"{op}: if input is 2D, then offsets has to be None, as input is treated as a "
                             "mini-batch of fixed length sequences")
        nb, n = idx.shape
        emb = embedding(Tensor._make(idx), weight, None, max_norm, norm_type)          # (B, n, D)
        keep = None if padding_idx is None else (idx != padding_idx)
        if psw is not None:
            emb = emb * _ops.reshape(psw, (nb, n, 1))
        if mode == "max":
            if keep is None:
                return _ops.max(emb, 1).values
            m = _ops.max(_ops.where(keep[:, :, None], emb, -xp.inf), 1).values
            return _ops.where(keep.any(axis=1)[:, None], m, 0.0)
        w = ns.ones(idx.shape, dtype=weight.dtype) if keep is None else keep.astype(weight.dtype)
        if mode == "mean":
            w = w / ns.maximum(w.sum(axis=1, keepdims=True), 1)
        return _ops.sum(emb * Tensor._make(w[:, :, None]), 1)
    if idx.ndim != 1:
        raise ValueError(f"{op}: input has to be 1D or 2D Tensor, but got Tensor of dimension {idx.ndim}")
    off = _bag_offsets(offsets, ns, op)
    L = idx.size
    starts = off[:-1] if include_last_offset else off
    nb = starts.size
    pos = ns.arange(L)
    bag = ns.searchsorted(starts, pos, side="right") - 1      # the bag of each entry
    keep = bag >= 0
    if include_last_offset:
        keep &= pos < off[-1]
    if padding_idx is not None:
        keep &= idx != padding_idx
    bag = ns.clip(bag, 0, max(nb - 1, 0))
    emb = embedding(Tensor._make(idx), weight, None, max_norm, norm_type)             # (L, D)
    if psw is not None:
        emb = emb * _ops.unsqueeze(psw, 1)
    if mode == "max":
        # one host read of the offsets: the bags' lengths set the (B, longest, D) block
        ho = B.to_host(off)
        ends = B.to_host(ns.concatenate([off[1:], ns.asarray([L], dtype=xp.int64)]))[:nb] \
            if not include_last_offset else ho[1:]
        hk = B.to_host(keep)
        hb = xp.repeat(xp.arange(nb), ends - ho[:nb])
        k = xp.flatnonzero(hk[:hb.size])
        kb = hb[k]
        counts = xp.bincount(kb, minlength=nb)
        lmax = max(int(counts.max()) if nb else 0, 1)
        slot = xp.arange(k.size) - xp.searchsorted(kb, kb, side="left")
        block = Tensor._make(ns.full((nb, lmax, D), -xp.inf, dtype=weight.dtype))
        block = _ops.setitem(block, (ns.asarray(kb), ns.asarray(slot)),
                             _ops.index_select(emb, 0, Tensor._make(ns.asarray(k))))
        m = _ops.max(block, 1).values
        return _ops.where(ns.asarray(counts == 0)[:, None], 0.0, m)
    w = keep.astype(weight.dtype)
    if mode == "mean":
        counts = ns.zeros(nb, dtype=weight.dtype)
        B.add_at(ns, counts, bag, w)
        w = w / ns.maximum(counts, 1)[bag]
    emb = emb * Tensor._make(w[:, None])
    zeros = Tensor._make(ns.zeros((nb, D), dtype=weight.dtype))
    return _ops.index_add(zeros, 0, Tensor._make(bag), emb)

"""Variable-length batches for the recurrent layers: PyTorch's ``pack_padded_sequence`` /
``pad_packed_sequence`` / ``pad_sequence`` API, implemented with a mask.

varlens does not pack the data: a ``PackedSequence`` here keeps the padded time-major
tensor (T, B, *) and the lengths, and the recurrent layers run every step of the padded
batch with a mask (T, B) of 1 for real steps and 0 for padding.  At a padded step the
state is carried unchanged and the output is zero, so

* the outputs at real positions, the zeros at padded positions, and the final states
  (taken at each sequence's own last step, or first step for the reverse direction)
  equal PyTorch's packed results;
* padded positions contribute nothing to any loss or gradient.

It costs the padded steps' arithmetic (PyTorch's packed kernels skip them); in exchange
the fused layer op keeps its whole-batch GEMMs.  ``.data`` and ``.batch_sizes`` give
PyTorch's packed layout on request (computed from the padded tensor), for code that
reads them.

pack_sequence, unpack_sequence, unpad_sequence and invert_permutation are built on that
masked PackedSequence too.
"""
from __future__ import annotations

import numpy as np

from varlens import ops as _ops
from varlens.core.array import xp
from varlens.core import array as B
from varlens.core.tensor import Tensor
from varlens import ops


def _lengths_array(lengths):
    if isinstance(lengths, Tensor):
        lengths = lengths._data
    if B.is_device_array(lengths):   # lengths are host data (PyTorch's rule too)
        raise RuntimeError("'lengths' argument should be a 1D CPU int64 tensor, but got a tensor on "
                           "cuda:0 (pass lengths.cpu())")
    arr = np.asarray(lengths)
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise TypeError(f"lengths must be a 1-D sequence of ints, got {arr.dtype} array of shape {arr.shape}")
    return arr.astype(np.int64)


def _like(a, t):
    """The host array a (built from the lengths) on tensor t's device (a copy there on CUDA)."""
    return B.to_namespace(a, B.namespace(t._data))


class PackedSequence:
    """A padded time-major batch plus its lengths (see the module docstring)."""

    def __init__(self, padded, lengths, sorted_indices=None, unsorted_indices=None):
        self.padded = padded
        self.lengths = _lengths_array(lengths)
        T = padded.shape[0]
        self.mask = (np.arange(T)[:, None] < self.lengths[None, :]).astype(np.float64)
        order = np.argsort(-self.lengths, kind="stable")
        self.sorted_indices = sorted_indices if sorted_indices is not None else Tensor._make(order)
        self.unsorted_indices = (unsorted_indices if unsorted_indices is not None
                                 else Tensor._make(np.argsort(order, kind="stable")))

    @classmethod
    def _from_padded(cls, padded, like):
        return cls(padded, like.lengths, like.sorted_indices, like.unsorted_indices)

    @property
    def batch_sizes(self):
        T = int(self.lengths.max()) if len(self.lengths) else 0
        return Tensor._make(np.array([(self.lengths > t).sum() for t in range(T)], dtype=np.int64))

    @property
    def data(self):
        """PyTorch's packed layout: for each time step, the rows of the sequences still running,
        longest first."""
        order = self.sorted_indices._data
        pieces = []
        for t, n in enumerate(self.batch_sizes._data):
            pieces.append(self.padded[t][Tensor._make(_like(order[:n], self.padded))])
        return _ops.cat(pieces, dim=0)

    def __repr__(self):
        return f"PackedSequence(padded shape={tuple(self.padded.shape)}, lengths={self.lengths.tolist()})"


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Wrap a padded batch (T, B, *) or (B, T, *) with ``batch_first``) and its lengths."""
    if not isinstance(input, Tensor):
        raise TypeError(f"pack_padded_sequence: input must be a Tensor, got {type(input).__name__}")
    lens = _lengths_array(lengths)
    x = _ops.transpose(input, 0, 1) if batch_first else input
    if lens.shape[0] != x.shape[1]:
        raise ValueError(f"pack_padded_sequence: lengths has {lens.shape[0]} entries but the batch has "
                         f"{x.shape[1]} sequences")
    if lens.size and (lens.min() < 1 or lens.max() > x.shape[0]):
        raise ValueError(f"pack_padded_sequence: every length must be in [1, {x.shape[0]}] (the padded "
                         f"length), got {lens.tolist()}")
    if enforce_sorted and np.any(np.diff(lens) > 0):
        raise RuntimeError("pack_padded_sequence: `lengths` array must be sorted in decreasing order "
                           "when `enforce_sorted` is True; pass enforce_sorted=False for unsorted batches")
    T = int(lens.max())
    if T < x.shape[0]:
        x = x[:T]
    return PackedSequence(x, lens)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """Back to a padded tensor; returns ``(padded, lengths)`` like PyTorch."""
    if not isinstance(sequence, PackedSequence):
        raise TypeError(f"pad_packed_sequence: expected a PackedSequence, got {type(sequence).__name__}")
    x = sequence.padded
    if padding_value != 0.0:
        m = Tensor._make(_like(sequence.mask.reshape(sequence.mask.shape + (1,) * (x.ndim - 2)).astype(x.dtype), x))
        x = x * m + (1 - m) * padding_value
    if total_length is not None:
        if total_length < x.shape[0]:
            raise ValueError(f"pad_packed_sequence: total_length={total_length} is smaller than the longest "
                             f"sequence ({x.shape[0]})")
        if total_length > x.shape[0]:
            pad = Tensor._make(_like(np.full((total_length - x.shape[0],) + tuple(x.shape[1:]), padding_value,
                                             dtype=x.dtype), x))
            x = _ops.cat([x, pad], dim=0)
    if batch_first:
        x = _ops.transpose(x, 0, 1)
    return x, Tensor._make(sequence.lengths.copy())


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack tensors of shapes (L_i, *) into (L_max, B, *) (or (B, L_max, *)), padding the tail
    (``padding_side='left'``: the head)."""
    seqs = list(sequences)
    if not seqs:
        raise ValueError("pad_sequence: expected a non-empty list of tensors")
    if padding_side not in ("left", "right"):
        raise ValueError(f"pad_sequence: padding_side must be 'left' or 'right', got {padding_side!r}")
    L = max(s.shape[0] for s in seqs)
    rows = []
    for s in seqs:
        if s.shape[0] < L:
            pad = Tensor._make(_like(np.full((L - s.shape[0],) + tuple(s.shape[1:]), padding_value, dtype=s.dtype), s))
            s = _ops.cat([s, pad] if padding_side == "right" else [pad, s], dim=0)
        rows.append(s)
    return _ops.stack(rows, dim=0 if batch_first else 1)


def lengths_to_mask(lengths, max_len=None, dtype=np.float32):
    """(T, B) array with 1 at real steps and 0 at padding (time-major, as the layer ops take)."""
    lens = _lengths_array(lengths)
    T = int(lens.max()) if max_len is None else int(max_len)
    return (np.arange(T)[:, None] < lens[None, :]).astype(dtype)


def invert_permutation(permutation):
    """The inverse permutation (None stays None)."""
    if permutation is None:
        return None
    p = permutation._data if isinstance(permutation, Tensor) else xp.asarray(permutation)
    lib = B.namespace(p)
    out = lib.empty_like(p)
    out[p] = lib.arange(p.size, dtype=p.dtype)
    return Tensor._make(out)


def pack_sequence(sequences, enforce_sorted=True):
    """Pack a list of (L_i, *) tensors (longest first unless enforce_sorted=False)."""
    seqs = list(sequences)
    if not seqs:
        raise ValueError("pack_sequence: expected a non-empty list of tensors")
    lengths = [int(s.shape[0]) for s in seqs]
    return pack_padded_sequence(pad_sequence(seqs), lengths, enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The list of unpadded sequences x[:L_i] of a padded batch."""
    x = padded_sequences if batch_first else ops.transpose(padded_sequences, 0, 1)
    lens = lengths._data.tolist() if isinstance(lengths, Tensor) else [int(v) for v in lengths]
    if len(lens) != x.shape[0]:
        raise ValueError(f"unpad_sequence: got {len(lens)} lengths for a batch of {x.shape[0]} sequences")
    return [x[i][:n] for i, n in enumerate(lens)]


def unpack_sequence(packed_sequences):
    """The list of sequences in a PackedSequence (the inverse of pack_sequence)."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)

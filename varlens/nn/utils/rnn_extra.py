"""More of torch.nn.utils.rnn: pack_sequence, unpack_sequence, unpad_sequence,
invert_permutation (built on the masked PackedSequence of varlens.nn.utils.rnn)."""
from __future__ import annotations

from varlens.core.array import xp
from varlens.core.tensor import Tensor

__all__ = ["pack_sequence", "unpack_sequence", "unpad_sequence", "invert_permutation"]


def invert_permutation(permutation):
    """The inverse permutation (None stays None)."""
    if permutation is None:
        return None
    p = permutation._data if isinstance(permutation, Tensor) else xp.asarray(permutation)
    out = xp.empty_like(p)
    out[p] = xp.arange(p.size, dtype=p.dtype)
    return Tensor._make(out)


def pack_sequence(sequences, enforce_sorted=True):
    """Pack a list of (L_i, *) tensors (longest first unless enforce_sorted=False)."""
    from varlens.nn.utils.rnn import pack_padded_sequence, pad_sequence
    seqs = list(sequences)
    if not seqs:
        raise ValueError("pack_sequence: expected a non-empty list of tensors")
    lengths = [int(s.shape[0]) for s in seqs]
    return pack_padded_sequence(pad_sequence(seqs), lengths, enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The list of unpadded sequences x[:L_i] of a padded batch."""
    from varlens import ops
    x = padded_sequences if batch_first else ops.transpose(padded_sequences, 0, 1)
    lens = lengths._data.tolist() if isinstance(lengths, Tensor) else [int(v) for v in lengths]
    if len(lens) != x.shape[0]:
        raise ValueError(f"unpad_sequence: got {len(lens)} lengths for a batch of {x.shape[0]} sequences")
    return [x[i][:n] for i, n in enumerate(lens)]


def unpack_sequence(packed_sequences):
    """The list of sequences in a PackedSequence (the inverse of pack_sequence)."""
    from varlens.nn.utils.rnn import pad_packed_sequence
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)

"""Collation: turning a list of samples into a batch (``torch.utils.data``'s rules).

``default_collate`` (the DataLoader's default when it batches) keeps the structure of a
sample and stacks its leaves along a new first dimension:

- Tensors and NumPy arrays are stacked (all samples must have the same shape; otherwise a
  RuntimeError names the first two shapes that differ, in PyTorch's words);
- Python floats become a float64 tensor, ints an int64 tensor, bools a bool tensor, NumPy
  scalars a tensor of their dtype;
- strings and bytes are left as they come (the list of samples, or a tuple of them for a
  field of tuple samples, exactly as PyTorch);
- dicts are collated key by key (same dict type), namedtuples field by field (same
  namedtuple), other sequences field by field: a tuple sample gives a *list* of batches,
  a list sample a list.

``default_convert`` (the default when ``batch_size=None``) only turns NumPy arrays and
scalars into tensors, inside the same containers (tuples become lists, as in PyTorch).
"""
from __future__ import annotations

import collections.abc
import copy
import re

import numpy as np

from varlens.core import array as B
from varlens.core.tensor import Tensor

_STR_OBJ = re.compile(r"[SaUO]")

default_collate_err_msg_format = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}")


def _stack(batch):
    """Stack same-shape Tensors along a new dim 0 (keeping autograd when a sample requires grad)."""
    shape0 = batch[0].shape
    for i, b in enumerate(batch):
        if not isinstance(b, Tensor):
            raise TypeError(f"default_collate: expected every sample to be a Tensor like entry 0, "
                            f"but entry {i} is a {type(b).__name__}")
        if b.shape != shape0:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(shape0)} at "
                               f"entry 0 and {list(b.shape)} at entry {i}")
    if any(b.requires_grad for b in batch):
        from varlens import stack            # lazy: the differentiable op
        return stack(list(batch), 0)
    return Tensor._make(np.stack([b._data for b in batch]))


def _from_numpy(a):
    return Tensor._make(np.asarray(a))


def collate(batch, *, collate_fn_map=None):
    """Collate ``batch`` (a sequence of samples); ``collate_fn_map`` maps a type (or tuple of
    types) to ``fn(batch, *, collate_fn_map)`` and is consulted first, as in PyTorch."""
    if not isinstance(batch, collections.abc.Sequence) or isinstance(batch, (str, bytes)) or len(batch) == 0:
        raise TypeError(f"collate: expected a non-empty list of samples, got {type(batch).__name__} "
                        f"{batch!r:.80}")
    elem = batch[0]
    elem_type = type(elem)
    if collate_fn_map is not None:
        if elem_type in collate_fn_map:
            return collate_fn_map[elem_type](batch, collate_fn_map=collate_fn_map)
        for t in collate_fn_map:
            if isinstance(elem, t):
                return collate_fn_map[t](batch, collate_fn_map=collate_fn_map)
    if isinstance(elem, collections.abc.Mapping):
        return _rebuild_mapping(elem, {key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map)
                                       for key in elem})
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):          # namedtuple
        return elem_type(*(collate(list(s), collate_fn_map=collate_fn_map) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence) and not isinstance(elem, (str, bytes)):
        n = len(elem)
        if any(len(b) != n for b in batch):
            raise RuntimeError("each element in list of batch should be of equal size (got sample "
                               f"lengths {sorted({len(b) for b in batch})})")
        fields = list(zip(*batch))
        if isinstance(elem, tuple):
            return [collate(s, collate_fn_map=collate_fn_map) for s in fields]
        return _rebuild(elem, [collate(s, collate_fn_map=collate_fn_map) for s in fields])
    raise TypeError(default_collate_err_msg_format.format(elem_type.__name__))


def collate_tensor_fn(batch, *, collate_fn_map=None):
    return _stack(batch)


def collate_numpy_array_fn(batch, *, collate_fn_map=None):
    if _STR_OBJ.search(batch[0].dtype.str) is not None:
        raise TypeError(default_collate_err_msg_format.format(batch[0].dtype))
    return collate([_from_numpy(b) for b in batch], collate_fn_map=collate_fn_map)


def collate_numpy_scalar_fn(batch, *, collate_fn_map=None):
    return Tensor._make(np.asarray(batch))


def collate_float_fn(batch, *, collate_fn_map=None):
    return Tensor._make(np.asarray(batch, dtype=np.float64))


def collate_int_fn(batch, *, collate_fn_map=None):
    """ints -> int64, bools -> bool, a mix with floats -> the default float dtype (torch.tensor's rules)."""
    return Tensor._make(B.as_array(list(batch)))


def collate_str_fn(batch, *, collate_fn_map=None):
    return batch


default_collate_fn_map = {
    Tensor: collate_tensor_fn,
    np.ndarray: collate_numpy_array_fn,
    (np.bool_, np.number, np.object_): collate_numpy_scalar_fn,
    float: collate_float_fn,
    int: collate_int_fn,
    str: collate_str_fn,
    bytes: collate_str_fn,
}


def default_collate(batch):
    """Stack a list of samples into a batch, keeping their structure (see the module docstring)."""
    return collate(batch, collate_fn_map=default_collate_fn_map)


def default_convert(data):
    """Turn NumPy arrays and scalars into Tensors inside ``data``'s containers; leave the rest."""
    if isinstance(data, Tensor):
        return data
    t = type(data)
    if t.__module__ == "numpy" and t.__name__ not in ("str_", "bytes_", "string_"):
        if isinstance(data, np.ndarray) and _STR_OBJ.search(data.dtype.str) is not None:
            return data
        return _from_numpy(data)
    if isinstance(data, collections.abc.Mapping):
        return _rebuild_mapping(data, {key: default_convert(data[key]) for key in data})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return t(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuild(data, [default_convert(d) for d in data])
    return data


def _rebuild_mapping(like, out):
    """The dict ``out`` in the mapping type of ``like``, as torch's collate does: a copy of a
    mutable mapping updated with ``out``, else the type called on it, else the plain dict."""
    try:
        if isinstance(like, collections.abc.MutableMapping):
            clone = copy.copy(like)
            clone.update(out)
            return clone
        return type(like)(out)
    except TypeError:
        return out


def _rebuild(like, out):
    """``out`` (a list) in the sequence type of ``like``, as torch's collate does: a copy of a
    mutable sequence with the items replaced, else the type called on the list, else the list."""
    try:
        if isinstance(like, collections.abc.MutableSequence):
            clone = copy.copy(like)
            for i, v in enumerate(out):
                clone[i] = v
            return clone
        return type(like)(out)
    except TypeError:
        return out

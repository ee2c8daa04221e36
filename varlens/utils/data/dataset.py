"""Datasets: things with ``__getitem__`` (and usually ``__len__``), as in ``torch.utils.data``.

``TensorDataset`` is the workhorse: a tuple of tensors sharing their first dimension.
The DataLoader recognises it and indexes whole batches at once (one fancy index per
tensor) instead of building a batch sample by sample.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from varlens.random import _gen
from varlens.core.tensor import Tensor


class DatasetValueError(ValueError, AssertionError):
    """A bad dataset argument where PyTorch raises AssertionError (so either ``except`` catches it)."""


class DatasetTypeError(TypeError, AssertionError):
    """A dataset of the wrong kind where PyTorch raises AssertionError."""


class Dataset:
    """Base class: subclasses define ``__getitem__(index)`` and ``__len__()``."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A stream of samples: subclasses define ``__iter__`` (``__len__`` is optional).

    The DataLoader iterates it in order (no sampler, no shuffle) and, with a ``batch_size``,
    groups consecutive samples into batches (``drop_last`` drops a short last one).
    """

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")

    def __getitem__(self, index):
        raise TypeError(f"{type(self).__name__} is an IterableDataset: iterate over it instead of indexing")

    def __add__(self, other):
        return ChainDataset([self, other])


class ChainDataset(IterableDataset):
    """Several IterableDatasets one after another, chained on the fly."""

    def __init__(self, datasets):
        self.datasets = datasets

    def _check(self, d):
        if not isinstance(d, IterableDataset):
            raise DatasetTypeError(f"ChainDataset only supports IterableDataset, got {type(d).__name__}")

    def __iter__(self):
        for d in self.datasets:
            self._check(d)
            yield from d

    def __len__(self):
        total = 0
        for d in self.datasets:
            self._check(d)
            total += len(d)
        return total


def _as_tensor(t, name):
    if isinstance(t, Tensor):
        return t
    if isinstance(t, np.ndarray):
        return Tensor._make(t)
    raise TypeError(f"TensorDataset: {name} must be a varlens Tensor or a NumPy array, "
                    f"got {type(t).__name__}")


class TensorDataset(Dataset):
    """Samples are ``tuple(t[i] for t in tensors)``; all tensors share their first dimension."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset: expected at least one tensor, got none")
        tensors = tuple(_as_tensor(t, f"tensors[{i}]") for i, t in enumerate(tensors))
        n = tensors[0].shape[0] if tensors[0].ndim else None
        for i, t in enumerate(tensors):
            if t.ndim == 0 or t.shape[0] != n:
                raise DatasetValueError("TensorDataset: Size mismatch between tensors: expected every tensor "
                                 f"to have first dimension {n}, tensors[{i}] has shape {tuple(t.shape)}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class StackDataset(Dataset):
    """Several datasets of one length side by side: sample i is ``tuple(d[i] for d in args)``
    or ``{k: d[i] for k, d in kwargs.items()}``."""

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ValueError("StackDataset: give the datasets either as positional arguments (tuple "
                             "samples) or as keyword arguments (dict samples), not both")
        if not args and not kwargs:
            raise ValueError("StackDataset: At least one dataset should be passed")
        parts = list(args) if args else list(kwargs.values())
        self._length = len(parts[0])
        for i, d in enumerate(parts):
            if len(d) != self._length:
                raise ValueError(f"StackDataset: Size mismatch between datasets: dataset 0 has length "
                                 f"{self._length}, dataset {i} has length {len(d)}")
        self.datasets = args if args else kwargs

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __getitems__(self, indices):
        return [self[i] for i in indices]

    def __len__(self):
        return self._length


class Subset(Dataset):
    """The samples of ``dataset`` at positions ``indices``."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = [int(i) for i in indices]
        if type(self).__getitem__ is not Subset.__getitem__ and type(self).__getitems__ is Subset.__getitems__:
            raise NotImplementedError(
                f"{type(self).__name__} overrides __getitem__ but not __getitems__, which the DataLoader "
                "uses to read a batch; define both, e.g. def __getitems__(self, indices): return "
                "[self[i] for i in indices]")

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices):
        if callable(getattr(self.dataset, "__getitems__", None)):
            return self.dataset.__getitems__([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self):
        return len(self.indices)


class ConcatDataset(Dataset):
    """Several datasets one after another."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise DatasetValueError("ConcatDataset: datasets should not be an empty iterable")
        for i, d in enumerate(self.datasets):
            if isinstance(d, IterableDataset):
                raise DatasetTypeError(f"ConcatDataset does not support IterableDataset (datasets[{i}] is a "
                                f"{type(d).__name__}); use ChainDataset")
        self.cumulative_sizes = np.cumsum([len(d) for d in self.datasets]).tolist()

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        n = len(self)
        if idx < 0:
            if -idx > n:
                raise ValueError(f"ConcatDataset: absolute value of index should not exceed dataset length "
                                 f"({idx} for length {n})")
            idx += n
        if not 0 <= idx < n:
            raise IndexError(f"ConcatDataset: index {idx} out of range for length {n}")
        d = int(np.searchsorted(self.cumulative_sizes, idx, side="right"))
        start = self.cumulative_sizes[d - 1] if d else 0
        return self.datasets[d][idx - start]


def _lengths_from(lengths, n):
    """PyTorch's rule: lengths that sum to 1 (and not more) are fractions of ``n``."""
    lengths = list(lengths)
    for i, x in enumerate(lengths):
        if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)):
            raise TypeError(f"random_split: lengths[{i}] must be an int or a float, got {type(x).__name__}")
    total = sum(lengths)
    if lengths and math.isclose(total, 1) and total <= 1:
        for i, f in enumerate(lengths):
            if not 0 <= f <= 1:
                raise ValueError(f"random_split: Fraction at index {i} is not between 0 and 1 (got {f})")
        out = [int(math.floor(n * f)) for f in lengths]
        for i in range(n - sum(out)):  # hand the remainder out round-robin, as PyTorch does
            out[i % len(out)] += 1
        for i, k in enumerate(out):
            if k == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an empty dataset.",
                              stacklevel=3)
        return out
    if any(x < 0 or int(x) != x for x in lengths):
        raise ValueError("random_split: lengths must be non-negative ints summing to the dataset "
                         f"length or fractions summing to 1, got {lengths}")
    if sum(lengths) != n:
        raise ValueError(f"random_split: Sum of input lengths ({sum(lengths)}) does not equal the length "
                         f"of the input dataset ({n})!")
    return [int(x) for x in lengths]


def random_split(dataset, lengths, generator=None):
    """Split ``dataset`` into non-overlapping random subsets of the given lengths (or fractions).

    ``generator`` is a ``varlens.Generator``; without one the global generator is used.
    """
    n = len(dataset)
    sizes = _lengths_from(lengths, n)
    perm = _gen(generator).permutation(n).tolist()
    out, start = [], 0
    for k in sizes:
        out.append(Subset(dataset, perm[start:start + k]))
        start += k
    return out

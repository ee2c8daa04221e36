"""Datasets: things with ``__getitem__`` (and usually ``__len__``), as in ``torch.utils.data``.

``TensorDataset`` is the workhorse: a tuple of tensors sharing their first dimension.
The DataLoader recognises it and indexes whole batches at once (one fancy index per
tensor) instead of building a batch sample by sample.
"""
from __future__ import annotations

import math

import numpy as np

from varlens.random import _gen
from varlens.tensor import Tensor


class Dataset:
    """Base class: subclasses define ``__getitem__(index)`` and ``__len__()``."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])


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
                raise ValueError("TensorDataset: size mismatch between tensors: expected every tensor "
                                 f"to have first dimension {n}, tensors[{i}] has shape {tuple(t.shape)}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class Subset(Dataset):
    """The samples of ``dataset`` at positions ``indices``."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = [int(i) for i in indices]

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __len__(self):
        return len(self.indices)


class ConcatDataset(Dataset):
    """Several datasets one after another."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets must not be empty")
        self.cumulative_sizes = np.cumsum([len(d) for d in self.datasets]).tolist()

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        n = len(self)
        if idx < 0:
            idx += n
        if not 0 <= idx < n:
            raise IndexError(f"ConcatDataset: index {idx} out of range for length {n}")
        d = int(np.searchsorted(self.cumulative_sizes, idx, side="right"))
        start = self.cumulative_sizes[d - 1] if d else 0
        return self.datasets[d][idx - start]


def _lengths_from(lengths, n):
    lengths = list(lengths)
    if lengths and all(isinstance(x, float) for x in lengths) and math.isclose(sum(lengths), 1.0) \
            and sum(lengths) <= 1 + 1e-9:
        if any(not 0 <= f <= 1 for f in lengths):
            raise ValueError(f"random_split: fractions must lie in [0, 1], got {lengths}")
        out = [int(math.floor(n * f)) for f in lengths]
        for i in range(n - sum(out)):  # hand the remainder out round-robin, as PyTorch does
            out[i % len(out)] += 1
        return out
    if any(not isinstance(x, (int, np.integer)) or x < 0 for x in lengths):
        raise ValueError("random_split: lengths must be non-negative ints summing to the dataset "
                         f"length or floats summing to 1, got {lengths}")
    if sum(lengths) != n:
        raise ValueError(f"random_split: sum of input lengths ({sum(lengths)}) does not equal the "
                         f"length of the input dataset ({n})")
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

"""Samplers: which indices, in which order (and grouped into batches).

A RandomSampler draws one 63-bit seed per epoch from its generator (or the global one)
and permutes with a fresh PCG64 stream of that seed.  The seed is all it takes to redo
an epoch's order, so a checkpoint saved mid-epoch stores it with the number of batches
already consumed (``DataLoader.state_dict``), and resuming gives the same order.
"""
from __future__ import annotations

import numpy as np

from varlens.random import _gen

_CHUNK = 1 << 16   # indices drawn at a time by the random samplers


class Sampler:
    """Base class: iterating yields dataset indices."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError

    def _index_chunks(self):
        """The indices of one pass as consecutive int64 arrays of at most ``_CHUNK`` entries
        (the fast path); None if not available.  Drawn lazily, chunk by chunk, so a sampler of
        ``num_samples=10**10`` (an "infinite" sampler) costs memory for one chunk only."""
        return None

    def _iter_chunks(self):
        return (int(i) for c in self._index_chunks() for i in c.tolist())


class SequentialSampler(Sampler):
    def __init__(self, data_source):
        self.data_source = data_source

    def _index_chunks(self):
        n = len(self.data_source)
        return (np.arange(s, min(s + _CHUNK, n), dtype=np.int64) for s in range(0, n, _CHUNK))

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation per epoch (or ``num_samples`` draws with replacement)."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        if not isinstance(replacement, bool):
            raise TypeError(f"RandomSampler: replacement must be a bool, got {replacement!r}")
        if num_samples is not None and (not isinstance(num_samples, int) or num_samples <= 0):
            raise ValueError(f"RandomSampler: num_samples must be a positive int, got {num_samples!r}")
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        self._epoch_seed = None     # seed of the pass in progress (for checkpoints)
        self._pending_seed = None   # set by a resume: redo this pass instead of drawing

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def _index_chunks(self):
        """One pass, lazily: with replacement ``_CHUNK`` draws at a time, without it one
        permutation of the dataset at a time (the last cut to ``num_samples``), as torch
        draws its indices 32 at a time rather than all up front."""
        if self._pending_seed is not None:
            seed, self._pending_seed = self._pending_seed, None
        else:
            seed = int(_gen(self.generator).integers(0, 2 ** 63 - 1, None))
        self._epoch_seed = seed
        rng = np.random.Generator(np.random.PCG64(seed))
        n = len(self.data_source)
        left = self.num_samples
        while left > 0:
            if self.replacement:
                chunk = rng.integers(0, n, min(left, _CHUNK), dtype=np.int64)
            else:
                chunk = rng.permutation(n).astype(np.int64)[:left]
            left -= len(chunk)
            yield chunk

    def __iter__(self):
        return self._iter_chunks()

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    def __init__(self, indices, generator=None):
        self.indices = np.asarray(indices, dtype=np.int64)
        self.generator = generator

    def _index_chunks(self):
        yield self.indices[_gen(self.generator).permutation(len(self.indices))]

    def __iter__(self):
        return self._iter_chunks()

    def __len__(self):
        return len(self.indices)


class BatchSampler(Sampler):
    """Group the indices of ``sampler`` into lists of ``batch_size``."""

    def __init__(self, sampler, batch_size, drop_last):
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
            raise ValueError(f"BatchSampler: batch_size should be a positive integer, got {batch_size!r}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"BatchSampler: drop_last should be a bool, got {drop_last!r}")
        self.sampler = sampler
        self.batch_size = int(batch_size)
        self.drop_last = drop_last

    def _index_batches(self):
        """Batches as int64 arrays; uses the sampler's whole-pass array when it has one."""
        chunks = self.sampler._index_chunks() if hasattr(self.sampler, "_index_chunks") else None
        if chunks is None:
            yield from (np.asarray(b, dtype=np.int64) for b in self._list_batches())
            return
        b = self.batch_size
        rest = np.empty(0, dtype=np.int64)   # indices of a batch that straddles two chunks
        for chunk in chunks:
            idx = np.concatenate([rest, chunk]) if len(rest) else chunk
            full = len(idx) - len(idx) % b
            for s in range(0, full, b):
                yield idx[s:s + b]
            rest = idx[full:]
        if len(rest) and not self.drop_last:
            yield rest

    def _list_batches(self):
        batch = []
        for i in self.sampler:
            batch.append(i)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __iter__(self):
        for b in self._index_batches():
            yield b.tolist()

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices in ``[0, len(weights))`` drawn with probabilities proportional to
    ``weights`` (which need not sum to 1), with or without replacement (torch's arguments
    and checks).  The draws come from ``varlens.multinomial``: the same distribution as
    PyTorch's, not the same numbers."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        if isinstance(num_samples, bool) or not isinstance(num_samples, (int, np.integer)) or num_samples <= 0:
            raise ValueError("WeightedRandomSampler: num_samples should be a positive integer value, but got "
                             f"num_samples={num_samples!r}")
        if not isinstance(replacement, bool):
            raise ValueError("WeightedRandomSampler: replacement should be a boolean value, but got "
                             f"replacement={replacement!r}")
        from varlens.core.tensor import Tensor
        w = weights._data if isinstance(weights, Tensor) else weights
        try:
            w = np.asarray(w, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise TypeError(f"WeightedRandomSampler: weights must be a sequence of numbers, got "
                            f"{type(weights).__name__} ({e})") from None
        if w.ndim != 1:
            raise ValueError("WeightedRandomSampler: weights should be a 1d sequence but given weights have "
                             f"shape {tuple(w.shape)}")
        self.weights = Tensor._make(w)
        self.num_samples = int(num_samples)
        self.replacement = replacement
        self.generator = generator

    def _index_chunks(self):
        """Without replacement num_samples <= len(weights): one draw.  With replacement the
        draws are independent, so they are made ``_CHUNK`` at a time (lazily)."""
        from varlens.ops.creation import multinomial
        left = self.num_samples
        while left > 0:
            k = min(left, _CHUNK) if self.replacement else left
            left -= k
            yield multinomial(self.weights, k, self.replacement, generator=self.generator)._data.astype(np.int64)

    def __iter__(self):
        return self._iter_chunks()

    def __len__(self):
        return self.num_samples

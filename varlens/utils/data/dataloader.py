"""DataLoader: batches from a dataset, in a seeded order that a checkpoint can save.

Iterating a DataLoader yields collated batches.  When the dataset is a TensorDataset (or
a Subset of one) and the default collate is in use, a batch is one fancy index per
tensor (no per-sample Python work), which keeps data loading off the critical path.

``state_dict()`` holds where the data order stands: the seed of the pass in progress,
how many batches of it were handed out, and the generator's state.  ``load_state_dict``
makes the next iteration continue that pass exactly (the consumed batches are skipped
without being loaded).

``batch_transform`` (a varlens addition, e.g. ``varlens.vision.transforms`` augmentation) is
called on each batch's inputs as ``batch_transform(x, generator=rng)``.  ``rng`` is a NumPy
Generator seeded from (a seed drawn once per pass, the batch's index), so the augmentation
of batch k does not depend on how many batches were drawn before it; the pass seed is part
of ``state_dict``, so a resumed run gets exactly the augmented batches it would have had.
"""
from __future__ import annotations

import numbers

import numpy as np

from varlens.tensor import Tensor
from varlens.utils.data.dataset import Subset, TensorDataset
from varlens.utils.data.sampler import BatchSampler, RandomSampler, SequentialSampler


def default_collate(batch):
    """Stack a list of samples into a batch, keeping their structure.

    Tensors and arrays are stacked along a new first dimension; Python floats make a
    float64 tensor and ints an int64 tensor (as PyTorch); tuples, lists and dicts are
    collated field by field; strings stay a list.
    """
    if not isinstance(batch, (list, tuple)) or len(batch) == 0:
        raise TypeError(f"default_collate: expected a non-empty list of samples, got {batch!r:.80}")
    first = batch[0]
    if isinstance(first, Tensor):
        return Tensor._make(np.stack([b._data for b in batch]))
    if isinstance(first, np.ndarray):
        return Tensor._make(np.stack(batch))
    if isinstance(first, (bool, np.bool_)):
        return Tensor._make(np.asarray(batch, dtype=np.bool_))
    if isinstance(first, numbers.Integral):
        return Tensor._make(np.asarray(batch, dtype=np.int64))
    if isinstance(first, numbers.Real):
        return Tensor._make(np.asarray(batch, dtype=np.float64))
    if isinstance(first, (str, bytes)):
        return list(batch)
    if isinstance(first, dict):
        return {k: default_collate([b[k] for b in batch]) for k in first}
    if isinstance(first, (tuple, list)):
        n = len(first)
        if any(len(b) != n for b in batch):
            raise RuntimeError("default_collate: each element in the batch should be of equal size, "
                               f"got sizes {sorted({len(b) for b in batch})}")
        out = [default_collate(list(field)) for field in zip(*batch)]
        if hasattr(first, "_fields"):       # namedtuple
            return type(first)(*out)
        return tuple(out) if isinstance(first, tuple) else out
    raise TypeError(f"default_collate: batch must contain tensors, NumPy arrays, numbers, dicts or "
                    f"lists; found {type(first).__name__}")


def _tensor_base(dataset):
    """(arrays, index map) when ``dataset`` is a TensorDataset or Subsets of one, else None."""
    remap = None
    while isinstance(dataset, Subset):
        ind = np.asarray(dataset.indices, dtype=np.int64)
        remap = ind if remap is None else ind[remap]
        dataset = dataset.dataset
    if not isinstance(dataset, TensorDataset):
        return None
    return [t._data for t in dataset.tensors], remap


class DataLoader:
    """Iterate a dataset in batches (``torch.utils.data.DataLoader``'s arguments and defaults).

    ``generator`` (a ``varlens.Generator``) seeds the shuffle; without one, each epoch's
    order is drawn from the global generator (``varlens.manual_seed``).  ``num_workers``
    is accepted for compatibility and must be 0: loading runs in the main process.
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, generator=None, batch_transform=None, **unused):
        if unused:
            valid = ("dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn, "
                     "pin_memory, drop_last, timeout, worker_init_fn, generator, batch_transform")
            raise TypeError(f"DataLoader: unexpected argument(s) {sorted(unused)}; valid ones: {valid}")
        if num_workers != 0:
            raise ValueError(f"DataLoader: num_workers must be 0 in varlens (loading runs in the main "
                             f"process), got {num_workers}")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("DataLoader: batch_sampler option is mutually exclusive with "
                                 "batch_size, shuffle, sampler, and drop_last")
            batch_size = None
        elif batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                                         or batch_size <= 0):
            raise ValueError(f"DataLoader: batch_size must be a positive int or None, got {batch_size!r}")
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.num_workers = 0
        self.generator = generator
        if sampler is None:
            sampler = (RandomSampler(dataset, generator=generator) if shuffle
                       else SequentialSampler(dataset))
        self.sampler = sampler
        if batch_sampler is None and batch_size is not None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_sampler = batch_sampler
        self._auto_collation = batch_sampler is not None
        self.collate_fn = collate_fn if collate_fn is not None else (
            default_collate if self._auto_collation else (lambda x: x))
        self._fast = _tensor_base(dataset) if (collate_fn is None and self._auto_collation) else None
        self._batches_done = 0
        self._in_epoch = False
        self._skip = 0
        self._epochs_started = 0
        if batch_transform is not None and not callable(batch_transform):
            raise TypeError(f"DataLoader: batch_transform must be callable or None, got {batch_transform!r}")
        self.batch_transform = batch_transform
        self._transform_seed = None     # seed of the augmentation of the pass in progress
        self._pending_transform_seed = None

    # ------------------------------------------------------------------ iteration
    def _index_batches(self):
        bs = self.batch_sampler
        if hasattr(bs, "_index_batches"):
            return bs._index_batches()
        return (np.asarray(b, dtype=np.int64) for b in bs)

    def __iter__(self):
        self._epochs_started += 1
        skip, self._skip = self._skip, 0
        self._in_epoch = True
        self._batches_done = 0
        if self.batch_transform is not None:
            self._start_transform_pass()
        if not self._auto_collation:
            return self._iter_single(skip)
        return self._iter_batches(skip)

    def _start_transform_pass(self):
        if self._pending_transform_seed is not None:
            seed, self._pending_transform_seed = self._pending_transform_seed, None
        else:
            from varlens.random import _gen
            seed = int(_gen(self._order_generator()).integers(0, 2 ** 63 - 1, None))
        self._transform_seed = seed

    def _transformed(self, batch, k):
        """Apply ``batch_transform`` to the inputs of batch ``k`` with that batch's own stream."""
        if self.batch_transform is None:
            return batch
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(self._transform_seed, spawn_key=(k,))))
        if isinstance(batch, (tuple, list)):
            return (self.batch_transform(batch[0], generator=rng),) + tuple(batch[1:])
        return self.batch_transform(batch, generator=rng)

    def _iter_single(self, skip):
        for k, i in enumerate(self.sampler):
            self._batches_done = k + 1
            if k < skip:
                continue
            yield self._transformed(self.collate_fn(self.dataset[i]), k)
        self._in_epoch = False

    def _iter_batches(self, skip):
        arrays, remap = (None, None) if self._fast is None else self._fast
        ds, collate = self.dataset, self.collate_fn
        for k, idx in enumerate(self._index_batches()):
            self._batches_done = k + 1
            if k < skip:
                continue
            if arrays is not None:
                if remap is not None:
                    idx = remap[idx]
                yield self._transformed(tuple(Tensor._make(a[idx]) for a in arrays), k)
            else:
                yield self._transformed(collate([ds[int(i)] for i in idx]), k)
        self._in_epoch = False

    def __len__(self):
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        return len(self.sampler)

    # ------------------------------------------------------------------ data-order state
    def _random_sampler(self):
        s = self.batch_sampler.sampler if isinstance(self.batch_sampler, BatchSampler) else self.sampler
        return s if isinstance(s, RandomSampler) else None

    def _order_generator(self):
        rs = self._random_sampler()
        return rs.generator if rs is not None else self.generator

    def state_dict(self):
        """Where the data order stands (JSON-safe): pass seed, batches consumed, generator state
        (and the pass's augmentation seed when there is a ``batch_transform``)."""
        rs = self._random_sampler()
        gen = rs.generator if rs is not None else self.generator
        return {"transform_seed": self._transform_seed if self._in_epoch else None,
                "epochs_started": self._epochs_started,
                "in_epoch": self._in_epoch,
                "batches_done": self._batches_done if self._in_epoch else 0,
                "epoch_seed": (rs._epoch_seed if (rs is not None and self._in_epoch) else None),
                "generator": gen.get_state() if gen is not None else None}

    def load_state_dict(self, state):
        """Make the next ``iter(loader)`` continue the saved pass (or start the next one)."""
        for key in ("in_epoch", "batches_done", "epoch_seed", "generator"):
            if key not in state:
                raise KeyError(f"DataLoader.load_state_dict: state is missing {key!r}")
        rs = self._random_sampler()
        gen = rs.generator if rs is not None else self.generator
        if state["generator"] is not None:
            if gen is None:
                raise ValueError("DataLoader.load_state_dict: the state holds a generator state but this "
                                 "loader has no generator (build it with generator=varlens.Generator())")
            gen.set_state(state["generator"])
        self._epochs_started = int(state.get("epochs_started", 0))
        if state["in_epoch"]:
            self._epochs_started -= 1   # the resumed pass is counted again when it restarts
            self._skip = int(state["batches_done"])
            if rs is not None and state["epoch_seed"] is not None:
                rs._pending_seed = int(state["epoch_seed"])
            if state.get("transform_seed") is not None:
                self._pending_transform_seed = int(state["transform_seed"])
        else:
            self._skip = 0



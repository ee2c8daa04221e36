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

import multiprocessing
import numbers

import numpy as np

from varlens.core import array as B
from varlens.core.tensor import Tensor
from varlens.utils.data import worker as _worker
from varlens.utils.data.collate import default_collate, default_convert  # noqa: F401  (re-export)
from varlens.utils.data.dataset import IterableDataset, Subset, TensorDataset
from varlens.utils.data.sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler


class _InfiniteConstantSampler(Sampler):
    """The sampler of an IterableDataset: None forever (the dataset's iterator decides)."""

    def __iter__(self):
        while True:
            yield None


def _as_worker(gen, info):
    """Run each step of ``gen`` with ``get_worker_info()`` reporting ``info`` (reset in between)."""
    while True:
        prev = _worker._set(info)
        try:
            item = next(gen)
        except StopIteration:
            return
        finally:
            _worker._set(prev)
        yield item


def _plain(ds, cls, *extra):
    """``ds`` reads samples exactly as ``cls`` does (no overridden __getitem__ and ``extra``)."""
    return all(getattr(type(ds), n, None) is getattr(cls, n, None) for n in ("__getitem__",) + extra)


def _tensor_base(dataset):
    """(arrays, index map) when ``dataset`` is a TensorDataset or Subsets of one, else None."""
    remap = None
    while isinstance(dataset, Subset) and _plain(dataset, Subset, "__getitems__"):
        ind = np.asarray(dataset.indices, dtype=np.int64)
        remap = ind if remap is None else ind[remap]
        dataset = dataset.dataset
    if not (isinstance(dataset, TensorDataset) and _plain(dataset, TensorDataset, "__getitems__")):
        return None   # a subclass that changes how samples are read takes the general path
    return [t._data for t in dataset.tensors], remap


class DataLoader:
    """Iterate a dataset in batches (``torch.utils.data.DataLoader``'s arguments and defaults).

    ``generator`` (a ``varlens.Generator``) seeds the shuffle; without one, each epoch's
    order is drawn from the global generator (``varlens.manual_seed``).

    Loading always runs in the main process.  The multiprocessing arguments are accepted
    and checked as PyTorch checks them (``num_workers >= 0``, ``timeout >= 0``,
    ``prefetch_factor`` and ``persistent_workers`` only with ``num_workers > 0``, a valid
    ``multiprocessing_context``), then: with ``num_workers > 0`` one emulated worker runs in
    this process -- ``worker_init_fn(0)`` is called at the start of each pass (once, with
    ``persistent_workers=True``) and ``get_worker_info()`` reports ``id=0, num_workers=1``
    while it fetches, so the batches are exactly those of ``num_workers=0``.
    ``pin_memory=True`` puts each batch's tensors in page-locked host memory when a CUDA device
    is available (``Tensor.pin_memory()``; a flag on the simulated device), so
    ``batch.to("cuda", non_blocking=True)`` copies from pinned memory; without CUDA it does
    nothing (PyTorch warns and skips it).  ``pin_memory_device``, ``prefetch_factor``,
    ``timeout`` and ``in_order`` have no effect (there is no worker queue).
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="", in_order=True,
                 batch_transform=None, **unused):
        if unused:
            valid = ("dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn, "
                     "pin_memory, drop_last, timeout, worker_init_fn, multiprocessing_context, generator, "
                     "prefetch_factor, persistent_workers, pin_memory_device, in_order, batch_transform")
            raise TypeError(f"DataLoader: unexpected argument(s) {sorted(unused)}; valid ones: {valid}")
        if isinstance(num_workers, bool) or not isinstance(num_workers, (int, np.integer)):
            raise TypeError(f"DataLoader: num_workers must be an int, got {type(num_workers).__name__}")
        if num_workers < 0:
            raise ValueError("DataLoader: num_workers option should be non-negative; use num_workers=0 to "
                             f"disable multiprocessing (got num_workers={num_workers})")
        if not isinstance(timeout, numbers.Real) or timeout < 0:
            raise ValueError(f"DataLoader: timeout option should be non-negative, got timeout={timeout!r}")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("DataLoader: prefetch_factor option could only be specified in multiprocessing; "
                             "let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to "
                             f"None (got prefetch_factor={prefetch_factor!r})")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and (isinstance(prefetch_factor, bool) or
                                              not isinstance(prefetch_factor, (int, np.integer))
                                              or prefetch_factor < 0):
            raise ValueError(f"DataLoader: prefetch_factor option should be non-negative (an int), got "
                             f"{prefetch_factor!r}")
        if persistent_workers and num_workers == 0:
            raise ValueError("DataLoader: persistent_workers option needs num_workers > 0")
        if multiprocessing_context is not None:
            if num_workers == 0:
                raise ValueError("DataLoader: multiprocessing_context can only be used with multi-process "
                                 f"loading (num_workers > 0), but got num_workers={num_workers}")
            if isinstance(multiprocessing_context, str):
                valid_methods = multiprocessing.get_all_start_methods()
                if multiprocessing_context not in valid_methods:
                    raise ValueError("DataLoader: multiprocessing_context option should specify a valid start "
                                     f"method in {valid_methods!r}, but got "
                                     f"multiprocessing_context={multiprocessing_context!r}")
            elif not isinstance(multiprocessing_context, multiprocessing.context.BaseContext):
                raise TypeError("DataLoader: multiprocessing_context option should be a valid context object "
                                "or a string specifying the start method, but got "
                                f"multiprocessing_context={multiprocessing_context!r}")
        if worker_init_fn is not None and not callable(worker_init_fn):
            raise TypeError(f"DataLoader: worker_init_fn must be callable or None, got {worker_init_fn!r}")
        if collate_fn is not None and not callable(collate_fn):
            raise TypeError(f"DataLoader: collate_fn must be callable or None, got {collate_fn!r}")
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in (False, None):
                raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle option, but "
                                 f"got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler option, but "
                                 f"got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified batch_sampler option, "
                                 f"but got batch_sampler={batch_sampler}")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("DataLoader: batch_sampler option is mutually exclusive with "
                                 "batch_size, shuffle, sampler, and drop_last")
            batch_size = None
        elif batch_size is None:
            if drop_last:
                raise ValueError("DataLoader: batch_size=None option disables auto-batching and is mutually "
                                 "exclusive with drop_last")
        elif isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
            raise ValueError(f"DataLoader: batch_size should be a positive integer value or None, got "
                             f"batch_size={batch_size!r}")
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        self.dataset = dataset
        self.batch_size = None if batch_size is None else int(batch_size)
        self.drop_last = bool(drop_last)
        self.num_workers = int(num_workers)
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = bool(persistent_workers)
        self.pin_memory = bool(pin_memory)
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.in_order = in_order
        self.generator = generator
        if sampler is None:
            if self._iterable:
                sampler = _InfiniteConstantSampler()
            else:
                sampler = (RandomSampler(dataset, generator=generator) if shuffle
                           else SequentialSampler(dataset))
        self.sampler = sampler
        if batch_sampler is None and batch_size is not None and not self._iterable:
            batch_sampler = BatchSampler(sampler, self.batch_size, self.drop_last)
        self.batch_sampler = batch_sampler
        self._auto_collation = batch_sampler is not None or (self._iterable and batch_size is not None)
        self.collate_fn = collate_fn if collate_fn is not None else (
            default_collate if self._auto_collation else default_convert)
        self._fast = (_tensor_base(dataset) if (collate_fn is None and self._auto_collation
                                                and not self._iterable) else None)
        self._batches_done = 0
        self._in_epoch = False
        self._skip = 0
        self._epochs_started = 0
        self._workers_started = False
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
        info = None
        if self.num_workers > 0:
            from varlens.random import _gen
            g = _gen(self._order_generator())
            info = _worker.WorkerInfo(id=0, num_workers=1, seed=(g.initial_seed() + self._epochs_started)
                                      % 2 ** 63, dataset=self.dataset)
            if self.worker_init_fn is not None and not (self.persistent_workers and self._workers_started):
                prev = _worker._set(info)
                try:
                    self.worker_init_fn(0)
                finally:
                    _worker._set(prev)
            self._workers_started = True
        if self._iterable:
            gen = self._iter_stream(skip)
        elif not self._auto_collation:
            gen = self._iter_single(skip)
        else:
            gen = self._iter_batches(skip)
        gen = gen if info is None else _as_worker(gen, info)
        if self.pin_memory and B.cuda_namespace(required=False) is not None:
            from varlens.utils.data._utils.pin_memory import pin_memory
            gen = map(pin_memory, gen)
        return gen

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
            return type(batch)([self.batch_transform(batch[0], generator=rng), *batch[1:]])
        return self.batch_transform(batch, generator=rng)

    def _iter_single(self, skip):
        for k, i in enumerate(self.sampler):
            self._batches_done = k + 1
            if k < skip:
                continue
            yield self._transformed(self.collate_fn(self.dataset[i]), k)
        self._in_epoch = False

    def _iter_stream(self, skip):
        """An IterableDataset: its samples in order, grouped by ``batch_size`` when batching."""
        it, bs, k = iter(self.dataset), self.batch_size, 0
        while True:
            if bs is None:
                try:
                    batch = next(it)
                except StopIteration:
                    break
            else:
                batch = []
                for _ in range(bs):
                    try:
                        batch.append(next(it))
                    except StopIteration:
                        break
                if not batch or (self.drop_last and len(batch) < bs):
                    break
            self._batches_done = k + 1
            if k >= skip:
                yield self._transformed(self.collate_fn(batch), k)
            k += 1
        self._in_epoch = False

    def _iter_batches(self, skip):
        arrays, remap = (None, None) if self._fast is None else self._fast
        ds, collate = self.dataset, self.collate_fn
        getitems = getattr(ds, "__getitems__", None)
        for k, idx in enumerate(self._index_batches()):
            self._batches_done = k + 1
            if k < skip:
                continue
            if arrays is not None:
                if remap is not None:
                    idx = remap[idx]
                yield self._transformed([Tensor._make(a[idx]) for a in arrays], k)
            elif callable(getitems):
                yield self._transformed(collate(getitems([int(i) for i in idx])), k)
            else:
                yield self._transformed(collate([ds[int(i)] for i in idx]), k)
        self._in_epoch = False

    def __len__(self):
        if self._iterable:
            try:
                n = len(self.dataset)
            except TypeError:
                raise TypeError(f"DataLoader: len() of a loader over an IterableDataset needs the dataset to "
                                f"define __len__; {type(self.dataset).__name__} does not") from None
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
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



"""get_worker_info and WorkerInfo (``torch.utils.data``'s names).

varlens loads data in the main process.  With ``num_workers=0`` (the default)
``get_worker_info()`` is None, as in PyTorch.  With ``num_workers > 0`` the DataLoader runs
one emulated worker in the main process: while it calls ``worker_init_fn(0)`` and while it
fetches samples, ``get_worker_info()`` returns ``WorkerInfo(id=0, num_workers=1, seed,
dataset)``, so the usual sharding code (split the stream by ``info.num_workers``) yields
every sample exactly once.
"""
from __future__ import annotations

from dataclasses import dataclass

_current = None


@dataclass
class WorkerInfo:
    """Information about the (emulated) DataLoader worker."""

    id: int
    num_workers: int
    seed: int
    dataset: object
    rng: object = None
    worker_method: str = "main-process"


def get_worker_info():
    """The WorkerInfo of the worker fetching data now, or None outside one (see the module doc)."""
    return _current


def _set(info):
    global _current
    prev, _current = _current, info
    return prev

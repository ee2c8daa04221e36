"""DistributedSampler (``torch.utils.data.distributed``'s name and arguments).

Without ``num_replicas``/``rank`` the sampler asks the process group (varlens.distributed,
after ``init_process_group`` under ``mpiexec``), as PyTorch does; with no group initialised it
acts as replica 0 of 1 where PyTorch raises.  Each rank gets every ``num_replicas``-th index of
the (padded or truncated) order, exactly PyTorch's partition; the shuffle is a permutation seeded by ``seed + epoch``
(``set_epoch``), reproducible in varlens but not PyTorch's numbers.
"""
from __future__ import annotations

import math

import numpy as np

from varlens import distributed as dist
from varlens.utils.data.sampler import Sampler


class DistributedSampler(Sampler):
    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        if num_replicas is None:
            num_replicas = dist.get_world_size() if dist.is_initialized() else 1
        if rank is None:
            rank = dist.get_rank() if dist.is_initialized() else 0
        for name, v in (("num_replicas", num_replicas), ("rank", rank), ("seed", seed)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise TypeError(f"DistributedSampler: {name} must be an int, got {type(v).__name__}")
        if num_replicas <= 0:
            raise ValueError(f"DistributedSampler: num_replicas must be positive, got {num_replicas}")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"DistributedSampler: Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas, self.rank = int(num_replicas), int(rank)
        self.epoch = 0
        self.drop_last = bool(drop_last)
        n = len(dataset)
        if self.drop_last and n % self.num_replicas != 0:
            self.num_samples = math.ceil((n - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(n / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas
        self.shuffle = shuffle
        self.seed = int(seed)

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            rng = np.random.Generator(np.random.PCG64(self.seed + self.epoch))
            indices = rng.permutation(n).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            pad = self.total_size - len(indices)
            if pad > 0:
                indices += (indices * math.ceil(pad / len(indices)))[:pad]
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """Use ``epoch`` in the next shuffle's seed (call it before each epoch, as in PyTorch)."""
        self.epoch = epoch

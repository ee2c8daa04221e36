"""The gradient noise scale for free during data-parallel training.

Under DistributedDataParallel each rank's gradient, before averaging, is the mean gradient of a
small batch (b = its local batch), and the averaged gradient is the mean over the large batch
B = N b.  These are exactly the two batch sizes the estimator of varlens/lens/noise_scale.py
needs (McCandlish et al. 2018): E|G_b|^2 = |G|^2 + tr(Sigma)/b.  Per step this costs the local
squared norm (read from the gradients DDP already holds, before it overwrites them with the
average), the averaged one, and one scalar allreduce that averages |G_b|^2 over the ranks.

    ns = DistributedNoiseScale(ddp_model, local_batch_size=32)
    for x, y in loader:
        opt.zero_grad(); loss_fn(ddp_model(x), y).backward()
        ns.update()            # after backward, before the optimiser step
        opt.step()
    print(ns.estimate().b_simple)

The estimate pools the last ``window`` steps, so it describes the recent stretch of training
(the gradient changes as the parameters move).  The small- and large-batch norms of one step
are correlated (the large batch contains the small one): the delta-method standard error uses
their sample covariance over the window.  With gradient accumulation
(``no_sync``), b is the local batch times the number of accumulated micro-batches.
"""
from __future__ import annotations

import collections

import numpy as np

from varlens import distributed as dist
from varlens.core.tensor import Tensor
from varlens.lens.noise_scale import from_squared_norms


class DistributedNoiseScale:
    """Collects |G_b|^2 (rank mean) and |G_B|^2 per step from a DistributedDataParallel model."""

    def __init__(self, ddp_model, local_batch_size, window=100):
        from varlens.nn.parallel import DistributedDataParallel
        if not isinstance(ddp_model, DistributedDataParallel):
            raise TypeError(f"DistributedNoiseScale: ddp_model must be a DistributedDataParallel, got "
                            f"{type(ddp_model).__name__}")
        if not isinstance(local_batch_size, int) or local_batch_size < 1:
            raise ValueError(f"DistributedNoiseScale: local_batch_size must be a positive int, got {local_batch_size!r}")
        if ddp_model._world < 2:
            raise ValueError("DistributedNoiseScale: needs at least 2 ranks (the small and large batches are "
                             "one rank's and all ranks' together)")
        self.model = ddp_model
        self.b_small = local_batch_size
        self.b_big = local_batch_size * ddp_model._world
        self.small = collections.deque(maxlen=window)
        self.big = collections.deque(maxlen=window)
        ddp_model.__dict__["_local_sq"] = 0.0  # asks DDP to record the local squared norm each backward

    def update(self):
        """Record this step's two squared norms (call after backward, before the optimiser step)."""
        local = self.model._local_sq
        big = 0.0
        for p in self.model._params:
            if p.grad is not None:
                a = p.grad._data.ravel()
                big += float(a @ a)
        t = Tensor._make(np.array([local], dtype=np.float64))
        dist.all_reduce(t, op=dist.ReduceOp.AVG, group=self.model.process_group)  # the one extra allreduce
        self.small.append(float(t._data[0]))
        self.big.append(big)
        return self.small[-1], big

    def estimate(self):
        """A NoiseScale (B_simple, |G|^2, tr(Sigma), standard error) from the recorded steps."""
        if len(self.small) < 2:
            raise ValueError(f"DistributedNoiseScale.estimate: needs at least 2 recorded steps, got {len(self.small)}")
        return from_squared_norms(list(self.small), list(self.big), self.b_small, self.b_big, paired=True)

"""What the Trainer and ``varlens train`` do differently under ``mpiexec -n N`` (N > 1).

Every rank builds the same run; the model is wrapped in DistributedDataParallel, the training
loader reads a DistributedSampler shard (reshuffled each epoch with ``set_epoch``), so one
optimiser step sees N local batches: the effective batch is N x batch size x accumulate, with
the recipe's learning rate unchanged (stated in the log).  Rank 0 alone prints, writes
metrics.jsonl, curves.png, checkpoints and summary.json; every rank reads the checkpoint on
``--resume``.  With one process all of this is a no-op.
"""
from __future__ import annotations

from varlens import distributed as dist
from varlens.distributed.process_group import _launcher_env
from varlens.nn.parallel import DistributedDataParallel


def init_from_launcher():
    """Join the process group if an MPI launcher started more than one process; True if so."""
    if dist.is_initialized():
        return dist.get_world_size() > 1
    size = _launcher_env()[1]
    if size is None or size < 2:
        return False
    dist.init_process_group("mpi")
    return True


def world_size():
    return dist.get_world_size() if dist.is_initialized() else 1


def is_main():
    """True on rank 0, and in a single process."""
    return not dist.is_initialized() or dist.get_rank() == 0


def unwrap(model):
    """The model inside a DistributedDataParallel wrapper (checkpoints hold its state dict)."""
    return model.module if isinstance(model, DistributedDataParallel) else model


def wrap(model, train_loader, seed):
    """(DDP-wrapped model, loader over this rank's DistributedSampler shard) when N > 1."""
    if world_size() < 2:
        return model, train_loader
    from varlens.utils.data import DataLoader, DistributedSampler
    sampler = DistributedSampler(train_loader.dataset, shuffle=True, seed=int(seed))
    loader = DataLoader(train_loader.dataset, batch_size=train_loader.batch_size, sampler=sampler,
                        drop_last=train_loader.drop_last, generator=train_loader.generator,
                        batch_transform=train_loader.batch_transform)
    return DistributedDataParallel(model), loader


def set_epoch(loader, epoch):
    sampler = getattr(loader, "sampler", None)
    if hasattr(sampler, "set_epoch"):
        sampler.set_epoch(epoch)


def reduce_average(avg):
    """Sum a metrics Average's counts over the ranks (the epoch's global train loss/accuracy)."""
    if world_size() < 2:
        return avg
    import numpy as np
    from varlens.core.tensor import Tensor
    t = Tensor._make(np.array([avg.loss_sum, avg.correct, avg.n, avg.n_acc], dtype=np.float64))
    dist.all_reduce(t)
    a = t._data
    avg.loss_sum, avg.correct, avg.n, avg.n_acc = float(a[0]), int(a[1]), int(a[2]), int(a[3])
    return avg


def scale_line(train_loader, accumulate, optimizer):
    """The log line that states the effective batch and learning rate of a distributed run."""
    n = world_size()
    b = getattr(train_loader, "batch_size", None)
    lr = optimizer.param_groups[0]["lr"]
    eff = n * b * accumulate if b else None
    acc = f" x accumulate {accumulate}" if accumulate > 1 else ""
    return (f"distributed: {n} ranks x local batch {b}{acc} = effective batch {eff}; learning rate {lr:g} "
            f"(as given, not scaled with the batch); rank 0 logs and checkpoints")


def broadcast_object(obj):
    """Rank 0's ``obj`` on every rank (e.g. the checkpoint path --resume chose)."""
    if world_size() < 2:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def on_main_then_shared(fn, *args):
    """``fn(*args)`` on rank 0 alone (e.g. preparing the run folder), its result (or its
    exception, raised on every rank) shared with all ranks, so no rank waits on a failed one."""
    if world_size() < 2:
        return fn(*args)
    res = None
    if is_main():
        try:
            res = ("ok", fn(*args))
        except Exception as e:  # every rank raises it, so none is left waiting in a collective
            res = ("error", e)
    res = broadcast_object(res)
    if res[0] == "error":
        raise res[1]
    return res[1]


def barrier():
    if world_size() > 1:
        dist.barrier()


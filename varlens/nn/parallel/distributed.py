"""DistributedDataParallel: every rank holds the whole model and a shard of the batch; the
gradients are averaged across ranks during backward, so each rank's optimiser takes the same
step as one process would with the whole batch (docs/distributed.md).

How the averaging overlaps the backward pass, as in PyTorch's reducer:

- at wrap time rank 0's parameters and buffers are broadcast, and the parameters are cut into
  buckets of about ``bucket_cap_mb`` (25 MB; the first, which is ready first, 1 MB) in reverse
  registration order, which is roughly the order backward produces their gradients;
- a post-accumulate-grad hook on each parameter counts its gradient deliveries; when every
  parameter of a bucket has all of them, the bucket's gradients are copied into one flat
  buffer, divided by the world size and handed to a non-blocking ``MPI_Iallreduce``, while the
  backward goes on with the earlier layers.  Buckets start in bucket order on every rank
  (MPI requires the same order of collectives everywhere);
- MPICH moves a non-blocking collective only inside MPI calls made by this process, so the
  reducer calls ``MPI_Test`` on the allreduces in flight right after each bucket starts and in
  every gradient hook while any is pending (``_poke``); VARLENS_DDP_PROGRESS=thread adds a
  thread that polls MPI during the backward's matrix products (docs/distributed.md,
  "Overlapping communication with the backward", for what each buys);
- when the backward finishes (the engine's ``queue_callback`` slot) the remaining buckets are
  started, all are waited for, and the averages are copied back into ``.grad``.

varlens calls a leaf's hook once per gradient delivered to it (``x * x`` delivers two), so the
number of deliveries per parameter is learned in the first iteration (whose buckets all start
at the end, as torch's static graph's first iteration).  If a later iteration delivers more than
was learned (the graph changed), the bucket is reduced again at the end; without
``static_graph=True`` the ranks agree on that with one small extra allreduce per step.
"""
from __future__ import annotations

import contextlib
import time

import numpy as np

from varlens.core import engine as _engine
from varlens.core import grad_mode as _gm
from varlens.core.tensor import Tensor
from varlens.distributed import process_group as _pg
from varlens.nn.module import Module

_MB = 1024 * 1024
_FIRST_BUCKET_BYTES = 1 * _MB  # torch's dist._DEFAULT_FIRST_BUCKET_BYTES


def _bucket_assignment(params, cap_bytes, first_bytes):
    """Indices of ``params`` grouped into buckets: one dtype per bucket, filled in reverse order
    until a bucket reaches its size limit (the first ``first_bytes``, the rest ``cap_bytes``)."""
    buckets = []
    open_ = {}  # dtype -> (indices, bytes)
    limit = first_bytes
    for i in reversed(range(len(params))):
        a = params[i]._data
        idx, size = open_.get(a.dtype, ([], 0))
        idx.append(i)
        size += a.nbytes
        if size >= limit:
            buckets.append(idx)
            open_.pop(a.dtype, None)
            limit = cap_bytes
        else:
            open_[a.dtype] = (idx, size)
    buckets.extend(idx for idx, _ in open_.values())
    return buckets


class _Bucket:
    """Parameter indices, their offsets in one flat buffer, and the allreduce in flight."""
    __slots__ = ("params", "offsets", "flat", "left", "request", "launched", "late")

    def __init__(self, params, offsets, flat):
        self.params, self.offsets, self.flat = params, offsets, flat
        self.left = 0
        self.request = None
        self.launched = False
        self.late = False


class DistributedDataParallel(Module):
    """Data-parallel training over the ranks of a process group (torch's DDP, on MPI).

    ``module``'s parameters and buffers are broadcast from rank 0 now; each backward averages
    the gradients over the ranks.  ``device_ids``/``output_device`` are accepted for CUDA-style
    scripts and must name the CPU or one local device; ``gradient_as_bucket_view`` is accepted
    and has no effect (the averages are copied into ``.grad``).  Parameters that some ranks do
    not use in a step need ``find_unused_parameters=True``, as in PyTorch.
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 process_group=None, bucket_cap_mb=None, find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False, delay_all_reduce_named_params=None,
                 param_to_hook_all_reduce=None, mixed_precision=None, device_mesh=None):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: module must be an nn.Module, got {type(module).__name__}")
        if device_ids is not None and len(device_ids) > 1:
            raise ValueError("DistributedDataParallel: device_ids can only be None or contain a single element "
                             f"(one device per process), got {device_ids}")
        if bucket_cap_mb is None:
            bucket_cap_mb = 25
        if not isinstance(bucket_cap_mb, (int, float)) or isinstance(bucket_cap_mb, bool) or bucket_cap_mb <= 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be a positive number, got {bucket_cap_mb!r}")
        g = _pg._default_group(process_group, "DistributedDataParallel")
        self.module = module
        self.device_ids, self.output_device, self.dim = device_ids, output_device, dim
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.static_graph = static_graph
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.bucket_bytes_cap = int(bucket_cap_mb * _MB)
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        d = self.__dict__  # the reducer's state is plain attributes (not submodules or parameters)
        d["process_group"] = g
        d["_world"] = g.size()
        seen = set()
        params = []
        self_names = []
        for name, p in module.named_parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                params.append(p)
                self_names.append(name)
        d["_params"] = params
        d["_param_names"] = self_names
        self._verify_shapes()
        self._broadcast_state()
        buckets = []
        bucket_of = [0] * len(params)
        for bi, idx in enumerate(_bucket_assignment(params, self.bucket_bytes_cap,
                                                    min(_FIRST_BUCKET_BYTES, self.bucket_bytes_cap))):
            offsets = []
            n = 0
            for i in idx:
                offsets.append(n)
                n += params[i]._data.size
                bucket_of[i] = bi
            buckets.append(_Bucket(idx, offsets, np.zeros(n, params[idx[0]]._data.dtype)))
        d["_buckets"] = buckets
        d["_bucket_of"] = bucket_of
        d["_expected"] = None  # deliveries per parameter per backward, learned in the first iteration
        d["_hits"] = [0] * len(params)
        d["_armed"] = False
        d["_queued"] = False
        d["_next_launch"] = 0
        d["_local_sq"] = None  # a float when lens.DistributedNoiseScale asks: |local gradient|^2 of the last backward
        # the last backward: seconds waiting for MPI at its end, seconds of the whole end, buckets
        # started during the backward, buckets whose allreduce completed before the final wait
        d["_timing"] = {"wait_s": 0.0, "finish_s": 0.0, "early_buckets": 0, "done_in_backward": 0}
        d["_pending"] = []  # buckets whose allreduce is in flight and not yet seen complete
        d["_overlap"] = True  # start buckets during the backward (False: all at its end; for benchmarks)
        self._set_progress_mode(_pg.progress_mode())
        d["_hooks"] = [p.register_post_accumulate_grad_hook(self._make_hook(i)) for i, p in enumerate(params)]

    def _set_progress_mode(self, mode, overlap=True):
        """How the allreduces move during the backward (process_group.progress_mode): "hooks"
        tests them in every gradient hook, "thread" also runs a ProgressThread, "none" neither.
        ``overlap=False`` starts every bucket at the end of the backward instead (a baseline)."""
        if mode not in _pg.PROGRESS_MODES:
            raise ValueError(f"DistributedDataParallel: progress mode must be one of {_pg.PROGRESS_MODES}, got {mode!r}")
        d = self.__dict__
        d["_overlap"] = bool(overlap)
        d["_drive"] = mode != "none"  # test the requests in flight in every gradient hook
        d["_progress"] = None
        if mode == "thread" and self._world > 1:
            if d.get("_progress_thread") is None:  # moves the allreduces during the backward's matrix products
                d["_progress_thread"] = _pg.ProgressThread(self.process_group.comm)
            d["_progress"] = d["_progress_thread"]

    # ------------------------------------------------------------------ wrap time
    def _verify_shapes(self):
        g = self.process_group
        sig = [(tuple(p._data.shape), str(p._data.dtype)) for p in self._params]
        every = g.comm.allgather(sig)
        for r, other in enumerate(every):
            if other != sig:
                k = next((i for i, (a, b) in enumerate(zip(sig, other)) if a != b), min(len(sig), len(other)))
                what = (f"parameter {k} ({self._param_names[k]}) is {sig[k]} here and {other[k]} on rank {g.ranks[r]}"
                        if k < min(len(sig), len(other)) else
                        f"this rank has {len(sig)} parameters and rank {g.ranks[r]} has {len(other)}")
                raise RuntimeError(f"DistributedDataParallel: the model differs across ranks: {what}")

    def _flat_broadcast(self, tensors):
        """Broadcast ``tensors`` from the group's first rank, one flat message per dtype."""
        g = self.process_group
        by_dtype = {}
        for t in tensors:
            by_dtype.setdefault(t._data.dtype.str, []).append(t)
        for _, ts in sorted(by_dtype.items()):
            flat = np.concatenate([t._data.ravel() for t in ts]) if ts else None
            _pg.wait_all([g.comm.Ibcast(flat, root=0)], "DistributedDataParallel broadcast", g)
            if g.comm.Get_rank() != 0:
                n = 0
                for t in ts:
                    k = t._data.size
                    t._data[...] = flat[n:n + k].reshape(t._data.shape)
                    t._version[0] += 1
                    n += k

    def _broadcast_state(self):
        if self._world == 1:
            return
        self._flat_broadcast(list(self.module.parameters()) + self._buffer_list())

    def _buffer_list(self):
        return [b for b in self.module.buffers() if b is not None and b._data.size]

    # ------------------------------------------------------------------ forward
    def forward(self, *inputs, **kwargs):
        if self.broadcast_buffers and self.require_forward_param_sync and self._world > 1:
            bufs = self._buffer_list()
            if bufs:
                self._flat_broadcast(bufs)
        if _gm._enabled[0] and self.require_backward_grad_sync:
            self._prepare()
        else:
            self.__dict__["_armed"] = False
        return self.module(*inputs, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Skip the gradient averaging in backwards inside this block (gradient accumulation):
        the gradients add up locally and the first backward after it averages their sum."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def _prepare(self):
        d = self.__dict__
        d["_armed"] = True
        d["_queued"] = False
        d["_next_launch"] = 0
        d["_pending"] = []
        d["_timing"]["done_in_backward"] = 0
        hits = d["_hits"]
        for i in range(len(hits)):
            hits[i] = 0
        exp = d["_expected"]
        for b in self._buckets:
            # parameters with no learned delivery never make a bucket ready: it starts in order
            b.left = len(b.params) if exp is None else sum(1 for i in b.params if exp[i] > 0)
            b.request = None
            b.launched = False
            b.late = False

    # ------------------------------------------------------------------ backward
    def _make_hook(self, i):
        def hook(p):
            d = self.__dict__
            if not d["_armed"]:
                return
            if not d["_queued"]:
                d["_queued"] = True
                _engine.queue_callback(self._finish)
            hits = d["_hits"]
            hits[i] += 1
            exp = d["_expected"]
            if exp is None:
                return
            b = self._buckets[d["_bucket_of"][i]]
            if hits[i] == exp[i]:
                b.left -= 1
                if b.left == 0 and d["_overlap"]:
                    self._launch_ready()
            elif hits[i] > exp[i] and b.launched:
                b.late = True
            if d["_pending"] and d["_drive"]:
                self._poke()
        return hook

    def _poke(self):
        """Drive the allreduces in flight: MPICH advances a non-blocking collective only inside
        an MPI call on this process, so without these calls an early bucket's allreduce would
        sit until the final wait.  ``MPI_Test`` on each pending request moves its schedule
        (copies, reductions, the next messages) as far as it can without blocking, and is
        cheap when nothing is ready.  Called after each bucket starts and from
        every gradient hook while any allreduce is pending."""
        pending = self._pending
        test = _pg._world.mpi.Request.Test
        left = [b for b in pending if not test(b.request)]
        if len(left) < len(pending):
            self._timing["done_in_backward"] += len(pending) - len(left)
            self.__dict__["_pending"] = left

    def _launch_ready(self):
        buckets = self._buckets
        k = self._next_launch
        while k < len(buckets) and buckets[k].left == 0:
            self._launch(buckets[k])
            k += 1
        self.__dict__["_next_launch"] = k

    def _fill(self, b):
        """The bucket's gradients divided by the world size, into its flat buffer (one pass)."""
        flat = b.flat
        params = self._params
        world = self._world
        for i, off in zip(b.params, b.offsets):
            gr = params[i].grad
            n = params[i]._data.size
            if gr is None:
                flat[off:off + n] = 0
            elif world > 1:
                np.divide(gr._data.reshape(-1), world, out=flat[off:off + n])
            else:
                flat[off:off + n] = gr._data.reshape(-1)

    def _launch(self, b):
        self._fill(b)
        b.launched = True
        if self._world > 1:
            d = self.__dict__
            b.request = self.process_group.comm.Iallreduce(_pg._world.mpi.IN_PLACE, b.flat)
            d["_pending"].append(b)
            if d["_progress"] is not None:
                d["_progress"].start()
            if d["_drive"] and d["_armed"]:
                self._poke()

    def _finish(self):
        """End of backward: start what is left, wait, agree on late buckets, write .grad."""
        d = self.__dict__
        d["_armed"] = False
        t0 = time.perf_counter()
        g = self.process_group
        d["_timing"]["early_buckets"] = sum(1 for b in self._buckets if b.launched)  # started during backward
        hits = d["_hits"]
        if not self.find_unused_parameters:
            unused = [i for i, h in enumerate(hits) if h == 0]
            if unused:
                if d["_progress"] is not None:
                    d["_progress"].stop()
                names = ", ".join(self._param_names[i] for i in unused[:8])
                raise RuntimeError(
                    f"DistributedDataParallel: rank {g.comm.Get_rank()}: parameters received no gradient in "
                    f"this backward ({names}{', ...' if len(unused) > 8 else ''}; indices {unused[:8]}): "
                    "they were not used in producing the loss. Pass find_unused_parameters=True to "
                    "DistributedDataParallel, or make sure all forward outputs take part in the loss.")
        while d["_next_launch"] < len(self._buckets):
            b = self._buckets[d["_next_launch"]]
            self._launch(b)
            d["_next_launch"] += 1
        reqs = [b.request for b in d["_pending"]]
        d["_pending"] = []
        t1 = time.perf_counter()
        if reqs:
            _pg.wait_all(reqs, "DistributedDataParallel gradient allreduce", g)
        d["_timing"]["wait_s"] = time.perf_counter() - t1
        if d["_progress"] is not None:
            d["_progress"].stop()  # nothing in flight until the next backward
        exp = d["_expected"]
        late = [b.late for b in self._buckets]
        used = None
        if self._world > 1 and (not self.static_graph or self.find_unused_parameters):
            # one small allreduce: which buckets any rank must redo, and which parameters any rank used
            flags = np.array(late + ([h > 0 for h in hits] if self.find_unused_parameters else []), np.int32)
            _pg.wait_all([g.comm.Iallreduce(_pg._world.mpi.IN_PLACE, flags, op=_pg._world.mpi.MAX)],
                         "DistributedDataParallel agreement", g)
            late = [bool(v) for v in flags[:len(late)]]
            if self.find_unused_parameters:
                used = flags[len(late):]
        d["_timing"]["redone_buckets"] = sum(late)
        for b, redo in zip(self._buckets, late):
            if redo:  # a gradient arrived after its bucket had started: reduce it again
                self._fill(b)
                if self._world > 1:
                    _pg.wait_all([g.comm.Iallreduce(_pg._world.mpi.IN_PLACE, b.flat)],
                                 "DistributedDataParallel gradient allreduce", g)
        if exp is None or exp != hits:  # first iteration, or the graph changed: learn again
            d["_expected"] = list(hits)
        params = self._params
        if d["_local_sq"] is not None:  # this rank's own squared gradient norm, before the average
            d["_local_sq"] = sum(float(p.grad._data.ravel() @ p.grad._data.ravel())
                                 for p in params if p.grad is not None)
        for b in self._buckets:
            flat = b.flat
            for i, off in zip(b.params, b.offsets):
                p = params[i]
                if used is not None and not used[i]:
                    continue  # no rank used it: its .grad stays as it was (None), as in PyTorch
                a = p._data
                v = flat[off:off + a.size].reshape(a.shape)
                gr = p.grad
                if gr is None:
                    p.grad = Tensor._make(v.copy())
                elif gr._data.flags.writeable and gr._data.shape == a.shape and gr._data.dtype == a.dtype:
                    gr._data[...] = v
                else:
                    gr._data = v.copy()
        d["_timing"]["finish_s"] = time.perf_counter() - t0

    # ------------------------------------------------------------------ torch's other methods
    def join(self, divide_by_initial_world_size=True, enable=True, throw_on_early_termination=False):
        raise NotImplementedError("DistributedDataParallel.join (uneven inputs) is not supported: give every "
                                  "rank the same number of batches (DistributedSampler does)")

    def register_comm_hook(self, state, hook):
        raise NotImplementedError("DistributedDataParallel.register_comm_hook is not supported: the gradients "
                                  "are averaged with MPI_Iallreduce")

    def _set_static_graph(self):
        self.static_graph = True

    def extra_repr(self):
        return ""

"""torch.distributed's collectives on MPI: each is one non-blocking MPI call on the tensors'
NumPy buffers (no copies when a tensor is contiguous), completed by ``Work.wait()``.

As in PyTorch, results are written in place into the given tensors (``all_reduce(t)`` changes
``t``), ``src``/``dst`` are global ranks, and ``async_op=True`` returns a work handle instead
of waiting.  A process that is not a member of ``group`` does nothing and gets None.
"""
from __future__ import annotations

import enum
import time

import numpy as np

from varlens.core.tensor import Tensor
from varlens.core import grad_mode as _gm
from varlens.distributed.process_group import _default_group, _world, wait_all


class ReduceOp(enum.Enum):
    """torch.distributed.ReduceOp.  AVG is the SUM divided by the group size (floating tensors)."""
    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"

    def __repr__(self):
        return f"<ReduceOp.{self.name}: {list(ReduceOp).index(self)}>"


_MPI_OP = {"sum": "SUM", "avg": "SUM", "product": "PROD", "min": "MIN", "max": "MAX", "band": "BAND",
           "bor": "BOR", "bxor": "BXOR"}


def _mpi_op(op, arr, what):
    if isinstance(op, str):
        try:
            op = ReduceOp[op.upper()]
        except KeyError:
            raise ValueError(f"{what}: op must be a ReduceOp, got {op!r}") from None
    if not isinstance(op, ReduceOp):
        raise TypeError(f"{what}: op must be a ReduceOp, got {type(op).__name__}")
    if op is ReduceOp.AVG and arr.dtype.kind not in "fc":
        raise ValueError(f"{what}: ReduceOp.AVG needs a floating tensor, got dtype {arr.dtype} "
                         "(use ReduceOp.SUM and divide)")
    if op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR) and arr.dtype.kind not in "iub":
        raise ValueError(f"{what}: ReduceOp.{op.name} needs an integer or bool tensor, got dtype {arr.dtype}")
    name = _MPI_OP[op.value]
    if arr.dtype == np.bool_:  # reduced as uint8 (MPI has no bitwise ops on C bool): sum is "any"
        name = {"SUM": "MAX", "PROD": "MIN"}.get(name, name)
    return op, getattr(_world.mpi, name)


def _mpi_view(buf):
    """The array MPI reduces: bool as uint8 (bitwise and max/min ops are defined on it)."""
    return buf.view(np.uint8) if buf.dtype == np.bool_ else buf


def _check_tensor(t, what, name="tensor"):
    if not isinstance(t, Tensor):
        raise TypeError(f"{what}: {name} must be a Tensor, got {type(t).__name__}")
    return t


def _buffer(t):
    """A C-contiguous array MPI can read and write for tensor ``t``, and whether it is t's own
    storage (else the result is copied back into ``t`` when the operation completes)."""
    a = t._data
    if a.flags.c_contiguous and a.flags.writeable and "_view_of" not in t.__dict__:
        return a, True
    return np.ascontiguousarray(a).copy(), False


def _store(t, arr, own):
    """Make ``arr`` tensor ``t``'s value in place (views and version counters kept right)."""
    if own:
        t._version[0] += 1
        return
    with _gm.no_grad():
        t.copy_(Tensor._make(arr))


class Work:
    """The handle of an asynchronous collective (PyTorch's Work): ``wait()`` blocks until it is
    done (bounded by the group's timeout) and writes the result into the tensors;
    ``is_completed()`` asks without blocking."""

    def __init__(self, requests, group, what, finish=None):
        self._requests = requests
        self._group = group
        self._what = what
        self._finish = finish
        self._done = False
        self._result = None

    def is_completed(self):
        if not self._done and _world.mpi.Request.Testall(self._requests):
            self._complete()
        return self._done

    def _complete(self):
        self._done = True
        if self._finish is not None:
            self._result = self._finish()
            self._finish = None

    def wait(self, timeout=None):
        if not self._done:
            wait_all(self._requests, self._what, self._group)
            self._complete()
        return True

    def is_success(self):
        return self._done

    def exception(self):
        return None

    def result(self):
        self.wait()
        return self._result if self._result is not None else []

    def synchronize(self):
        self.wait()


def _run(requests, group, what, finish, async_op):
    w = Work(requests, group, what, finish)
    if async_op:
        return w
    w.wait()
    return None


def _member(group, what):
    g = _default_group(group, what)
    return g if g.comm is not None else None


def barrier(group=None, async_op=False, device_ids=None):
    """Wait until every rank of ``group`` reaches this call."""
    g = _member(group, "barrier")
    if g is None:
        return None
    return _run([g.comm.Ibarrier()], g, "barrier", None, async_op)


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``tensor`` over the ranks with ``op``; every rank's ``tensor`` gets the result."""
    MPI = _world.mpi
    g = _member(group, "all_reduce")
    _check_tensor(tensor, "all_reduce")
    if g is None:
        return None
    buf, own = _buffer(tensor)
    op, mop = _mpi_op(op, buf, "all_reduce")
    req = g.comm.Iallreduce(MPI.IN_PLACE, _mpi_view(buf), op=mop)

    def finish():
        if op is ReduceOp.AVG:
            buf[...] /= g.size()  # in place: the closure's buffer
        _store(tensor, buf, own)
    return _run([req], g, "all_reduce", finish, async_op)


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    """Reduce ``tensor`` over the ranks into rank ``dst``'s ``tensor`` (others keep theirs)."""
    MPI = _world.mpi
    g = _member(group, "reduce")
    _check_tensor(tensor, "reduce")
    if g is None:
        return None
    root = group_dst if group_dst is not None else g.group_rank(0 if dst is None else dst, "dst")
    buf, own = _buffer(tensor)
    op, mop = _mpi_op(op, buf, "reduce")
    me = g.comm.Get_rank() == root
    mb = _mpi_view(buf)
    req = g.comm.Ireduce(MPI.IN_PLACE if me else mb, mb if me else None, op=mop, root=root)

    def finish():
        if me:
            if op is ReduceOp.AVG:
                buf[...] /= g.size()
            _store(tensor, buf, own)
    return _run([req], g, "reduce", finish, async_op)


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    """Copy rank ``src``'s ``tensor`` into every rank's ``tensor``."""
    g = _member(group, "broadcast")
    _check_tensor(tensor, "broadcast")
    if g is None:
        return None
    root = group_src if group_src is not None else g.group_rank(0 if src is None else src, "src")
    buf, own = _buffer(tensor)
    req = g.comm.Ibcast(buf, root=root)

    def finish():
        if g.comm.Get_rank() != root:
            _store(tensor, buf, own)
    return _run([req], g, "broadcast", finish, async_op)


def _same_shape(tensors, ref, what, name):
    for i, t in enumerate(tensors):
        _check_tensor(t, what, f"{name}[{i}]")
        if t._data.shape != ref._data.shape or t._data.dtype != ref._data.dtype:
            raise ValueError(f"{what}: {name}[{i}] has shape {tuple(t._data.shape)} and dtype {t._data.dtype}; "
                             f"every entry must match the input's shape {tuple(ref._data.shape)} and dtype "
                             f"{ref._data.dtype}")


def _check_len(lst, n, what, name):
    if not isinstance(lst, (list, tuple)):
        raise TypeError(f"{what}: {name} must be a list of tensors, got {type(lst).__name__}")
    if len(lst) != n:
        raise ValueError(f"{what}: {name} must hold one tensor per rank ({n}), got {len(lst)}")


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """``tensor_list[r]`` gets rank r's ``tensor`` on every rank."""
    g = _member(group, "all_gather")
    _check_tensor(tensor, "all_gather")
    if g is None:
        return None
    _check_len(tensor_list, g.size(), "all_gather", "tensor_list")
    _same_shape(tensor_list, tensor, "all_gather", "tensor_list")
    send = np.ascontiguousarray(tensor._data)
    out = np.empty((g.size(),) + send.shape, send.dtype)
    req = g.comm.Iallgather(send, out)

    def finish():
        for t, a in zip(tensor_list, out):
            _store(t, a, False)
    return _run([req], g, "all_gather", finish, async_op)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """``output_tensor`` (world x input's size, stacked or concatenated on dim 0) gets every
    rank's ``input_tensor`` in rank order."""
    g = _member(group, "all_gather_into_tensor")
    _check_tensor(input_tensor, "all_gather_into_tensor", "input_tensor")
    _check_tensor(output_tensor, "all_gather_into_tensor", "output_tensor")
    if g is None:
        return None
    send = np.ascontiguousarray(input_tensor._data)
    if output_tensor._data.size != send.size * g.size() or output_tensor._data.dtype != send.dtype:
        raise ValueError(f"all_gather_into_tensor: output_tensor must have world_size ({g.size()}) times the "
                         f"input's {send.size} elements and its dtype {send.dtype}, got shape "
                         f"{tuple(output_tensor._data.shape)} and dtype {output_tensor._data.dtype}")
    buf, own = _buffer(output_tensor)
    req = g.comm.Iallgather(send, buf.reshape(g.size(), -1))
    return _run([req], g, "all_gather_into_tensor", lambda: _store(output_tensor, buf, own), async_op)


def all_gather_object(object_list, obj, group=None):
    """``object_list[r]`` gets rank r's picklable ``obj``."""
    g = _member(group, "all_gather_object")
    if g is None:
        return None
    _check_len(object_list, g.size(), "all_gather_object", "object_list")
    object_list[:] = g.comm.allgather(obj)


def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None):
    """Every rank's ``object_list`` gets rank ``src``'s entries (pickled)."""
    g = _member(group, "broadcast_object_list")
    if g is None:
        return None
    root = group_src if group_src is not None else g.group_rank(0 if src is None else src, "src")
    object_list[:] = g.comm.bcast(list(object_list) if g.comm.Get_rank() == root else None, root=root)


def gather(tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
    """Rank ``dst``'s ``gather_list[r]`` gets rank r's ``tensor`` (other ranks pass None)."""
    g = _member(group, "gather")
    _check_tensor(tensor, "gather")
    if g is None:
        return None
    root = group_dst if group_dst is not None else g.group_rank(0 if dst is None else dst, "dst")
    me = g.comm.Get_rank() == root
    send = np.ascontiguousarray(tensor._data)
    out = None
    if me:
        _check_len(gather_list, g.size(), "gather", "gather_list")
        _same_shape(gather_list, tensor, "gather", "gather_list")
        out = np.empty((g.size(),) + send.shape, send.dtype)
    elif gather_list:
        raise ValueError(f"gather: gather_list must be None (or empty) on non-destination ranks (dst={root})")
    req = g.comm.Igather(send, out, root=root)

    def finish():
        if me:
            for t, a in zip(gather_list, out):
                _store(t, a, False)
    return _run([req], g, "gather", finish, async_op)


def gather_object(obj, object_gather_list=None, dst=None, group=None, group_dst=None):
    g = _member(group, "gather_object")
    if g is None:
        return None
    root = group_dst if group_dst is not None else g.group_rank(0 if dst is None else dst, "dst")
    got = g.comm.gather(obj, root=root)
    if g.comm.Get_rank() == root:
        _check_len(object_gather_list, g.size(), "gather_object", "object_gather_list")
        object_gather_list[:] = got


def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False, group_src=None):
    """Rank r's ``tensor`` gets rank ``src``'s ``scatter_list[r]`` (other ranks pass None)."""
    g = _member(group, "scatter")
    _check_tensor(tensor, "scatter")
    if g is None:
        return None
    root = group_src if group_src is not None else g.group_rank(0 if src is None else src, "src")
    me = g.comm.Get_rank() == root
    send = None
    if me:
        _check_len(scatter_list, g.size(), "scatter", "scatter_list")
        _same_shape(scatter_list, tensor, "scatter", "scatter_list")
        send = np.ascontiguousarray(np.stack([t._data for t in scatter_list]))
    elif scatter_list:
        raise ValueError(f"scatter: scatter_list must be None (or empty) on non-source ranks (src={root})")
    buf, own = _buffer(tensor)
    req = g.comm.Iscatter(send, buf, root=root)
    return _run([req], g, "scatter", lambda: _store(tensor, buf, own), async_op)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """``output`` on rank r gets the reduction over the ranks of their ``input_list[r]``."""
    g = _member(group, "reduce_scatter")
    _check_tensor(output, "reduce_scatter", "output")
    if g is None:
        return None
    _check_len(input_list, g.size(), "reduce_scatter", "input_list")
    _same_shape(input_list, output, "reduce_scatter", "input_list")
    send = np.ascontiguousarray(np.stack([t._data for t in input_list]))
    return _reduce_scatter(output, send, op, g, "reduce_scatter", async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """``output`` on rank r gets the reduction over the ranks of chunk r of ``input`` (dim 0,
    world_size equal chunks)."""
    g = _member(group, "reduce_scatter_tensor")
    _check_tensor(output, "reduce_scatter_tensor", "output")
    _check_tensor(input, "reduce_scatter_tensor", "input")
    if g is None:
        return None
    if input._data.size != output._data.size * g.size() or input._data.dtype != output._data.dtype:
        raise ValueError(f"reduce_scatter_tensor: input must have world_size ({g.size()}) times output's "
                         f"{output._data.size} elements and its dtype {output._data.dtype}, got shape "
                         f"{tuple(input._data.shape)} and dtype {input._data.dtype}")
    send = np.ascontiguousarray(input._data).reshape(g.size(), -1)
    return _reduce_scatter(output, send, op, g, "reduce_scatter_tensor", async_op)


def _reduce_scatter(output, send, op, g, what, async_op):
    buf, own = _buffer(output)
    op, mop = _mpi_op(op, buf, what)
    req = g.comm.Ireduce_scatter_block(_mpi_view(send), _mpi_view(buf), op=mop)

    def finish():
        if op is ReduceOp.AVG:
            buf[...] /= g.size()
        _store(output, buf, own)
    return _run([req], g, what, finish, async_op)


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None,
                      async_op=False):
    """Rank r's ``output`` chunk s gets rank s's ``input`` chunk r (equal chunks on dim 0)."""
    g = _member(group, "all_to_all_single")
    if g is None:
        return None
    if output_split_sizes is not None or input_split_sizes is not None:
        raise NotImplementedError("all_to_all_single: uneven split sizes are not supported (equal chunks only)")
    _check_tensor(input, "all_to_all_single", "input")
    _check_tensor(output, "all_to_all_single", "output")
    send = np.ascontiguousarray(input._data)
    if send.size % g.size() or output._data.size != send.size or output._data.dtype != send.dtype:
        raise ValueError(f"all_to_all_single: input and output must have the same dtype and size, divisible by "
                         f"the world size {g.size()}; got input {tuple(send.shape)} {send.dtype} and output "
                         f"{tuple(output._data.shape)} {output._data.dtype}")
    buf, own = _buffer(output)
    req = g.comm.Ialltoall(send.reshape(g.size(), -1), buf.reshape(g.size(), -1))
    return _run([req], g, "all_to_all_single", lambda: _store(output, buf, own), async_op)


def _p2p(tensor, peer, group, group_peer, what, tag):
    g = _member(group, what)
    _check_tensor(tensor, what)
    if g is None:
        return None, None
    if group_peer is None:
        if peer is None:
            raise ValueError(f"{what}: give the peer's rank")
        group_peer = g.group_rank(peer, "dst" if what in ("send", "isend") else "src")
    if not isinstance(tag, int):
        raise TypeError(f"{what}: tag must be an int, got {type(tag).__name__}")
    return g, group_peer


def isend(tensor, dst=None, group=None, tag=0, group_dst=None):
    """Send ``tensor`` to rank ``dst`` without waiting; returns a Work handle."""
    g, peer = _p2p(tensor, dst, group, group_dst, "isend", tag)
    if g is None:
        return None
    send = np.ascontiguousarray(tensor._data).copy()  # the caller may change tensor before wait()
    return Work([g.comm.Isend(send, dest=peer, tag=tag)], g, "isend")


def irecv(tensor, src=None, group=None, tag=0, group_src=None):
    """Receive into ``tensor`` from rank ``src`` without waiting; returns a Work handle."""
    if src is None and group_src is None:
        src = -1  # any source, as PyTorch
    g, peer = (_member(group, "irecv"), None) if src == -1 else _p2p(tensor, src, group, group_src, "irecv", tag)
    if g is None:
        return None
    MPI = _world.mpi
    buf, own = _buffer(tensor)
    req = g.comm.Irecv(buf, source=MPI.ANY_SOURCE if peer is None else peer, tag=tag)
    return Work([req], g, "irecv", lambda: _store(tensor, buf, own))


def send(tensor, dst=None, group=None, tag=0, group_dst=None):
    w = isend(tensor, dst, group, tag, group_dst)
    if w is not None:
        w.wait()


def recv(tensor, src=None, group=None, tag=0, group_src=None):
    """Receive into ``tensor``; returns the sender's rank."""
    MPI = _world.mpi
    g = _member(group, "recv")
    if g is None:
        return -1
    if src is None and group_src is None:  # any source: find the sender first, then receive
        st = MPI.Status()
        deadline = time.monotonic() + g.timeout
        while not g.comm.Iprobe(source=MPI.ANY_SOURCE, tag=tag, status=st):
            if time.monotonic() > deadline:
                raise RuntimeError(f"varlens.distributed: recv on rank {g.comm.Get_rank()} got no message within "
                                   f"the timeout of {g.timeout:g} s")
            time.sleep(1e-4)
        src = g.ranks[st.Get_source()]
    irecv(tensor, src, group, tag, group_src).wait()
    return src if src is not None else g.ranks[group_src]

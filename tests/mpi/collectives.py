"""Every collective of varlens.distributed against the answer computed in one process.

Run by tests/test_distributed.py as ``mpiexec -n 2 python tests/mpi/collectives.py``; each rank
builds every rank's input from a seeded generator, so it knows the single-process answer.
Prints ``OK collectives rank R`` on success (any failure raises, which aborts the job).
"""
import datetime

import numpy as np

import varlens
import varlens.distributed as dist

dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=20))
r, n = dist.get_rank(), dist.get_world_size()
assert dist.is_initialized() and dist.get_backend() == "mpi"


def inp(rank, shape=(3, 4), seed=0, dtype=np.float64):
    a = np.random.default_rng(seed * 100 + rank).standard_normal(shape) + 2.0
    return a.astype(dtype)


def same(t, want, what):
    got = t.numpy() if isinstance(t, varlens.Tensor) else np.asarray(t)
    if not np.allclose(got, want, rtol=1e-13, atol=0) or got.shape != np.shape(want):
        raise AssertionError(f"rank {r}: {what}: got {got} want {want}")


every = [inp(k) for k in range(n)]
# all_reduce with each op, in place, blocking and async
for op, want in ((dist.ReduceOp.SUM, sum(every)), (dist.ReduceOp.AVG, sum(every) / n),
                 (dist.ReduceOp.MAX, np.max(every, 0)), (dist.ReduceOp.MIN, np.min(every, 0)),
                 (dist.ReduceOp.PRODUCT, np.prod(every, 0))):
    t = varlens.tensor(every[r])
    assert dist.all_reduce(t, op=op) is None
    same(t, want, f"all_reduce {op}")
    t = varlens.tensor(every[r])
    w = dist.all_reduce(t, op=op, async_op=True)
    w.wait()
    assert w.is_completed()
    same(t, want, f"all_reduce async {op}")
ints = [np.arange(6, dtype=np.int64) * (k + 1) for k in range(n)]
t = varlens.tensor(ints[r])
dist.all_reduce(t)
same(t, sum(ints), "all_reduce int64")
assert t.dtype == varlens.int64
t = varlens.tensor(ints[r] % 2 == 0)
dist.all_reduce(t, op=dist.ReduceOp.BOR)
same(t, np.logical_or.reduce([a % 2 == 0 for a in ints]), "all_reduce BOR bool")
# a non-contiguous view: the result lands in its base
base = varlens.tensor(np.stack([every[r], every[r]]))
v = base[:, 1]
dist.all_reduce(v)
same(base[:, 1], np.stack([sum(every)[1]] * 2), "all_reduce on a view")
same(base[:, 0], np.stack([every[r][0]] * 2), "all_reduce on a view leaves the rest")
# reduce to rank 1 (dst is a global rank)
t = varlens.tensor(every[r])
dist.reduce(t, dst=n - 1, op=dist.ReduceOp.SUM)
same(t, sum(every) if r == n - 1 else every[r], "reduce")
# broadcast
t = varlens.tensor(every[r])
dist.broadcast(t, src=n - 1)
same(t, every[n - 1], "broadcast")
t = varlens.tensor(every[r])
dist.broadcast(t, src=0, async_op=True).wait()
same(t, every[0], "broadcast async")
# all_gather, all_gather_into_tensor
out = [varlens.zeros(3, 4, dtype=varlens.float64) for _ in range(n)]
dist.all_gather(out, varlens.tensor(every[r]))
for k in range(n):
    same(out[k], every[k], f"all_gather[{k}]")
o = varlens.zeros(n * 3, 4, dtype=varlens.float64)
dist.all_gather_into_tensor(o, varlens.tensor(every[r]))
same(o, np.concatenate(every), "all_gather_into_tensor")
objs = [None] * n
dist.all_gather_object(objs, {"rank": r})
assert objs == [{"rank": k} for k in range(n)], objs
# gather to rank 0, scatter from rank 0
gl = [varlens.zeros(3, 4, dtype=varlens.float64) for _ in range(n)] if r == 0 else None
dist.gather(varlens.tensor(every[r]), gl, dst=0)
if r == 0:
    for k in range(n):
        same(gl[k], every[k], f"gather[{k}]")
parts = [inp(k, seed=7) for k in range(n)]
t = varlens.zeros(3, 4, dtype=varlens.float64)
dist.scatter(t, [varlens.tensor(p) for p in parts] if r == 0 else None, src=0)
same(t, parts[r], "scatter")
# reduce_scatter: rank k gets sum over ranks of their chunk k
lists = [[inp(src, seed=10 + k) for k in range(n)] for src in range(n)]
t = varlens.zeros(3, 4, dtype=varlens.float64)
dist.reduce_scatter(t, [varlens.tensor(a) for a in lists[r]])
same(t, sum(lists[src][r] for src in range(n)), "reduce_scatter")
big = [inp(src, shape=(2 * n, 3), seed=20) for src in range(n)]
t = varlens.zeros(2, 3, dtype=varlens.float64)
dist.reduce_scatter_tensor(t, varlens.tensor(big[r]), op=dist.ReduceOp.AVG)
same(t, sum(big)[2 * r:2 * r + 2] / n, "reduce_scatter_tensor AVG")
# send/recv in a ring, and isend/irecv handles
nxt, prv = (r + 1) % n, (r - 1) % n
t = varlens.zeros(3, 4, dtype=varlens.float64)
if r % 2 == 0:
    dist.send(varlens.tensor(every[r]), dst=nxt)
    dist.recv(t, src=prv)
else:
    dist.recv(t, src=prv)
    dist.send(varlens.tensor(every[r]), dst=nxt)
same(t, every[prv], "send/recv")
t = varlens.zeros(3, 4, dtype=varlens.float64)
ws = [dist.isend(varlens.tensor(every[r]), dst=nxt, tag=3), dist.irecv(t, src=prv, tag=3)]
for w in ws:
    w.wait()
same(t, every[prv], "isend/irecv")
t = varlens.zeros(3, 4, dtype=varlens.float64)
if r == 0:
    got = dist.recv(t)  # any source returns the sender
    assert got == n - 1, got
    same(t, every[n - 1], "recv any source")
elif r == n - 1:
    dist.send(varlens.tensor(every[r]), dst=0)
# all_to_all_single: rank r's output chunk s is rank s's input chunk r
ins = [inp(src, shape=(2 * n, 3), seed=30) for src in range(n)]
o = varlens.zeros(2 * n, 3, dtype=varlens.float64)
dist.all_to_all_single(o, varlens.tensor(ins[r]))
same(o, np.concatenate([ins[s][2 * r:2 * r + 2] for s in range(n)]), "all_to_all_single")
# a work handle polled until it completes
t = varlens.tensor(every[r])
w = dist.all_reduce(t, async_op=True)
while not w.is_completed():
    pass
same(t, sum(every), "all_reduce polled with is_completed")
# subgroups: the group of rank 0 alone, the whole world again
g0 = dist.new_group([0])
t = varlens.tensor(every[r])
dist.all_reduce(t, group=g0)
same(t, every[r], "all_reduce in a one-rank group")
assert dist.get_rank(g0) == (0 if r == 0 else -1)
gw = dist.new_group(list(range(n)))
t = varlens.tensor(every[r])
dist.all_reduce(t, group=gw)
same(t, sum(every), "all_reduce in new_group(all)")
dist.barrier()
dist.barrier(async_op=True).wait()
# bad input
try:
    dist.all_reduce(np.ones(3))
except TypeError as e:
    assert "must be a Tensor" in str(e)
else:
    raise AssertionError("all_reduce accepted a NumPy array")
try:
    dist.all_reduce(varlens.tensor([1, 2]), op=dist.ReduceOp.AVG)
except ValueError as e:
    assert "AVG" in str(e)
else:
    raise AssertionError("AVG of ints accepted")
dist.destroy_process_group()
assert not dist.is_initialized()
print(f"OK collectives rank {r}", flush=True)

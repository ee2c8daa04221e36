"""2-rank DistributedDataParallel with local batch B/2 equals one process with batch B.

Run by tests/test_distributed.py under ``mpiexec -n 2``.  Every rank also trains the reference
model on the whole batch by itself (no communication), then compares: after k SGD-with-momentum
and k Adam steps, in float64, the parameters agree to a relative error of 1e-12.  Covered too:
one bucket per parameter (so buckets start during backward), a parameter used twice (several
gradient deliveries), no_sync() accumulation, find_unused_parameters, the 'module.' prefix.
"""
import copy
import datetime

import numpy as np

import varlens as torch
import varlens.distributed as dist
import varlens.nn as nn
import varlens.nn.functional as F
from varlens.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=30))
rank, world = dist.get_rank(), dist.get_world_size()
torch.set_default_dtype(torch.float64)
B, K = 8, 4


class Net(nn.Module):
    def __init__(self, unused_branch=False):
        super().__init__()
        self.fc1 = nn.Linear(5, 16)
        self.fc2 = nn.Linear(16, 16)
        self.out = nn.Linear(16, 3)
        self.scale = nn.Parameter(torch.tensor([0.7]))
        self.side = nn.Linear(5, 3) if unused_branch else None

    def forward(self, x, use_side=True, extra=False):
        if extra:  # out.bias used at the input too: a late delivery, after its bucket (the first) started
            x = x * (1 + 0.1 * self.out.bias.sum())
        h = torch.tanh(self.fc1(x))
        h = torch.tanh(self.fc2(h)) * self.scale * self.scale  # scale gets two deliveries
        y = self.out(h)
        if self.side is not None and use_side:
            y = y + self.side(x)
        return y


def rel_err(a, b):
    worst = 0.0
    for p, q in zip(a.parameters(), b.parameters()):
        x, y = p.detach().numpy(), q.detach().numpy()
        worst = max(worst, float(np.abs(x - y).max() / max(np.abs(y).max(), 1e-300)))
    return worst


rng = np.random.default_rng(0)
X = torch.tensor(rng.standard_normal((K, B, 5)))
Y = torch.tensor(rng.integers(0, 3, (K, B)))
lo, hi = rank * B // world, (rank + 1) * B // world

for opt_name, make_opt, cap in (("SGD", lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9), 25),
                                ("Adam", lambda ps: torch.optim.Adam(ps, lr=0.01), 1e-5)):
    torch.manual_seed(rank)  # different initial weights per rank: DDP must broadcast rank 0's
    model = Net()
    ref = copy.deepcopy(model)
    ddp = DDP(model, bucket_cap_mb=cap)
    if rank != 0:  # the reference starts from rank 0's weights, which DDP broadcast
        ref.load_state_dict(model.state_dict())
    assert len(ddp._buckets) == (1 if cap == 25 else 7), len(ddp._buckets)
    opt, ref_opt = make_opt(ddp.parameters()), make_opt(ref.parameters())
    for k in range(K):
        opt.zero_grad()
        F.cross_entropy(ddp(X[k, lo:hi]), Y[k, lo:hi]).backward()
        opt.step()
        ref_opt.zero_grad()
        F.cross_entropy(ref(X[k]), Y[k]).backward()
        ref_opt.step()
        # from the second step on, every bucket starts during the backward (counts learned)
        assert ddp._timing["early_buckets"] == (0 if k == 0 else len(ddp._buckets)), (k, ddp._timing)
    err = rel_err(model, ref)
    assert err <= 1e-12, f"rank {rank}: DDP {opt_name} differs from one process by {err:.3g}"
    print(f"rank {rank} {opt_name}: relative error {err:.2g} after {K} steps", flush=True)

# the graph changes between steps (out.bias also used at the input on odd steps): the bucket whose
# gradient arrives after it started is reduced again; and static_graph=True on a fixed graph
for static in (False, True):
    torch.manual_seed(0)
    model = Net()
    ref = copy.deepcopy(model)
    ddp = DDP(model, bucket_cap_mb=1e-5, static_graph=static)
    opt, ref_opt = torch.optim.SGD(ddp.parameters(), lr=0.1), torch.optim.SGD(ref.parameters(), lr=0.1)
    for k in range(K):
        extra = (k % 2 == 1) and not static
        opt.zero_grad()
        F.cross_entropy(ddp(X[k, lo:hi], extra=extra), Y[k, lo:hi]).backward()
        assert ddp._timing["redone_buckets"] == (1 if extra and k > 0 else 0), (k, ddp._timing)
        opt.step()
        ref_opt.zero_grad()
        F.cross_entropy(ref(X[k], extra=extra), Y[k]).backward()
        ref_opt.step()
    err = rel_err(model, ref)
    assert err <= 1e-12, f"rank {rank}: DDP with a changing graph (static={static}) differs by {err:.3g}"

# no_sync: two micro-batches accumulated locally, averaged once, equal one step on 2 x B
torch.manual_seed(0)
model = Net()
ref = copy.deepcopy(model)
ddp = DDP(model)
opt, ref_opt = torch.optim.SGD(ddp.parameters(), lr=0.1), torch.optim.SGD(ref.parameters(), lr=0.1)
for k in range(0, K, 2):
    opt.zero_grad()
    with ddp.no_sync():
        (F.cross_entropy(ddp(X[k, lo:hi]), Y[k, lo:hi]) / 2).backward()
    (F.cross_entropy(ddp(X[k + 1, lo:hi]), Y[k + 1, lo:hi]) / 2).backward()
    opt.step()
    ref_opt.zero_grad()
    (F.cross_entropy(ref(torch.cat([X[k], X[k + 1]])), torch.cat([Y[k], Y[k + 1]]))).backward()
    ref_opt.step()
err = rel_err(model, ref)
assert err <= 1e-12, f"rank {rank}: no_sync accumulation differs by {err:.3g}"

# find_unused_parameters: rank 1 skips the side branch; its gradient is rank 0's / world
torch.manual_seed(0)
model = Net(unused_branch=True)
ddp = DDP(model, find_unused_parameters=True)
F.cross_entropy(ddp(X[0, lo:hi], use_side=(rank == 0)), Y[0, lo:hi]).backward()
ref = copy.deepcopy(model)
for p in ref.parameters():
    p.grad = None
F.cross_entropy(ref(X[0, 0:B // world]), Y[0, 0:B // world]).backward()
want = ref.side.weight.grad.numpy() / world
got = model.side.weight.grad.numpy()
assert np.allclose(got, want, rtol=1e-12, atol=1e-15), (got, want)
# without find_unused_parameters, an unused parameter is an error naming it
ddp2 = DDP(Net(unused_branch=True))
try:
    F.cross_entropy(ddp2(X[0, lo:hi], use_side=False), Y[0, lo:hi]).backward()
except RuntimeError as e:
    assert "find_unused_parameters=True" in str(e) and "side.weight" in str(e), e
else:
    raise AssertionError("an unused parameter went unnoticed")
# state_dict: 'module.' prefix as torch; the module's own has none
assert all(k.startswith("module.") for k in ddp.state_dict()), list(ddp.state_dict())
assert "fc1.weight" in ddp.module.state_dict()
dist.barrier()
print(f"OK ddp rank {rank}", flush=True)

"""SyncBatchNorm over 2 ranks equals one process's BatchNorm over the whole batch.

Run by tests/test_distributed.py under ``mpiexec -n 2``.  Checked in float64: the output (each
rank's slice of it), the input gradient, the weight and bias gradients (summed over ranks), the
running statistics; then a small conv net with convert_sync_batchnorm inside DDP trains for k
SGD steps exactly as the BatchNorm net does on the full batch in one process.
"""
import copy
import datetime

import numpy as np

import varlens as torch
import varlens.distributed as dist
import varlens.nn as nn
import varlens.nn.functional as F

dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=30))
rank, world = dist.get_rank(), dist.get_world_size()
torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(1)
N = 6
x_full = rng.standard_normal((N, 3, 4, 5)) * 2 + 1
c_full = rng.standard_normal((N, 3, 4, 5))  # the loss is sum(y * c): a generic upstream gradient
lo, hi = rank * N // world, (rank + 1) * N // world


def close(a, b, what, tol=1e-12):
    a, b = np.asarray(a), np.asarray(b)
    err = np.abs(a - b).max() / max(np.abs(b).max(), 1e-300)
    assert err <= tol, f"rank {rank}: {what}: relative error {err:.3g}"


for affine in (True, False):
    ref = nn.BatchNorm2d(3, affine=affine)
    sync = nn.SyncBatchNorm(3, affine=affine)
    if affine:
        with torch.no_grad():
            ref.weight.copy_(torch.tensor([0.5, 1.5, -2.0]))
            ref.bias.copy_(torch.tensor([0.1, -0.2, 0.3]))
        sync.load_state_dict(ref.state_dict())
    xr = torch.tensor(x_full, requires_grad=True)
    yr = ref(xr)
    (yr * torch.tensor(c_full)).sum().backward()
    xs = torch.tensor(x_full[lo:hi], requires_grad=True)
    ys = sync(xs)
    (ys * torch.tensor(c_full[lo:hi])).sum().backward()
    close(ys.detach().numpy(), yr.detach().numpy()[lo:hi], "forward")
    close(xs.grad.numpy(), xr.grad.numpy()[lo:hi], "input gradient")
    close(sync.running_mean.numpy(), ref.running_mean.numpy(), "running_mean")
    close(sync.running_var.numpy(), ref.running_var.numpy(), "running_var")
    if affine:
        for name in ("weight", "bias"):
            g = getattr(sync, name).grad.clone()
            dist.all_reduce(g)
            close(g.numpy(), getattr(ref, name).grad.numpy(), f"{name} gradient (summed over ranks)")
    sync.eval()
    ref.eval()
    with torch.no_grad():
        close(sync(torch.tensor(x_full[lo:hi])).numpy(), ref(torch.tensor(x_full)).numpy()[lo:hi], "eval forward")

# DDP + convert_sync_batchnorm trains as BatchNorm on the whole batch
torch.manual_seed(0)
net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(80, 2))
ref = copy.deepcopy(net)
model = nn.parallel.DistributedDataParallel(nn.SyncBatchNorm.convert_sync_batchnorm(net))
assert isinstance(model.module[1], nn.SyncBatchNorm)
y_full = torch.tensor(rng.integers(0, 2, N))
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
X = torch.tensor(x_full)
for k in range(3):
    opt.zero_grad()
    F.cross_entropy(model(X[lo:hi]), y_full[lo:hi]).backward()
    opt.step()
    ref_opt.zero_grad()
    F.cross_entropy(ref(X), y_full).backward()
    ref_opt.step()
for (name, p), q in zip(model.module.named_parameters(), ref.parameters()):
    close(p.detach().numpy(), q.detach().numpy(), f"DDP+SyncBatchNorm parameter {name}")
close(model.module[1].running_var.numpy(), ref[1].running_var.numpy(), "DDP+SyncBatchNorm running_var")
print(f"OK syncbatchnorm rank {rank}", flush=True)

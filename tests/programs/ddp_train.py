"""A plain PyTorch DistributedDataParallel training script (nothing varlens-specific).

torchrun-style: ``torchrun --nproc-per-node 2 ddp_train.py OUT_DIR``; with varlens,
``mpiexec -n 2 python tests/programs/run_as.py varlens tests/programs/ddp_train.py OUT_DIR``.
Trains a small regression MLP on a DistributedSampler shard per rank, averages the epoch loss
across ranks, and rank 0 alone writes model.module.state_dict() each epoch; at the end every
rank loads the checkpoint back and checks it equals its own (the ranks stay in step).
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main(out_dir):
    dist.init_process_group(backend="gloo")
    rank = dist.get_rank()
    world = dist.get_world_size()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.manual_seed(0)
    X = torch.randn(512, 8)
    y = X @ torch.linspace(-1, 1, 8).unsqueeze(1) + 0.1 * torch.randn(512, 1)
    dataset = TensorDataset(X, y)
    sampler = DistributedSampler(dataset, shuffle=True, seed=42)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    torch.manual_seed(1 + rank)  # differs per rank on purpose: DDP starts everyone from rank 0's weights
    model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))
    ddp = DDP(model, device_ids=None)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.MSELoss()
    ckpt = os.path.join(out_dir, "model.pt")
    losses = []
    for epoch in range(4):
        sampler.set_epoch(epoch)
        total = torch.zeros(2)
        for xb, yb in loader:
            opt.zero_grad()
            loss = loss_fn(ddp(xb), yb)
            loss.backward()
            opt.step()
            total += torch.tensor([loss.item() * len(xb), len(xb)])
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
        losses.append((total[0] / total[1]).item())
        if rank == 0:
            print(f"epoch {epoch} loss {losses[-1]:.4f} (local rank {local_rank}, world {world})", flush=True)
            torch.save(ddp.module.state_dict(), ckpt)
        dist.barrier()
    state = torch.load(ckpt, map_location="cpu")
    for name, p in model.state_dict().items():
        assert torch.equal(state[name], p), f"rank {rank}: {name} differs from rank 0's checkpoint"
    assert losses[-1] < 0.5 * losses[0], losses
    if rank == 0:
        print(f"final loss {losses[-1]:.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])

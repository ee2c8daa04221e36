"""The Trainer under ``mpiexec -n 2``: rank 0 alone logs and checkpoints, and a run stopped
after one epoch and resumed (on every rank) ends exactly where an uninterrupted run ends.

``python tests/mpi/trainer_resume.py OUT_DIR`` (run by tests/test_distributed.py).
"""
import json
import os
import sys

import numpy as np

import varlens as torch
import varlens.distributed as dist
import varlens.nn as nn
from varlens.train import distributed as tdist
from varlens.train.trainer import Trainer, latest_checkpoint
from varlens.utils.data import DataLoader, TensorDataset

out = sys.argv[1]
assert tdist.init_from_launcher()
rank = dist.get_rank()
rng = np.random.default_rng(0)
X = torch.tensor(rng.standard_normal((96, 6)), dtype=torch.float32)
Y = torch.tensor(rng.integers(0, 3, 96))


def run(out_dir, epochs, resume=None):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 3))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    loader = DataLoader(TensorDataset(X, Y), batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(1))
    model, loader = tdist.wrap(model, loader, seed=1)
    tr = Trainer(model, opt, nn.CrossEntropyLoss(), out_dir=out_dir, progress=False)
    if resume == "latest":
        resume = tdist.broadcast_object(latest_checkpoint(out_dir))
    tr.fit(loader, None, epochs, resume=resume)
    return tdist.unwrap(model)


a = run(os.path.join(out, "a"), 2)
run(os.path.join(out, "b"), 1)
b = run(os.path.join(out, "b"), 2, resume="latest")
for (name, p), q in zip(a.named_parameters(), b.parameters()):
    assert torch.equal(p, q), f"rank {rank}: {name} differs between the resumed and the uninterrupted run"
dist.barrier()
if rank == 0:
    with open(os.path.join(out, "a", "metrics.jsonl")) as f:
        recs = [json.loads(line) for line in f]
    assert [r["epoch"] for r in recs] == [1, 2], recs  # one writer: rank 0
    assert os.path.exists(os.path.join(out, "a", "curves.png"))
print(f"OK trainer rank {rank}", flush=True)

"""A device-agnostic training script in the style of the PyTorch AMP recipe
(recipes/recipes/amp_recipe.py), the "gradient accumulation" idiom and the forward-hook
feature-extraction recipe, on a synthetic tabular classification task: torch.autocast with
device_type from the device (bfloat16 on CPU), torch.amp.GradScaler (enabled only on CUDA, its
scale/unscale_/step/update calls made all the same) and the legacy torch.cuda.amp.GradScaler
for comparison, loss / accumulation_steps with optimizer.step every k micro-batches,
unscale_ before clip_grad_norm_, torch.utils.checkpoint.checkpoint(use_reentrant=False) on
residual blocks, register_forward_hook collecting intermediate features (a dict keyed by
layer name, handle.remove()), register_full_backward_hook counting gradients,
torch.save of model/optimizer/scaler state to a temp file and resuming from it, a OneCycleLR
schedule, set_to_none zero_grad, and torch.set_float32_matmul_precision."""
import argparse
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser()
parser.add_argument('--seed', type=int, default=0)
parser.add_argument('--epochs', type=int, default=4)
parser.add_argument('--accum', type=int, default=4)
args = parser.parse_args()
torch.manual_seed(args.seed)
torch.set_float32_matmul_precision('high')

device = "cuda" if torch.cuda.is_available() else "cpu"
use_amp = True
amp_dtype = torch.float16 if device == "cuda" else torch.bfloat16


class Tabular(Dataset):
    """Four Gaussian clusters per class in 20 dims, 5 classes, some label noise."""

    def __init__(self, n, seed):
        rng = np.random.default_rng(seed)
        centers = np.random.default_rng(7).normal(0, 1.2, (5, 4, 20))
        self.y = rng.integers(0, 5, n)
        k = rng.integers(0, 4, n)
        self.x = (centers[self.y, k] + rng.normal(0, 1, (n, 20))).astype(np.float32)
        flip = rng.random(n) < 0.05
        self.y = np.where(flip, rng.integers(0, 5, n), self.y)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return torch.tensor(self.x[i]), torch.tensor(self.y[i], dtype=torch.long)


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 2 * d)
        self.fc2 = nn.Linear(2 * d, d)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class Net(nn.Module):
    def __init__(self, d_in=20, d=64, n_blocks=3, n_classes=5, use_checkpoint=True):
        super().__init__()
        self.inp = nn.Linear(d_in, d)
        self.blocks = nn.ModuleList([Block(d) for _ in range(n_blocks)])
        self.head = nn.Linear(d, n_classes)
        self.use_checkpoint = use_checkpoint

    def forward(self, x):
        x = self.inp(x)
        for blk in self.blocks:
            if self.use_checkpoint and self.training:
                x = checkpoint(blk, x, use_reentrant=False)
            else:
                x = blk(x)
        return self.head(x)


train_loader = DataLoader(Tabular(2048, 0), batch_size=32, shuffle=True, num_workers=0, pin_memory=False)
test_set = Tabular(512, 1)
test_x = torch.stack([test_set[i][0] for i in range(len(test_set))])
test_y = torch.tensor(test_set.y)


def run(use_checkpoint, scaler_kind):
    torch.manual_seed(args.seed)
    model = Net(use_checkpoint=use_checkpoint).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    steps = args.epochs * len(train_loader) // args.accum
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=3e-3, total_steps=steps)
    if scaler_kind == "amp":
        scaler = torch.amp.GradScaler(device, enabled=(device == "cuda"))
    else:
        scaler = torch.cuda.amp.GradScaler(enabled=torch.cuda.is_available())
    n_backward = [0]
    hook = model.head.register_full_backward_hook(lambda m, gin, gout: n_backward.__setitem__(0, n_backward[0] + 1))
    for epoch in range(args.epochs):
        model.train()
        optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for i, (x, y) in enumerate(train_loader):
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            with torch.autocast(device_type=device, dtype=amp_dtype, enabled=use_amp):
                output = model(x)
                loss = F.cross_entropy(output, y)
            assert loss.dtype == torch.float32, loss.dtype
            scaler.scale(loss / args.accum).backward()
            total += loss.item()
            if (i + 1) % args.accum == 0:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad(set_to_none=True)
                scheduler.step()
        print(f"checkpoint={use_checkpoint} {scaler_kind}: epoch {epoch} train loss {total / len(train_loader):.4f}")
    hook.remove()
    assert n_backward[0] == args.epochs * len(train_loader), n_backward
    return model, optimizer, scaler, scheduler


model, optimizer, scaler, scheduler = run(True, "amp")

# save and resume, as the AMP recipe does
path = os.path.join(tempfile.mkdtemp(), "ckpt.pt")
torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scaler": scaler.state_dict(),
            "scheduler": scheduler.state_dict()}, path)
checkpoint_ = torch.load(path, map_location=device)
model2 = Net().to(device)
model2.load_state_dict(checkpoint_["model"])
opt2 = torch.optim.AdamW(model2.parameters(), lr=3e-3, weight_decay=0.01)
opt2.load_state_dict(checkpoint_["optimizer"])
scaler2 = torch.amp.GradScaler(device, enabled=(device == "cuda"))
scaler2.load_state_dict(checkpoint_["scaler"])

# feature extraction with forward hooks
features = {}


def get_features(name):
    def hook(model, input, output):
        features[name] = output.detach()
    return hook


handles = [model2.blocks[i].register_forward_hook(get_features(f"block{i}")) for i in range(3)]
model2.eval()
with torch.no_grad():
    logits = model2(test_x.to(device))
for h in handles:
    h.remove()
assert sorted(features) == ["block0", "block1", "block2"] and features["block2"].shape == (512, 64)
test_loss = F.cross_entropy(logits, test_y).item()
# a linear probe on the first block's features, closed form (ridge regression to one-hot)
f0 = torch.cat([features["block0"], torch.ones(512, 1)], 1)
Y = F.one_hot(test_y, 5).float()
W = torch.linalg.solve(f0.T @ f0 + 1e-1 * torch.eye(65), f0.T @ Y)
probe_acc = ((f0 @ W).argmax(1) == test_y).float().mean().item()

# the checkpoint-free, legacy-scaler run reaches the same loss (the same seed, the same numbers)
model_nc, _, _, _ = run(False, "cuda")
model_nc.eval()
with torch.no_grad():
    test_loss_nc = F.cross_entropy(model_nc(test_x), test_y).item()
assert abs(test_loss_nc - test_loss) < 0.05, (test_loss, test_loss_nc)
print(f"test loss {test_loss:.4f} (without checkpointing {test_loss_nc:.4f}), block0 ridge-probe acc {probe_acc:.3f}")
print(f"final_loss: {test_loss:.6f}")

"""SimCLR-style contrastive pre-training (the NT-Xent loss as in sthalles/SimCLR and the
PyTorch Lightning/UvA tutorial), on small synthetic images with tensor-made augmentations,
followed by a linear probe on the frozen features.  Exercises F.normalize, x @ x.T similarity
matrices, torch.eye(dtype=torch.bool) masks with masked_fill(-inf) / masked_fill_(-9e15),
torch.roll, torch.arange labels with cross_entropy over similarities / temperature, torch.flip
and random crops as augmentations, a projection head dropped for the probe, a cosine
schedule (CosineAnnealingLR), requires_grad_(False) and top-1 accuracy via argsort."""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset, TensorDataset

from _synthetic import digits

parser = argparse.ArgumentParser()
parser.add_argument('--seed', type=int, default=1)
parser.add_argument('--epochs', type=int, default=4)
parser.add_argument('--temperature', type=float, default=0.2)
args = parser.parse_args()
torch.manual_seed(args.seed)
device = "cuda" if torch.cuda.is_available() else "cpu"


class ContrastiveTransformations(object):
    def __init__(self, n_views=2):
        self.n_views = n_views

    def __call__(self, x):
        return [self.augment(x) for _ in range(self.n_views)]

    @staticmethod
    def augment(x):
        if torch.rand(1).item() < 0.5:
            x = torch.flip(x, dims=[-1])
        pad = F.pad(x.unsqueeze(0), (2, 2, 2, 2), mode='reflect').squeeze(0)
        i, j = torch.randint(0, 5, (2,)).tolist()
        x = pad[:, i:i + 16, j:j + 16]
        x = x * (0.8 + 0.4 * torch.rand(1)) + 0.1 * torch.randn_like(x)
        return x


class ContrastiveDataset(Dataset):
    def __init__(self, images, transform):
        self.images = images
        self.transform = transform

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        return self.transform(self.images[idx]), 0


def encoder():
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d(1), nn.Flatten())


class SimCLR(nn.Module):
    def __init__(self, hidden_dim=32, temperature=0.2):
        super().__init__()
        self.temperature = temperature
        self.convnet = encoder()
        self.head = nn.Sequential(nn.Linear(32, 64), nn.ReLU(inplace=True), nn.Linear(64, hidden_dim))

    def info_nce_loss(self, imgs):
        feats = self.head(self.convnet(imgs))
        # Calculate cosine similarity
        cos_sim = F.cosine_similarity(feats[:, None, :], feats[None, :, :], dim=-1)
        # Mask out cosine similarity to itself
        self_mask = torch.eye(cos_sim.shape[0], dtype=torch.bool, device=cos_sim.device)
        cos_sim.masked_fill_(self_mask, -9e15)
        # Find positive example -> batch_size//2 away from the original example
        pos_mask = self_mask.roll(shifts=cos_sim.shape[0] // 2, dims=0)
        # InfoNCE loss
        cos_sim = cos_sim / self.temperature
        nll = -cos_sim[pos_mask] + torch.logsumexp(cos_sim, dim=-1)
        nll = nll.mean()
        # ranking of the positive example
        comb_sim = torch.cat([cos_sim[pos_mask][:, None], cos_sim.masked_fill(pos_mask, -9e15)], dim=-1)
        sim_argsort = comb_sim.argsort(dim=-1, descending=True).argmin(dim=-1)
        return nll, (sim_argsort == 0).float().mean()


def nt_xent(z1, z2, temperature):
    """sthalles/SimCLR's formulation: logits over 2N-1 candidates, label 0 is the positive."""
    z = F.normalize(torch.cat([z1, z2], dim=0), dim=1)
    n = z1.shape[0]
    labels = torch.cat([torch.arange(n) for _ in range(2)], dim=0)
    labels = (labels.unsqueeze(0) == labels.unsqueeze(1)).float()
    similarity_matrix = torch.matmul(z, z.T)
    mask = torch.eye(labels.shape[0], dtype=torch.bool)
    labels = labels[~mask].view(labels.shape[0], -1)
    similarity_matrix = similarity_matrix[~mask].view(similarity_matrix.shape[0], -1)
    positives = similarity_matrix[labels.bool()].view(labels.shape[0], -1)
    negatives = similarity_matrix[~labels.bool()].view(similarity_matrix.shape[0], -1)
    logits = torch.cat([positives, negatives], dim=1) / temperature
    target = torch.zeros(logits.shape[0], dtype=torch.long)
    return F.cross_entropy(logits, target)


x, y = digits(640, seed=0, size=16, block=2)
images = torch.from_numpy(x)
train_set = ContrastiveDataset(images[:512], ContrastiveTransformations(2))
loader = DataLoader(train_set, batch_size=64, shuffle=True, drop_last=True)

model = SimCLR(temperature=args.temperature).to(device)
optimizer = optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs * len(loader), eta_min=3e-4)

for epoch in range(args.epochs):
    model.train()
    tot, acc_sum, n = 0.0, 0.0, 0
    for (views, _) in loader:
        imgs = torch.cat(views, dim=0).to(device)
        loss, acc = model.info_nce_loss(imgs)
        # the second formulation must agree with the first up to the -9e15 vs. dropped diagonal
        with torch.no_grad():
            feats = model.head(model.convnet(imgs))
            alt = nt_xent(feats[:64], feats[64:], args.temperature)
        assert abs(alt.item() - loss.item()) < 1e-3 * max(1.0, loss.item()), (alt.item(), loss.item())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
        tot += loss.item(); acc_sum += acc.item(); n += 1
    print(f"epoch {epoch}: nt-xent {tot / n:.4f}  top-1 positive {acc_sum / n:.3f}")

# linear probe on frozen features (projection head dropped)
model.eval()
for p in model.convnet.parameters():
    p.requires_grad_(False)
with torch.no_grad():
    feats = model.convnet(images).detach()
labels = torch.from_numpy(y)
probe = nn.Linear(32, 10)
popt = optim.LBFGS(probe.parameters(), lr=1, max_iter=50, history_size=10)
train_feats, train_labels = feats[:512], labels[:512]
mu, sd = train_feats.mean(0, keepdim=True), train_feats.std(0, keepdim=True) + 1e-6


def closure():
    popt.zero_grad()
    out = probe((train_feats - mu) / sd)
    l = F.cross_entropy(out, train_labels) + 1e-3 * probe.weight.pow(2).sum()
    l.backward()
    return l


for _ in range(2):
    popt.step(closure)
with torch.no_grad():
    logits = probe((feats[512:] - mu) / sd)
    test_loss = F.cross_entropy(logits, labels[512:]).item()
    test_acc = (logits.argmax(1) == labels[512:]).float().mean().item()
print(f"probe test loss {test_loss:.4f} acc {test_acc:.3f}")
print(f"final_loss: {tot / n:.6f}")

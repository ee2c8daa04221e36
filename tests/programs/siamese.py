"""Metric learning with a Siamese / triplet network, in the style of adambielski/siamese-triplet
and the official examples/siamese_network: an embedding net shared by the anchor, positive and
negative branches, nn.TripletMarginLoss(margin, p=2), nn.TripletMarginWithDistanceLoss with a
cosine distance (1 - F.cosine_similarity), online hard-negative mining inside the batch
(torch.cdist, masks from label equality, masked_fill with inf, min/max along dim), a
contrastive pair loss with F.pairwise_distance and nn.CosineEmbeddingLoss, a BCE-with-logits
"same class?" head on |e1 - e2| (the official example's SiameseNetwork), a sampler of
triplets from a Dataset, Adadelta with StepLR(gamma=0.7) as in the official example, and a
nearest-centroid evaluation of the embedding."""
import argparse
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, Dataset

from _synthetic import digits

parser = argparse.ArgumentParser(description='PyTorch Siamese network Example')
parser.add_argument('--seed', type=int, default=1)
parser.add_argument('--epochs', type=int, default=3)
parser.add_argument('--lr', type=float, default=1.0)
parser.add_argument('--gamma', type=float, default=0.7)
args = parser.parse_args()
torch.manual_seed(args.seed)
random.seed(args.seed)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

x_all, y_all = digits(900, seed=11, size=16, block=2)
x_train, y_train = torch.from_numpy(x_all[:600]), torch.from_numpy(y_all[:600])
x_test, y_test = torch.from_numpy(x_all[600:]), torch.from_numpy(y_all[600:])


class TripletDataset(Dataset):
    """Each item: (anchor, positive of the same class, negative of another class)."""

    def __init__(self, x, y):
        self.x, self.y = x, y
        self.by_class = {c: torch.where(y == c)[0].tolist() for c in range(10)}

    def __len__(self):
        return len(self.y)

    def __getitem__(self, index):
        label = self.y[index].item()
        pos = random.choice(self.by_class[label])
        neg_label = random.choice([c for c in range(10) if c != label])
        neg = random.choice(self.by_class[neg_label])
        return self.x[index], self.x[pos], self.x[neg], label


class EmbeddingNet(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.convnet = nn.Sequential(nn.Conv2d(1, 16, 3), nn.PReLU(), nn.MaxPool2d(2, stride=2),
                                     nn.Conv2d(16, 32, 3), nn.PReLU(), nn.MaxPool2d(2, stride=2))
        self.fc = nn.Sequential(nn.Linear(32 * 2 * 2, 64), nn.PReLU(), nn.Linear(64, dim))

    def forward(self, x):
        output = self.convnet(x)
        output = output.view(output.size()[0], -1)
        return self.fc(output)


class TripletNet(nn.Module):
    def __init__(self, embedding_net):
        super(TripletNet, self).__init__()
        self.embedding_net = embedding_net

    def forward(self, x1, x2, x3):
        return self.embedding_net(x1), self.embedding_net(x2), self.embedding_net(x3)

    def get_embedding(self, x):
        return self.embedding_net(x)


class SiameseHead(nn.Module):
    """The official example's 'same or different' head on a pair of embeddings."""

    def __init__(self, dim=16):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(inplace=True), nn.Linear(32, 1))
        self.sigmoid = nn.Sigmoid()

    def forward(self, e1, e2):
        return self.fc(torch.abs(e1 - e2))


def batch_hard_triplet_loss(embeddings, labels, margin):
    dist = torch.cdist(embeddings, embeddings, p=2)
    same = labels.unsqueeze(0) == labels.unsqueeze(1)
    eye = torch.eye(len(labels), dtype=torch.bool, device=embeddings.device)
    hardest_pos = dist.masked_fill(~same | eye, 0.0).max(dim=1).values
    hardest_neg = dist.masked_fill(same, float('inf')).min(dim=1).values
    return F.relu(hardest_pos - hardest_neg + margin).mean()


def contrastive_loss(e1, e2, target, margin=1.0):
    d = F.pairwise_distance(e1, e2, keepdim=False)
    return (target * d.pow(2) + (1 - target) * F.relu(margin - d).pow(2)).mean() / 2


train_loader = DataLoader(TripletDataset(x_train, y_train), batch_size=50, shuffle=True)
model = TripletNet(EmbeddingNet()).to(device)
head = SiameseHead().to(device)
optimizer = optim.Adadelta(list(model.parameters()) + list(head.parameters()), lr=args.lr)
scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
triplet = nn.TripletMarginLoss(margin=1.0, p=2)
cos_triplet = nn.TripletMarginWithDistanceLoss(distance_function=lambda a, b: 1.0 - F.cosine_similarity(a, b),
                                               margin=0.5)
cos_embed = nn.CosineEmbeddingLoss(margin=0.2)
bce = nn.BCEWithLogitsLoss()

for epoch in range(1, args.epochs + 1):
    model.train()
    head.train()
    totals = np.zeros(5)
    for batch_idx, (a, p, n, lab) in enumerate(train_loader):
        a, p, n, lab = a.to(device), p.to(device), n.to(device), lab.to(device)
        optimizer.zero_grad()
        ea, ep, en = model(a, p, n)
        l_trip = triplet(ea, ep, en)
        l_cos = cos_triplet(ea, ep, en)
        l_hard = batch_hard_triplet_loss(torch.cat([ea, ep]), torch.cat([lab, lab]), 1.0)
        ones = torch.ones(a.size(0), device=device)
        l_pair = contrastive_loss(ea, ep, ones) + contrastive_loss(ea, en, torch.zeros_like(ones)) \
            + cos_embed(torch.cat([ea, ea]), torch.cat([ep, en]), torch.cat([ones, -ones]))
        logits = torch.cat([head(ea, ep), head(ea, en)]).squeeze(1)
        l_bce = bce(logits, torch.cat([ones, torch.zeros_like(ones)]))
        loss = l_trip + 0.5 * l_cos + 0.2 * l_hard + 0.5 * l_pair + l_bce
        loss.backward()
        optimizer.step()
        totals += [l_trip.item(), l_cos.item(), l_hard.item(), l_pair.item(), l_bce.item()]
    scheduler.step()
    t = totals / len(train_loader)
    print(f"epoch {epoch}: triplet {t[0]:.4f} cosine-triplet {t[1]:.4f} batch-hard {t[2]:.4f} "
          f"pair {t[3]:.4f} bce {t[4]:.4f}")

# evaluate: nearest class centroid of the embeddings, and the triplet loss on fixed test triplets
model.eval()
with torch.no_grad():
    emb_train = model.get_embedding(x_train)
    emb_test = model.get_embedding(x_test)
    centroids = torch.stack([emb_train[y_train == c].mean(0) for c in range(10)])
    pred = torch.cdist(emb_test, centroids).argmin(1)
    acc = (pred == y_test).float().mean().item()
    g = torch.Generator().manual_seed(0)
    pos_idx = torch.tensor([random.Random(i).choice(torch.where(y_test == y_test[i])[0].tolist()) for i in range(300)])
    neg_idx = torch.tensor([random.Random(i + 1).choice(torch.where(y_test != y_test[i])[0].tolist()) for i in range(300)])
    test_loss = triplet(emb_test, emb_test[pos_idx], emb_test[neg_idx]).item()
print(f"nearest-centroid accuracy {acc:.3f}  test triplet loss {test_loss:.4f}")
print(f"final_loss: {t.sum():.6f}")

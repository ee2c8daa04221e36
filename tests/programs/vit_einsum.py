"""A small Vision Transformer in the style of the widely copied from-scratch ViT implementations
(vit-pytorch / the "ViT from scratch" tutorials), with attention written in torch.einsum
('bhid,bhjd->bhij'), patch embedding by unfold + reshape, a learned cls token and positional
embedding (nn.Parameter(torch.randn)), nn.LayerNorm, nn.GELU, AdamW with a linear warmup
LambdaLR, and training under torch.autocast('cpu', dtype=torch.bfloat16) (bfloat16 matmuls,
float32 parameters and loss).  Offline synthetic digits replace MNIST."""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from _synthetic import digits

parser = argparse.ArgumentParser()
parser.add_argument('--seed', type=int, default=0)
parser.add_argument('--epochs', type=int, default=3)
parser.add_argument('--no-autocast', action='store_true')
args = parser.parse_args()
torch.manual_seed(args.seed)


class Attention(nn.Module):
    def __init__(self, dim, heads=4, dim_head=16, dropout=0.):
        super().__init__()
        inner_dim = dim_head * heads
        self.heads = heads
        self.scale = dim_head ** -0.5
        self.norm = nn.LayerNorm(dim)
        self.attend = nn.Softmax(dim=-1)
        self.dropout = nn.Dropout(dropout)
        self.to_qkv = nn.Linear(dim, inner_dim * 3, bias=False)
        self.to_out = nn.Sequential(nn.Linear(inner_dim, dim), nn.Dropout(dropout))

    def forward(self, x):
        x = self.norm(x)
        b, n, _ = x.shape
        qkv = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = map(lambda t: t.reshape(b, n, self.heads, -1).transpose(1, 2), qkv)
        dots = torch.einsum('bhid,bhjd->bhij', q, k) * self.scale
        attn = self.attend(dots)
        attn = self.dropout(attn)
        out = torch.einsum('bhij,bhjd->bhid', attn, v)
        out = out.transpose(1, 2).reshape(b, n, -1)
        return self.to_out(out)


class FeedForward(nn.Module):
    def __init__(self, dim, hidden_dim, dropout=0.):
        super().__init__()
        self.net = nn.Sequential(
            nn.LayerNorm(dim), nn.Linear(dim, hidden_dim), nn.GELU(), nn.Dropout(dropout),
            nn.Linear(hidden_dim, dim), nn.Dropout(dropout))

    def forward(self, x):
        return self.net(x)


class ViT(nn.Module):
    def __init__(self, image_size=28, patch_size=7, num_classes=10, dim=32, depth=2, heads=4,
                 mlp_dim=64, channels=1):
        super().__init__()
        self.patch_size = patch_size
        num_patches = (image_size // patch_size) ** 2
        patch_dim = channels * patch_size ** 2
        self.to_patch_embedding = nn.Sequential(nn.LayerNorm(patch_dim), nn.Linear(patch_dim, dim), nn.LayerNorm(dim))
        self.pos_embedding = nn.Parameter(torch.randn(1, num_patches + 1, dim) * 0.02)
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim))
        self.layers = nn.ModuleList([])
        for _ in range(depth):
            self.layers.append(nn.ModuleList([Attention(dim, heads=heads, dim_head=dim // heads),
                                              FeedForward(dim, mlp_dim)]))
        self.norm = nn.LayerNorm(dim)
        self.mlp_head = nn.Linear(dim, num_classes)

    def forward(self, img):
        p = self.patch_size
        patches = F.unfold(img, kernel_size=p, stride=p).transpose(1, 2)   # b, n, c*p*p
        x = self.to_patch_embedding(patches)
        b, n, _ = x.shape
        cls_tokens = self.cls_token.expand(b, -1, -1)
        x = torch.cat((cls_tokens, x), dim=1)
        x = x + self.pos_embedding[:, :(n + 1)]
        for attn, ff in self.layers:
            x = attn(x) + x
            x = ff(x) + x
        x = self.norm(x)
        return self.mlp_head(x[:, 0])


x, y = digits(512, seed=0)
xt, yt = digits(256, seed=1)
train_loader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(torch.from_numpy(x), torch.from_numpy(y)), batch_size=32, shuffle=True)
test_x, test_y = torch.from_numpy(xt), torch.from_numpy(yt)

model = ViT()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.05)
total_steps = args.epochs * len(train_loader)
warmup = 8
scheduler = torch.optim.lr_scheduler.LambdaLR(
    optimizer, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * s / total_steps)))

for epoch in range(args.epochs):
    model.train()
    for i, (data, target) in enumerate(train_loader):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast('cpu', dtype=torch.bfloat16, enabled=not args.no_autocast):
            logits = model(data)
            loss = F.cross_entropy(logits, target)
        assert loss.dtype == torch.float32, loss.dtype     # autocast computes the loss in float32
        loss.backward()
        optimizer.step()
        scheduler.step()
        if i % 8 == 0:
            print(f'epoch {epoch} step {i} loss {loss.item():.4f} lr {scheduler.get_last_lr()[0]:.5f}')

model.eval()
with torch.no_grad(), torch.autocast('cpu', dtype=torch.bfloat16, enabled=not args.no_autocast):
    logits = model(test_x)
    test_loss = F.cross_entropy(logits.float(), test_y).item()
    acc = (logits.argmax(-1) == test_y).float().mean().item()
print(f'test loss {test_loss:.4f} accuracy {acc:.3f}')
print(f"final_loss: {test_loss:.6f}")

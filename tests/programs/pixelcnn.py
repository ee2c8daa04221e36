"""PixelCNN (van den Oord et al. 2016) on small binarised digit images, in the style of the
public implementations (jzbontar/pixelcnn-pytorch, the UvA DL tutorial 12): MaskedConv2d
subclassing nn.Conv2d with a type-'A' / type-'B' mask registered as a buffer
(register_buffer('mask', self.weight.data.clone()), mask.fill_(1), slice assignment of zeros)
and applied in forward by self.weight.data *= self.mask, BatchNorm2d, a 256-way... here 2-way
per-pixel softmax trained with F.cross_entropy over (N, C, H, W) logits, nats-per-dim
reporting, and autoregressive sampling pixel by pixel with torch.multinomial under
torch.no_grad.  Also a check that the masked net's output at a pixel does not depend on later
pixels (gradient of one output w.r.t. the input through autograd.grad)."""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from _synthetic import digits

parser = argparse.ArgumentParser()
parser.add_argument('--seed', type=int, default=0)
parser.add_argument('--epochs', type=int, default=3)
args = parser.parse_args()
torch.manual_seed(args.seed)
device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')


class MaskedConv2d(nn.Conv2d):
    def __init__(self, mask_type, *args, **kwargs):
        super(MaskedConv2d, self).__init__(*args, **kwargs)
        assert mask_type in {'A', 'B'}
        self.register_buffer('mask', self.weight.data.clone())
        _, _, kH, kW = self.weight.size()
        self.mask.fill_(1)
        self.mask[:, :, kH // 2, kW // 2 + (mask_type == 'B'):] = 0
        self.mask[:, :, kH // 2 + 1:] = 0

    def forward(self, x):
        self.weight.data *= self.mask
        return super(MaskedConv2d, self).forward(x)


fm = 16
net = nn.Sequential(
    MaskedConv2d('A', 1, fm, 7, 1, 3, bias=False), nn.BatchNorm2d(fm), nn.ReLU(True),
    MaskedConv2d('B', fm, fm, 5, 1, 2, bias=False), nn.BatchNorm2d(fm), nn.ReLU(True),
    MaskedConv2d('B', fm, fm, 5, 1, 2, bias=False), nn.BatchNorm2d(fm), nn.ReLU(True),
    MaskedConv2d('B', fm, fm, 3, 1, 1, bias=False), nn.BatchNorm2d(fm), nn.ReLU(True),
    nn.Conv2d(fm, 2, 1)).to(device)
assert sum(1 for n, _ in net.named_buffers() if n.endswith('mask')) == 4

x, _ = digits(600, seed=4, size=12, block=2)
data = (torch.from_numpy(x) > 0.5).float()
train = DataLoader(TensorDataset(data[:500]), batch_size=50, shuffle=True)
test = DataLoader(TensorDataset(data[500:]), batch_size=100, shuffle=False)
optimizer = torch.optim.Adam(net.parameters(), lr=3e-3)

for epoch in range(args.epochs):
    err_tr = []
    net.train(True)
    for (input,) in train:
        input = input.to(device)
        target = input[:, 0].long()
        loss = F.cross_entropy(net(input), target)
        err_tr.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    err_te = []
    net.train(False)
    with torch.no_grad():
        for (input,) in test:
            input = input.to(device)
            target = input[:, 0].long()
            err_te.append(F.cross_entropy(net(input), target).item())
    print(f"epoch {epoch}: train {np.mean(err_tr):.4f} nats/dim  test {np.mean(err_te):.4f} nats/dim")

# causality: the logits at pixel (5, 6) must not depend on pixels at or after it in raster order
net.eval()
inp = data[:2].clone().requires_grad_(True)
out = net(inp)
g, = torch.autograd.grad(out[:, 1, 5, 6].sum(), inp)
later = torch.zeros(12, 12, dtype=torch.bool)
later[5, 6:] = True
later[6:] = True
# (zero up to rounding: a Winograd or FFT convolution leaves ~1e-12 where the weights are 0)
assert g[:, 0][:, later].abs().max().item() <= 1e-6 * g.abs().max().item()
assert g[:, 0][:, ~later].abs().sum().item() > 0

sample = torch.zeros(4, 1, 12, 12, device=device)
with torch.no_grad():
    for i in range(12):
        for j in range(12):
            probs = F.softmax(net(sample)[:, :, i, j], dim=1)
            sample[:, :, i, j] = torch.multinomial(probs, 1).float()
print('sampled foreground fraction', sample.mean().item(), 'data', data.mean().item())
print(f"final_loss: {np.mean(err_te):.6f}")

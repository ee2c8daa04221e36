"""A RealNVP normalizing flow on 2-D "two moons" data, in the style of the many public notebooks
(e.g. senya-ashukha/real-nvp-pytorch, the UvA DL tutorial 11): affine coupling layers with
alternating binary masks registered as buffers, scale = tanh-bounded net output, the
log-determinant as the sum of the scales, a torch.distributions.MultivariateNormal prior
(log_prob and sample), a torch.distributions.Normal / Independent check of the same
log-density, the inverse pass for sampling, nn.ModuleList of coupling nets, Adam with
weight decay and an ExponentialLR schedule; the reported loss is the test negative
log-likelihood in nats per sample."""
import argparse

import numpy as np
import torch
import torch.nn as nn
from torch import distributions

parser = argparse.ArgumentParser()
parser.add_argument('--seed', type=int, default=0)
parser.add_argument('--steps', type=int, default=300)
args = parser.parse_args()
torch.manual_seed(args.seed)
device = "cuda" if torch.cuda.is_available() else "cpu"


def make_moons(n, noise, rng):
    t = rng.uniform(0, np.pi, n)
    upper = rng.random(n) < 0.5
    x = np.where(upper, np.cos(t), 1 - np.cos(t))
    y = np.where(upper, np.sin(t), 0.5 - np.sin(t))
    pts = np.stack([x, y], 1) + rng.normal(0, noise, (n, 2))
    return ((pts - [0.5, 0.25]) / [0.87, 0.5]).astype(np.float32)


class RealNVP(nn.Module):
    def __init__(self, nets, nett, mask, prior):
        super(RealNVP, self).__init__()
        self.prior = prior
        self.register_buffer('mask', mask)
        self.t = torch.nn.ModuleList([nett() for _ in range(len(mask))])
        self.s = torch.nn.ModuleList([nets() for _ in range(len(mask))])

    def g(self, z):
        x = z
        for i in range(len(self.t)):
            x_ = x * self.mask[i]
            s = self.s[i](x_) * (1 - self.mask[i])
            t = self.t[i](x_) * (1 - self.mask[i])
            x = x_ + (1 - self.mask[i]) * (x * torch.exp(s) + t)
        return x

    def f(self, x):
        log_det_J, z = x.new_zeros(x.shape[0]), x
        for i in reversed(range(len(self.t))):
            z_ = self.mask[i] * z
            s = self.s[i](z_) * (1 - self.mask[i])
            t = self.t[i](z_) * (1 - self.mask[i])
            z = (1 - self.mask[i]) * (z - t) * torch.exp(-s) + z_
            log_det_J -= s.sum(dim=1)
        return z, log_det_J

    def log_prob(self, x):
        z, logp = self.f(x)
        return self.prior.log_prob(z) + logp

    def sample(self, batchSize):
        z = self.prior.sample((batchSize, 1))
        x = self.g(z)
        return x


nets = lambda: nn.Sequential(nn.Linear(2, 64), nn.LeakyReLU(), nn.Linear(64, 64), nn.LeakyReLU(),
                             nn.Linear(64, 2), nn.Tanh())
nett = lambda: nn.Sequential(nn.Linear(2, 64), nn.LeakyReLU(), nn.Linear(64, 64), nn.LeakyReLU(),
                             nn.Linear(64, 2))
masks = torch.from_numpy(np.array([[0, 1], [1, 0]] * 3).astype(np.float32))
prior = distributions.MultivariateNormal(torch.zeros(2), torch.eye(2))
flow = RealNVP(nets, nett, masks, prior).to(device)

# the prior's density three ways
z = torch.randn(5, 2)
lp1 = prior.log_prob(z)
lp2 = distributions.Independent(distributions.Normal(torch.zeros(2), torch.ones(2)), 1).log_prob(z)
lp3 = distributions.Normal(0.0, 1.0).log_prob(z).sum(-1)
assert torch.allclose(lp1, lp2, atol=1e-5) and torch.allclose(lp1, lp3, atol=1e-5)

rng = np.random.default_rng(0)
train = torch.from_numpy(make_moons(4000, 0.05, rng))
test = torch.from_numpy(make_moons(1000, 0.05, rng))
optimizer = torch.optim.Adam([p for p in flow.parameters() if p.requires_grad == True], lr=2e-3, weight_decay=1e-6)
scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.996)
assert sum(1 for _ in flow.buffers()) == 1 and 'mask' in flow.state_dict()

for t in range(args.steps):
    idx = torch.randint(0, train.size(0), (128,))
    x = train[idx]
    loss = -flow.log_prob(x).mean()
    optimizer.zero_grad()
    loss.backward(retain_graph=True)
    optimizer.step()
    scheduler.step()
    if t % 100 == 0:
        print('iter %s:' % t, 'loss = %.3f' % loss)

flow.eval()
with torch.no_grad():
    test_nll = -flow.log_prob(test).mean().item()
    # invertibility: g(f(x)) == x
    z, _ = flow.f(test[:100])
    assert torch.allclose(flow.g(z), test[:100], atol=1e-4)
    samples = flow.sample(500).squeeze(1)
    print('sample mean', samples.mean(0).tolist(), 'std', samples.std(0).tolist())
print(f"test NLL {test_nll:.4f}")
print(f"final_loss: {test_nll:.6f}")

"""MAML on sine-wave regression (Finn et al. 2017; the style of dragen1860/MAML-Pytorch and the
functorch MAML example): an outer loop over task batches, an inner loop of SGD steps on each
task's support set taken functionally with torch.func.functional_call on a dict of
fast weights, second-order meta-gradients through torch.autograd.grad(create_graph=True), and a
first-order variant (FOMAML, create_graph=False, gradients copied onto .grad by hand) and
Reptile (parameters moved toward the adapted weights under torch.no_grad with
p.add_(...)).  Also: OrderedDict of named_parameters, torch.stack of per-task losses, a
meta-Adam optimiser, and evaluation after adaptation on held-out tasks."""
import argparse
import math
from collections import OrderedDict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call

parser = argparse.ArgumentParser()
parser.add_argument('--seed', type=int, default=0)
parser.add_argument('--iterations', type=int, default=40)
parser.add_argument('--inner_steps', type=int, default=2)
parser.add_argument('--inner_lr', type=float, default=0.02)
args = parser.parse_args()
torch.manual_seed(args.seed)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class SineTasks:
    """y = A sin(x + phase), A in [0.1, 5], phase in [0, pi], x in [-5, 5] (Finn et al.)."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def sample(self, n_tasks, k_shot, k_query):
        A = self.rng.uniform(0.1, 5.0, (n_tasks, 1, 1))
        ph = self.rng.uniform(0, math.pi, (n_tasks, 1, 1))
        xs = self.rng.uniform(-5, 5, (n_tasks, k_shot + k_query, 1))
        ys = A * np.sin(xs + ph)
        t = lambda a: torch.tensor(a, dtype=torch.float32, device=device)
        return t(xs[:, :k_shot]), t(ys[:, :k_shot]), t(xs[:, k_shot:]), t(ys[:, k_shot:])


class Regressor(nn.Module):
    def __init__(self, hidden=40):
        super().__init__()
        self.net = nn.Sequential(OrderedDict([
            ('l1', nn.Linear(1, hidden)), ('relu1', nn.ReLU()),
            ('l2', nn.Linear(hidden, hidden)), ('relu2', nn.ReLU()),
            ('out', nn.Linear(hidden, 1))]))

    def forward(self, x):
        return self.net(x)


def adapt(model, params, x, y, steps, lr, create_graph):
    for _ in range(steps):
        loss = F.mse_loss(functional_call(model, params, (x,)), y)
        grads = torch.autograd.grad(loss, list(params.values()), create_graph=create_graph)
        params = OrderedDict((name, p - lr * g) for (name, p), g in zip(params.items(), grads))
    return params


def evaluate(model, tasks, steps, lr):
    xs, ys, xq, yq = tasks
    losses = []
    for i in range(xs.size(0)):
        params = OrderedDict((n, p.detach().requires_grad_()) for n, p in model.named_parameters())
        fast = adapt(model, params, xs[i], ys[i], steps, lr, create_graph=False)
        with torch.no_grad():
            losses.append(F.mse_loss(functional_call(model, fast, xq[i]), yq[i]).item())
    return float(np.mean(losses))


sampler = SineTasks(args.seed)
test_tasks = SineTasks(12345).sample(16, 10, 40)
results = {}
for algo in ('maml', 'fomaml', 'reptile'):
    torch.manual_seed(args.seed)
    model = Regressor().to(device)
    meta_opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    before = evaluate(model, test_tasks, 5, args.inner_lr)
    for it in range(args.iterations):
        xs, ys, xq, yq = sampler.sample(5, 10, 10)
        meta_opt.zero_grad(set_to_none=True)
        if algo == 'maml':
            qlosses = []
            for i in range(xs.size(0)):
                params = OrderedDict(model.named_parameters())
                fast = adapt(model, params, xs[i], ys[i], args.inner_steps, args.inner_lr, create_graph=True)
                qlosses.append(F.mse_loss(functional_call(model, fast, (xq[i],)), yq[i]))
            meta_loss = torch.stack(qlosses).mean()
            meta_loss.backward()
        elif algo == 'fomaml':
            for p in model.parameters():
                p.grad = torch.zeros_like(p)
            total = 0.0
            for i in range(xs.size(0)):
                params = OrderedDict((n, p.detach().clone().requires_grad_(True)) for n, p in model.named_parameters())
                fast = adapt(model, params, xs[i], ys[i], args.inner_steps, args.inner_lr, create_graph=False)
                fast = OrderedDict((n, p.detach().requires_grad_()) for n, p in fast.items())
                qloss = F.mse_loss(functional_call(model, fast, (xq[i],)), yq[i])
                grads = torch.autograd.grad(qloss, list(fast.values()))
                for p, g in zip(model.parameters(), grads):
                    p.grad += g / xs.size(0)
                total += qloss.item() / xs.size(0)
            meta_loss = torch.tensor(total)
        else:   # reptile: move toward the weights adapted on support + query
            deltas = [torch.zeros_like(p) for p in model.parameters()]
            total = 0.0
            for i in range(xs.size(0)):
                params = OrderedDict((n, p.detach().requires_grad_()) for n, p in model.named_parameters())
                x_all, y_all = torch.cat([xs[i], xq[i]]), torch.cat([ys[i], yq[i]])
                fast = adapt(model, params, x_all, y_all, 5, args.inner_lr, create_graph=False)
                for d, p, q in zip(deltas, model.parameters(), fast.values()):
                    d += (q.detach() - p.detach()) / xs.size(0)
                with torch.no_grad():
                    total += F.mse_loss(functional_call(model, fast, (xq[i],)), yq[i]).item() / xs.size(0)
            meta_loss = torch.tensor(total)
            with torch.no_grad():
                for p, d in zip(model.parameters(), deltas):
                    p.add_(d, alpha=1.0)
        if algo != 'reptile':
            meta_opt.step()
        if it % 20 == 0:
            print(f"{algo} iteration {it}: meta loss {meta_loss.item():.4f}")
    after = evaluate(model, test_tasks, 5, args.inner_lr)
    print(f"{algo}: held-out query MSE after 5 adaptation steps: {before:.4f} -> {after:.4f}")
    results[algo] = after

# the second-order meta-gradient differs from the first-order one (a check on create_graph)
model = Regressor()
xs, ys, xq, yq = sampler.sample(1, 10, 10)
g2, g1 = [], []
for cg, store in ((True, g2), (False, g1)):
    params = OrderedDict(model.named_parameters())
    fast = adapt(model, params, xs[0], ys[0], 1, args.inner_lr, create_graph=cg)
    if not cg:
        fast = OrderedDict((n, p.detach().requires_grad_()) for n, p in fast.items())
    q = F.mse_loss(functional_call(model, fast, (xq[0],)), yq[0])
    store.extend(torch.autograd.grad(q, list(fast.values()) if not cg else list(model.parameters())))
diff = sum((a - b).abs().sum().item() for a, b in zip(g1, g2))
assert diff > 1e-6, diff
print(f"|second-order - first-order meta-gradient|_1 = {diff:.4g}")
print(f"final_loss: {np.mean(list(results.values())):.6f}")

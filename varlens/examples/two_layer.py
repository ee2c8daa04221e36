"""A two-layer network trained by hand-written gradient descent on a toy problem.

Uses only tensors and autograd (no nn, no optim): the loop of seed 003 §1.6.5,
forward, backward, then W <- W - lr * dL/dW, with He-initialised weights
(seed 001 §3.3).  Prints the loss falling.
"""
from __future__ import annotations

import math

import varlens as vl


def make_data(n=512, seed=0):
    """Points in [-1, 1]^2 labelled by whether they fall inside a circle (seed 003 Fig. 1.4.1)."""
    g = vl.Generator().manual_seed(seed)
    x = vl.rand(n, 2, generator=g) * 2 - 1
    y = ((x * x).sum(1) < 0.5).float()
    return x, y


def main(steps=300, hidden=32, lr=0.5, seed=0, verbose=True):
    vl.manual_seed(seed)
    x, y = make_data(seed=seed)
    w1 = (vl.randn(2, hidden) * math.sqrt(2 / 2)).requires_grad_()
    b1 = vl.zeros(hidden, requires_grad=True)
    w2 = (vl.randn(hidden, 1) * math.sqrt(2 / hidden)).requires_grad_()
    b2 = vl.zeros(1, requires_grad=True)
    params = [w1, b1, w2, b2]
    losses = []
    for step in range(steps + 1):
        logits = ((x @ w1 + b1).relu() @ w2 + b2).squeeze(1)
        # binary cross-entropy on logits, written out: softplus(z) - y z
        loss = (vl.softplus(logits) - y * logits).mean()
        for p in params:
            p.grad = None
        loss.backward()
        with vl.no_grad():
            for p in params:
                p -= lr * p.grad
        losses.append(loss.item())
        if verbose and step % 50 == 0:
            acc = ((logits > 0).float() == y).float().mean().item()
            print(f"step {step:4d}  loss {loss.item():.4f}  accuracy {acc:.3f}")
    return losses


if __name__ == "__main__":
    main()

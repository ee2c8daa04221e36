"""The degradation problem at small scale (seed 003 §5.3.4, Figure 5.3.4).

Two networks with exactly the same layers -- ResNet(skip=True) and ResNet(skip=False),
the "plain" net -- are trained with the same data, seed and optimiser; the plain one
trains worse (higher *training* error, not just test error), which is what the skip
connection fixes.  At initialisation we also look at both through the variance lens:
the second moment of each block's output and of each conv weight's gradient, block by
block (with BN the forward moments stay flat in both; the backward signal is where the
plain stack differs).
"""
from __future__ import annotations

import json
import os
import time

import numpy as np

import varlens as vl
import varlens.nn.functional as F
from varlens import optim
from varlens.autograd import no_grad
from varlens.models.resnet import ResNet
from varlens.train.loop import train_loop


def _accuracy(model, X, Y, bs=1000):
    model.eval()
    correct, loss = 0, 0.0
    with no_grad():
        for i in range(0, len(X), bs):
            out = model(X[i:i + bs])
            yb = Y[i:i + bs]
            loss += float(F.cross_entropy(out, yb, reduction="sum").item())
            correct += int((out.argmax(1)._data == yb._data).sum())
    return correct / len(X), loss / len(X)


def init_moments(model, X, Y):
    """Per block at initialisation: E[out^2] of each block and E[grad^2] of its first conv weight."""
    acts = []
    hooks = [b.register_forward_hook(lambda m, i, o: acts.append(float((o._data.astype(np.float64) ** 2).mean())))
             for b in model.layers]
    model.train()
    model.zero_grad()
    F.cross_entropy(model(X), Y).backward()
    for h in hooks:
        h.remove()
    grads = [float((b.conv1.weight.grad._data.astype(np.float64) ** 2).mean()) for b in model.layers]
    model.zero_grad()
    return {"act_second_moment": acts, "grad_second_moment": grads}


def run(Xtr, Ytr, Xte, Yte, blocks=4, widths=(8, 16, 32), epochs=6, batch_size=64, lr=0.05, seed=0,
        out_dir=None, log=print):
    """Train the plain and the residual network of the same depth; returns the history dict
    and (if out_dir) writes degradation.png, init_moments.png and degradation.json."""
    C, H = Xtr.shape[1], Xtr.shape[2]
    hist = {}
    for name, skip in (("plain", False), ("residual", True)):
        vl.manual_seed(seed)
        model = ResNet(10, C, H, blocks=blocks, widths=widths, skip=skip)
        mom = init_moments(model, Xtr[:256], Ytr[:256])
        opt = optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=1e-4)
        g = vl.Generator().manual_seed(seed + 1)
        h = {"train_acc": [], "test_acc": [], "train_loss": [], "test_loss": [], "init": mom, "depth": model.depth}
        t0 = time.time()
        for ep in range(epochs):
            perm = vl.randperm(len(Xtr), generator=g)._data
            train_loop(model, lambda idx: F.cross_entropy(model(Xtr[idx]), Ytr[idx]),
                       (perm[i:i + batch_size] for i in range(0, len(Xtr) - batch_size + 1, batch_size)), opt)
            tr_acc, tr_loss = _accuracy(model, Xtr, Ytr)
            te_acc, te_loss = _accuracy(model, Xte, Yte)
            for k, v in (("train_acc", tr_acc), ("test_acc", te_acc), ("train_loss", tr_loss), ("test_loss", te_loss)):
                h[k].append(v)
            log(f"{name:8s} depth {model.depth} epoch {ep + 1}: train err {1 - tr_acc:.4f}  test err {1 - te_acc:.4f}"
                f"  ({time.time() - t0:.0f} s)")
        hist[name] = h
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, "degradation.json"), "w") as f:
            json.dump(hist, f, indent=1)
        plot(hist, os.path.join(out_dir, "degradation.png"))
        plot_init(hist, os.path.join(out_dir, "init_moments.png"))
    return hist


def plot(hist, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.5), sharey=True)
    for name, h in hist.items():
        ep = np.arange(1, len(h["train_acc"]) + 1)
        ax[0].plot(ep, 1 - np.array(h["train_acc"]), "o-", label=f"{name}-{h['depth']}")
        ax[1].plot(ep, 1 - np.array(h["test_acc"]), "o-", label=f"{name}-{h['depth']}")
    ax[0].set_title("training error")
    ax[1].set_title("test error")
    for a in ax:
        a.set_xlabel("epoch")
        a.grid(alpha=0.3)
        a.legend()
    ax[0].set_ylabel("error")
    fig.suptitle("degradation (seed 003 Figure 5.3.4): same depth, with and without skips", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_init(hist, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.5))
    for name, h in hist.items():
        m = h["init"]
        ax[0].semilogy(np.arange(1, len(m["act_second_moment"]) + 1), m["act_second_moment"], "o-", label=name)
        ax[1].semilogy(np.arange(1, len(m["grad_second_moment"]) + 1), m["grad_second_moment"], "o-", label=name)
    ax[0].set_title("E[block output^2] at init")
    ax[1].set_title("E[(dL/dW of block's first conv)^2] at init")
    for a in ax:
        a.set_xlabel("block")
        a.grid(alpha=0.3)
        a.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

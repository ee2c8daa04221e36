"""Runnable generative recipes: ``python -m varlens.generative.experiments NAME [--key value ...]``.

NAME is one of: diffusion-2d, gan-ring, vae-fashion, fashion-classifier, latent-diffusion-fashion
(needs a trained vae-fashion run), unet-diffusion-fashion (pixel space) and dcgan-fashion (both train for a wall-clock budget).
Each writes ``runs/generative/NAME[-tag]/`` with ``metrics.json`` and PNG figures and prints a
summary. All run on CPU in minutes with the default (small) budgets.
"""
from __future__ import annotations

import json
import math
import os
import sys
import time

import numpy as np

import varlens as vl
from varlens.core.tensor import Tensor
from varlens.train.loop import train_loop


def _out(name, out=None):
    d = out or os.path.join("runs", "generative", name)
    os.makedirs(d, exist_ok=True)
    return d


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save_json(d, obj):
    with open(os.path.join(d, "metrics.json"), "w") as f:
        json.dump(obj, f, indent=1, default=float)


def _toy(dataset, n, seed):
    from varlens.datasets import make_moons, make_ring_of_gaussians
    if dataset == "moons":
        X, _ = make_moons(n, noise=0.05, seed=seed)
    elif dataset == "ring":
        X, _ = make_ring_of_gaussians(n, k=8, radius=2.0, std=0.05, seed=seed)
    else:
        raise ValueError(f"dataset must be 'moons' or 'ring', got {dataset!r}")
    return X.astype(np.float32)


def image_grid(images, nrow, path, title=None, cmap="gray"):
    """Save (N, H, W) images in [0, 1] as one PNG grid."""
    plt = _plt()
    n = len(images)
    ncol = int(math.ceil(n / nrow))
    H, W = images.shape[1:3]
    grid = np.ones((nrow * (H + 1), ncol * (W + 1)))
    for i, im in enumerate(images):
        r, c = divmod(i, ncol)
        grid[r * (H + 1):r * (H + 1) + H, c * (W + 1):c * (W + 1) + W] = im
    fig = plt.figure(figsize=(ncol * 0.45 + 0.5, nrow * 0.45 + 0.6))
    plt.imshow(grid, cmap=cmap, vmin=0, vmax=1)
    plt.axis("off")
    if title:
        plt.title(title, fontsize=8)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)


# ------------------------------------------------------------------------------------ diffusion 2-D
def diffusion_2d(dataset="moons", steps=3000, T=1000, batch_size=512, lr=2e-3, hidden=(128, 128, 128),
                 n_eval=2000, ddim_steps=50, seed=0, out=None, weighting="simple"):
    """Train an MLP eps-predictor with L_simple on a 2-D toy set; score samples against held-out
    points by energy distance and MMD (the floor is the distance between two held-out sets)."""
    from threadpoolctl import threadpool_limits
    from varlens.generative.diffusion import DenoiserMLP, GaussianDiffusion
    from varlens.generative.metrics import energy_distance, mmd_rbf, mode_coverage, ring_centers
    d = _out(f"diffusion-2d-{dataset}" + ("" if weighting == "simple" else f"-{weighting}"), out)
    X = _toy(dataset, 20000 + 2 * n_eval, seed)
    mean, std = X[:20000].mean(0), X[:20000].std(0)
    Z = (X - mean) / std
    train, held, held2 = Z[:20000], Z[20000:20000 + n_eval], Z[20000 + n_eval:]
    vl.manual_seed(seed)
    diff = GaussianDiffusion.linear(T)
    model = DenoiserMLP(2, hidden, time_dim=64, max_steps=T)
    g = vl.Generator().manual_seed(seed + 1)
    res = dict(dataset=dataset, steps=steps, T=T, batch_size=batch_size, lr=lr, hidden=list(hidden),
               weighting=weighting)

    def score(tag, samples):
        s = samples._data if isinstance(samples, Tensor) else samples
        res[f"{tag}_energy"] = energy_distance(s, held)
        res[f"{tag}_mmd"] = mmd_rbf(s, held)
        if dataset == "ring":
            c = mode_coverage(s * std + mean, ring_centers(8, 2.0), 0.3)
            res[f"{tag}_modes"] = c["covered"]
            res[f"{tag}_in_mode_frac"] = c["high_quality"]
        return s

    res["floor_energy"] = energy_distance(held2, held)
    res["floor_mmd"] = mmd_rbf(held2, held)
    gauss = np.random.default_rng(seed + 5).standard_normal((n_eval, 2))  # N(0, I): matches mean and variance
    res["gaussian_baseline_energy"] = energy_distance(gauss, held)
    res["gaussian_baseline_mmd"] = mmd_rbf(gauss, held)
    with threadpool_limits(1):
        score("untrained_ddim", diff.ddim_sample(model, (n_eval, 2), ddim_steps, generator=g))
        opt = vl.optim.Adam(model.parameters(), lr=lr)
        sched = vl.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
        rng = np.random.default_rng(seed)
        t0 = time.time()
        losses = train_loop(model, lambda xb: diff.training_losses(model, xb, weighting=weighting),
                            (Tensor._make(train[rng.integers(0, len(train), batch_size)]) for _ in range(steps)),
                            opt, scheduler=sched)
        res["train_seconds"] = time.time() - t0
        res["final_loss_avg100"] = float(np.mean(losses[-100:]))
        t0 = time.time()
        s_ddpm = score("ddpm", diff.sample(model, (n_eval, 2), generator=g))
        res["ddpm_sample_seconds"] = time.time() - t0
        t0 = time.time()
        s_ddim = score("ddim", diff.ddim_sample(model, (n_eval, 2), ddim_steps, generator=g))
        res["ddim_sample_seconds"] = time.time() - t0
        _, traj = diff.sample(model, (500, 2), generator=g, return_trajectory=True)
    plt = _plt()
    fig, ax = plt.subplots(1, 4, figsize=(14, 3.6))
    for a, (title, pts) in zip(ax, [("held-out data", held), (f"DDPM ({T} steps)", s_ddpm),
                                    (f"DDIM ({ddim_steps} steps)", s_ddim)]):
        a.scatter(pts[:, 0], pts[:, 1], s=2)
        a.set_title(title)
        a.set_aspect("equal")
    for k, tt in enumerate([T, T // 2, T // 4, T // 10, 0]):
        p = traj[T - tt]
        ax[3].scatter(p[:, 0], p[:, 1], s=1, label=f"t={tt}", alpha=0.6)
    ax[3].legend(fontsize=6, markerscale=4)
    ax[3].set_title("reverse trajectory")
    fig.suptitle(f"{dataset}: energy distance DDPM {res['ddpm_energy']:.4f}, DDIM {res['ddim_energy']:.4f}, "
                 f"untrained {res['untrained_ddim_energy']:.3f}, floor {res['floor_energy']:.4f}")
    fig.savefig(os.path.join(d, "samples.png"), dpi=90, bbox_inches="tight")
    plt.close(fig)
    _save_json(d, res)
    return res


# --------------------------------------------------------------------------------------- GAN ring
GAN_CONFIGS = {
    "baseline": dict(lr_g=1e-3, lr_d=1e-3),
    "saturating": dict(lr_g=1e-3, lr_d=1e-3, saturating=True),
    "fast_g": dict(lr_g=5e-3, lr_d=1e-3),
    "small_lr_d": dict(lr_g=1e-3, lr_d=2e-4),
    "d_steps_5": dict(lr_g=1e-3, lr_d=1e-3, d_steps=5),
    "minibatch_std": dict(lr_g=1e-3, lr_d=1e-3, minibatch_std=True),
    "slow_g": dict(lr_g=2e-4, lr_d=1e-3),
}


def gan_ring(configs=None, steps=3000, batch_size=256, seed=0, out=None, log_every=250):
    """8-Gaussian ring: count covered modes during training for several settings."""
    from threadpoolctl import threadpool_limits
    from varlens.generative.gan import MLPDiscriminator, MLPGenerator, train_gan
    from varlens.generative.metrics import mode_coverage, ring_centers
    d = _out("gan-ring", out)
    X = _toy("ring", 50000, seed)
    configs = configs or list(GAN_CONFIGS)
    results, finals = {}, {}
    for name in configs:
        cfg = dict(GAN_CONFIGS[name])
        mb = cfg.pop("minibatch_std", False)
        rng = np.random.default_rng(seed)
        vl.manual_seed(seed)
        G, D = MLPGenerator(2, 2, (64, 64)), MLPDiscriminator(2, (64, 64), minibatch_std=mb)
        hist = []

        def cb(rec):
            with vl.no_grad():
                s = G(vl.randn(2000, 2))._data
            c = mode_coverage(s, ring_centers(8, 2.0), 0.3)
            rec.update(modes=c["covered"], in_mode_frac=c["high_quality"])
            hist.append(rec)
        with threadpool_limits(1):
            train_gan(G, D, lambda n: Tensor._make(X[rng.integers(0, len(X), n)]), steps=steps,
                      batch_size=batch_size, log_every=log_every, callback=cb, **cfg)
        with vl.no_grad():
            finals[name] = G(vl.randn(2000, 2))._data
        results[name] = hist
        print(name, [(h["step"], h["modes"], round(h["in_mode_frac"], 2), round(h["d_loss"], 3)) for h in hist],
              flush=True)
    plt = _plt()
    fig, ax = plt.subplots(1, len(configs), figsize=(3 * len(configs), 3.2))
    ax = np.atleast_1d(ax)
    for a, name in zip(ax, configs):
        s = finals[name]
        a.scatter(X[:2000, 0], X[:2000, 1], s=1, c="lightgray")
        a.scatter(s[:, 0], s[:, 1], s=1)
        h = results[name][-1]
        a.set_title(f"{name}\n{h['modes']}/8 modes, D loss {h['d_loss']:.2f}", fontsize=8)
        a.set_xlim(-3, 3)
        a.set_ylim(-3, 3)
        a.set_aspect("equal")
    fig.savefig(os.path.join(d, "samples.png"), dpi=90, bbox_inches="tight")
    plt.close(fig)
    _save_json(d, dict(configs={k: GAN_CONFIGS[k] for k in configs}, history=results, steps=steps))
    return results


# ------------------------------------------------------------------------------------- VAE fashion
def _fashion(binarize=True):
    from varlens.datasets import fashion_mnist
    xtr, ytr = fashion_mnist(train=True)
    xte, yte = fashion_mnist(train=False)
    xtr = xtr.reshape(len(xtr), -1).astype(np.float32) / 255
    xte = xte.reshape(len(xte), -1).astype(np.float32) / 255
    if binarize:  # a fixed binarisation, so the Bernoulli likelihood is a true likelihood
        xtr, xte = (xtr > 0.5).astype(np.float32), (xte > 0.5).astype(np.float32)
    return xtr, ytr, xte, yte


def vae_fashion(epochs=5, latent_dim=20, hidden=(400,), batch_size=128, lr=1e-3, beta=1.0, conditional=False,
                n_test=2000, n_importance=100, seed=0, out=None, tag=None):
    """MLP VAE on binarised Fashion-MNIST: test ELBO and importance-sampled log p(x) (nats per image),
    reconstructions, samples, class-conditional samples (conditional=True), 2-D latent scatter."""
    from threadpoolctl import threadpool_limits
    from varlens.generative.vae import VAE
    from varlens.datasets import FASHION_CLASSES
    name = tag or f"vae-fashion-z{latent_dim}" + ("-cond" if conditional else "") + (f"-beta{beta}" if beta != 1 else "")
    d = _out(name, out)
    xtr, ytr, xte, yte = _fashion()
    vl.manual_seed(seed)
    net = VAE(784, latent_dim, hidden, "bernoulli", num_classes=10 if conditional else None, beta=beta)
    opt = vl.optim.Adam(net.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    res = dict(epochs=epochs, latent_dim=latent_dim, hidden=list(hidden), beta=beta, conditional=conditional)
    curve = []
    t0 = time.time()
    with threadpool_limits(1):
        for ep in range(epochs):
            perm = rng.permutation(len(xtr))
            losses = train_loop(net, lambda idx: net.loss(Tensor._make(xtr[idx]),
                                                          Tensor._make(ytr[idx]) if conditional else None),
                                (perm[i:i + batch_size] for i in range(0, len(perm) - batch_size + 1, batch_size)),
                                opt)
            curve.append(sum(losses) / (len(perm) // batch_size))
            print(f"epoch {ep + 1}: train -ELBO (beta-weighted) {curve[-1]:.2f}", flush=True)
        res["train_seconds"] = time.time() - t0
        res["train_neg_elbo_curve"] = curve
        net.eval()
        xs, ys = xte[:n_test], yte[:n_test]
        yT = Tensor._make(ys) if conditional else None
        with vl.no_grad():
            el = np.concatenate([net.elbo(Tensor._make(xs[i:i + 500]), None if yT is None else yT[i:i + 500],
                                          beta=1.0)._data for i in range(0, n_test, 500)])
        lp = np.concatenate([net.log_px(Tensor._make(xs[i:i + 250]), None if yT is None else yT[i:i + 250],
                                        n_importance=n_importance)._data for i in range(0, n_test, 250)])
        res["test_elbo"] = float(el.mean())
        res["test_log_px_is"] = float(lp.mean())
        res["gap_kl_to_posterior"] = float(lp.mean() - el.mean())
        res["n_test"], res["n_importance"] = n_test, n_importance
        with vl.no_grad():
            mu, logvar = net.encode(Tensor._make(xs[:16]), None if yT is None else yT[:16])
            rec = net.mean_image(net.decode(mu, None if yT is None else yT[:16]))._data
            kl_dim = (0.5 * (mu._data ** 2 + np.exp(logvar._data) - logvar._data - 1)).mean(0)
        res["active_dims_kl_gt_0.01"] = int((kl_dim > 0.01).sum())
        image_grid(np.concatenate([xs[:16], rec]).reshape(-1, 28, 28), 2, os.path.join(d, "reconstructions.png"),
                   "top: test images, bottom: reconstructions (decoder mean at z = mu)")
        g = vl.Generator().manual_seed(seed)
        if conditional:
            lab = np.repeat(np.arange(10), 8)
            s = net.sample(80, Tensor._make(lab), generator=g)._data
            image_grid(s.reshape(-1, 28, 28), 10, os.path.join(d, "samples_by_class.png"),
                       "rows: " + ", ".join(FASHION_CLASSES))
        else:
            s = net.sample(64, generator=g)._data
            image_grid(s.reshape(-1, 28, 28), 8, os.path.join(d, "samples.png"), "samples: decoder mean, z ~ N(0, I)")
        if latent_dim == 2:
            plt = _plt()
            with vl.no_grad():
                m2, _ = net.encode(Tensor._make(xs), yT)
            fig = plt.figure(figsize=(6, 5))
            sc = plt.scatter(m2._data[:, 0], m2._data[:, 1], c=ys, cmap="tab10", s=3)
            cb = plt.colorbar(sc, ticks=range(10))
            cb.ax.set_yticklabels(FASHION_CLASSES, fontsize=7)
            plt.title("2-D latent means of test images")
            fig.savefig(os.path.join(d, "latent2d.png"), dpi=90, bbox_inches="tight")
            plt.close(fig)
    _save_json(d, res)
    from varlens.train.checkpoint import save as _save  # noqa: F401  (availability check only)
    np.savez(os.path.join(d, "weights.npz"), **{k: v._data for k, v in net.state_dict().items()})
    print(json.dumps({k: v for k, v in res.items() if k != "train_neg_elbo_curve"}, default=float))
    return res, net


# ------------------------------------------------------------------ classifier for sample quality
def fashion_classifier(epochs=3, seed=0, out=None):
    """MLP 784-256-128-10 on binarised Fashion-MNIST (varlens), used to score generated images:
    its 128-d penultimate features give a Frechet distance, its predictions the accuracy of
    class-conditional samples. Cached in runs/generative/fashion-classifier/."""
    from threadpoolctl import threadpool_limits
    from varlens.nn import Linear, ReLU, Sequential
    d = _out("fashion-classifier", out)
    path = os.path.join(d, "weights.npz")
    vl.manual_seed(seed)
    net = Sequential(Linear(784, 256), ReLU(), Linear(256, 128), ReLU(), Linear(128, 10))
    xtr, ytr, xte, yte = _fashion()
    if os.path.exists(path):
        w = np.load(path)
        net.load_state_dict({k: w[k] for k in w.files})
    else:
        opt = vl.optim.Adam(net.parameters(), lr=1e-3)
        rng = np.random.default_rng(seed)
        with threadpool_limits(1):
            for ep in range(epochs):
                perm = rng.permutation(len(xtr))
                train_loop(net, lambda idx: vl.nn.functional.cross_entropy(net(Tensor._make(xtr[idx])),
                                                                          Tensor._make(ytr[idx])),
                           (perm[i:i + 128] for i in range(0, len(perm) - 127, 128)), opt)
        np.savez(path, **{k: v._data for k, v in net.state_dict().items()})
    net.eval()
    with vl.no_grad():
        acc = float((net(Tensor._make(xte))._data.argmax(1) == yte).mean())
    _save_json(d, dict(test_accuracy=acc, epochs=epochs))
    return net, acc


def classifier_features(net, images):
    """(penultimate features (N, 128), predicted classes (N,)) for images (N, 784) in [0, 1]."""
    with vl.no_grad():
        h = Tensor._make(np.asarray(images, dtype=np.float32).reshape(len(images), -1))
        for m in list(net)[:-1]:
            h = m(h)
        return h._data, net[-1](h)._data.argmax(1)


def latent_diffusion_fashion(vae_dir="runs/generative/vae-fashion-z20", steps=4000, batch_size=256, lr=1e-3,
                             T=1000, p_uncond=0.1, scales=(0.0, 1.0, 2.0, 4.0), n_per_class=100, ddim_steps=50,
                             seed=0, out=None):
    """Latent diffusion (seed 003 §11.5) in the 20-d latent space of the Fashion-MNIST VAE, with
    class labels through classifier-free guidance. Scores: Frechet distance on the varlens
    classifier's features (against 2,000 test images) and the classifier's accuracy on the
    label each sample was asked for."""
    from threadpoolctl import threadpool_limits
    from varlens.generative.diffusion import DenoiserMLP, GaussianDiffusion
    from varlens.generative.guidance import ClassifierFreeGuidance, drop_labels
    from varlens.generative.latent import LatentDiffusion
    from varlens.generative.metrics import feature_frechet_distance
    from varlens.generative.vae import VAE
    d = _out("latent-diffusion-fashion", out)
    cfg = json.load(open(os.path.join(vae_dir, "metrics.json")))
    vae = VAE(784, cfg["latent_dim"], tuple(cfg["hidden"]))
    w = np.load(os.path.join(vae_dir, "weights.npz"))
    vae.load_state_dict({k: w[k] for k in w.files})
    vae.eval()
    clf, clf_acc = fashion_classifier()
    xtr, ytr, xte, yte = _fashion()
    vl.manual_seed(seed)
    diff = GaussianDiffusion.linear(T)
    den = DenoiserMLP(cfg["latent_dim"], (256, 256, 256), time_dim=64, max_steps=T, num_classes=10)
    ld = LatentDiffusion(vae, den, diff).fit_scale(Tensor._make(xtr[:10000]))
    Z = np.concatenate([ld.encode(Tensor._make(xtr[i:i + 5000]))._data for i in range(0, len(xtr), 5000)])
    res = dict(vae_dir=vae_dir, steps=steps, batch_size=batch_size, T=T, p_uncond=p_uncond,
               classifier_test_accuracy=clf_acc, ddim_steps=ddim_steps)
    rng = np.random.default_rng(seed)
    opt = vl.optim.Adam(den.parameters(), lr=lr)
    sched = vl.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    t0 = time.time()
    def labelled_latents():
        for _ in range(steps):
            idx = rng.integers(0, len(Z), batch_size)
            yield Tensor._make(Z[idx]), drop_labels(Tensor._make(ytr[idx]), p_uncond, 10)

    def logged(step, loss):
        if step % 1000 == 0:
            print(f"step {step}: loss {loss:.4f}", flush=True)

    with threadpool_limits(1):
        train_loop(den, lambda b: diff.training_losses(den, b[0], model_kwargs=dict(y=b[1])), labelled_latents(), opt,
                   scheduler=sched, on_step=logged)
        res["train_seconds"] = time.time() - t0
        ref_feat, _ = classifier_features(clf, xte[:2000])
        fd = lambda imgs: feature_frechet_distance(classifier_features(clf, imgs)[0], ref_feat)  # noqa: E731
        res["fd_train_images_floor"] = fd(xtr[:2000])
        g = vl.Generator().manual_seed(seed + 1)
        with vl.no_grad():
            prior = vae.mean_image(vae.decode(vl.randn(2000, cfg["latent_dim"], generator=g)))._data
            mu, _ = vae.encode(Tensor._make(xte[2000:4000]))
            recon = vae.mean_image(vae.decode(mu))._data
        res["fd_vae_prior_samples"] = fd(prior)
        res["fd_vae_reconstructions"] = fd(recon)
        labels = np.repeat(np.arange(10), n_per_class)
        grids = {}
        for s in scales:
            model = ClassifierFreeGuidance(den, Tensor._make(labels), s, 10)
            imgs = ld.sample(len(labels), model=model, ddim_steps=ddim_steps, generator=g)._data
            feat, pred = classifier_features(clf, imgs)
            res[f"fd_scale_{s:g}"] = feature_frechet_distance(feat, ref_feat)
            res[f"class_accuracy_scale_{s:g}"] = float((pred == labels).mean())
            grids[s] = imgs
            print(f"guidance scale {s:g}: FD {res[f'fd_scale_{s:g}']:.2f}, "
                  f"accuracy {res[f'class_accuracy_scale_{s:g}']:.3f}", flush=True)
    from varlens.datasets import FASHION_CLASSES
    for s, imgs in grids.items():
        pick = np.concatenate([imgs[c * n_per_class:c * n_per_class + 8] for c in range(10)])
        image_grid(pick.reshape(-1, 28, 28), 10, os.path.join(d, f"samples_scale_{s:g}.png"),
                   f"latent diffusion, guidance scale {s:g}; rows: " + ", ".join(FASHION_CLASSES))
    _save_json(d, res)
    print(json.dumps(res, default=float))
    return res


def unet_diffusion_fashion(budget_seconds=900, batch_size=32, base_channels=16, T=1000, lr=2e-3, p_uncond=0.1,
                           scales=(1.0, 3.0), n_per_class=20, ddim_steps=50, seed=0, out=None):
    """Pixel-space DDPM on binarised Fashion-MNIST (scaled to [-1, 1]) with the small U-Net, class
    labels entering through cross-attention (label -> 4 context tokens; seed 003 §11.5.2) and
    classifier-free guidance. Trains for ``budget_seconds`` of wall time, then samples with DDIM
    and scores with the varlens classifier (Frechet distance, class accuracy)."""
    from threadpoolctl import threadpool_limits
    from varlens.generative.diffusion import GaussianDiffusion
    from varlens.generative.guidance import ClassifierFreeGuidance, LabelContext, drop_labels
    from varlens.generative.metrics import feature_frechet_distance
    from varlens.generative.unet import UNet
    from varlens.nn import Module

    class CondUNet(Module):
        def __init__(self):
            super().__init__()
            self.ctx = LabelContext(10, 32, length=4)
            self.unet = UNet(1, base_channels, (1, 2, 2), attn_levels=(2,), max_steps=T, context_dim=32)

        def forward(self, x, t, y):
            return self.unet(x, t, context=self.ctx(y))

    d = _out("unet-diffusion-fashion", out)
    xtr, ytr, xte, yte = _fashion()
    Xtr = (xtr * 2 - 1).reshape(-1, 1, 28, 28)
    vl.manual_seed(seed)
    diff = GaussianDiffusion.linear(T)
    net = CondUNet()
    opt = vl.optim.Adam(net.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    res = dict(budget_seconds=budget_seconds, batch_size=batch_size, base_channels=base_channels, T=T,
               n_params=int(sum(p.numel() for p in net.parameters())))
    t0, it, losses = time.time(), 0, []
    with threadpool_limits(1):
        while time.time() - t0 < budget_seconds:
            idx = rng.integers(0, len(Xtr), batch_size)
            y = drop_labels(Tensor._make(ytr[idx]), p_uncond, 10)
            loss = diff.training_losses(net, Tensor._make(Xtr[idx]), model_kwargs=dict(y=y))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss))
            it += 1
            if it % 100 == 0:
                print(f"step {it}: loss(avg 100) {np.mean(losses[-100:]):.4f} ({time.time() - t0:.0f} s)", flush=True)
        res["train_steps"], res["train_seconds"] = it, time.time() - t0
        res["final_loss_avg100"] = float(np.mean(losses[-100:]))
        clf, clf_acc = fashion_classifier()
        res["classifier_test_accuracy"] = clf_acc
        ref_feat, _ = classifier_features(clf, xte[:2000])
        res["fd_train_images_floor"] = feature_frechet_distance(classifier_features(clf, xtr[:2000])[0], ref_feat)
        labels = np.repeat(np.arange(10), n_per_class)
        g = vl.Generator().manual_seed(seed + 1)
        net.eval()
        from varlens.datasets import FASHION_CLASSES
        for sc in scales:
            model = ClassifierFreeGuidance(net, Tensor._make(labels), sc, 10)
            t1 = time.time()
            x = diff.ddim_sample(model, (len(labels), 1, 28, 28), ddim_steps, generator=g, clip=1.0)._data
            imgs = ((x + 1) / 2).clip(0, 1).reshape(len(labels), -1)
            feat, pred = classifier_features(clf, imgs)
            res[f"fd_scale_{sc:g}"] = feature_frechet_distance(feat, ref_feat)
            res[f"class_accuracy_scale_{sc:g}"] = float((pred == labels).mean())
            res[f"sample_seconds_scale_{sc:g}"] = time.time() - t1
            pick = np.concatenate([imgs[c * n_per_class:c * n_per_class + 8] for c in range(10)])
            image_grid(pick.reshape(-1, 28, 28), 10, os.path.join(d, f"samples_scale_{sc:g}.png"),
                       f"U-Net DDPM ({it} steps), DDIM {ddim_steps}, guidance {sc:g}; rows: " + ", ".join(FASHION_CLASSES))
            print(f"scale {sc:g}: FD {res[f'fd_scale_{sc:g}']:.2f} acc {res[f'class_accuracy_scale_{sc:g}']:.3f}",
                  flush=True)
    _save_json(d, res)
    print(json.dumps(res, default=float))
    return res


def dcgan_fashion(budget_seconds=900, batch_size=64, nz=64, ngf=32, ndf=32, lr=2e-4, seed=0, out=None):
    """DCGAN (seed 003 §9.2) on Fashion-MNIST grey levels scaled to [-1, 1], Adam(2e-4, betas 0.5),
    trained for a wall-clock budget; logs the discriminator loss (2 log 2 = 1.386 at the
    equilibrium) and saves a sample grid and the Frechet distance on the varlens classifier's features."""
    from threadpoolctl import threadpool_limits
    from varlens.generative.gan import DCGANDiscriminator, DCGANGenerator, dcgan_init_, train_gan
    from varlens.generative.metrics import feature_frechet_distance
    d = _out("dcgan-fashion", out)
    xtr, ytr, xte, yte = _fashion(binarize=False)
    Xtr = (xtr * 2 - 1).reshape(-1, 1, 28, 28)
    vl.manual_seed(seed)
    G, D = dcgan_init_(DCGANGenerator(nz, ngf)), dcgan_init_(DCGANDiscriminator(ndf))
    rng = np.random.default_rng(seed)
    t0 = time.time()
    logs = []
    opts = (vl.optim.Adam(G.parameters(), lr=lr, betas=(0.5, 0.999)),
            vl.optim.Adam(D.parameters(), lr=lr, betas=(0.5, 0.999)))
    with threadpool_limits(1):
        while time.time() - t0 < budget_seconds:
            logs += train_gan(G, D, lambda n: Tensor._make(Xtr[rng.integers(0, len(Xtr), n)]), steps=50,
                              batch_size=batch_size, log_every=50, optimizers=opts, start_step=50 * len(logs))
            print(f"{len(logs) * 50} steps, {time.time() - t0:.0f} s: {logs[-1]}", flush=True)
    G.eval()
    with vl.no_grad():
        x = G(vl.randn(1000, nz, generator=vl.Generator().manual_seed(seed + 1)))._data
    imgs = ((x + 1) / 2).clip(0, 1).reshape(1000, -1)
    clf, _ = fashion_classifier()
    ref_feat, _ = classifier_features(clf, (xte[:2000] > 0.5).astype(np.float32))
    res = dict(steps=len(logs) * 50, train_seconds=time.time() - t0, last_logs=logs[-5:],
               fd_binarised_samples=feature_frechet_distance(classifier_features(clf, (imgs > 0.5).astype(np.float32))[0],
                                                             ref_feat))
    image_grid(imgs[:64].reshape(-1, 28, 28), 8, os.path.join(d, "samples.png"), f"DCGAN samples after {res['steps']} steps")
    _save_json(d, res)
    print(json.dumps(res, default=float))
    return res


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    fns = {"diffusion-2d": diffusion_2d, "gan-ring": gan_ring, "vae-fashion": vae_fashion,
           "latent-diffusion-fashion": latent_diffusion_fashion, "fashion-classifier": fashion_classifier,
           "unet-diffusion-fashion": unet_diffusion_fashion, "dcgan-fashion": dcgan_fashion}
    if not argv or argv[0] not in fns:
        print(__doc__)
        return 2
    name, kv = argv[0], argv[1:]
    kw = {}
    for k, v in zip(kv[::2], kv[1::2]):
        k = k.lstrip("-").replace("-", "_")
        try:
            kw[k] = json.loads(v)
        except json.JSONDecodeError:
            kw[k] = v
    for k in ("hidden", "scales", "configs"):
        if k in kw:
            kw[k] = tuple(kw[k])
    fn = fns[name]
    r = fn(**kw)
    if name == "diffusion-2d":
        print(json.dumps(r, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())

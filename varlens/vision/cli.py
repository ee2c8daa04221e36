"""``varlens cnn EXPERIMENT --out DIR``: the CNN experiments of seed 003 §5 as PNGs.

  fgsm         train a small CNN on Fashion-MNIST (pixels in [0, 1]), then FGSM and PGD:
               accuracy against eps (table + attack_accuracy.png) and attacked examples
  degradation  a deep plain CNN against the same depth with skips (Figure 5.3.4)
  filters      first-layer filters and one sample's feature maps of a trained CNN
  edge         the vertical-edge filter of Example 5.2.3 on a Fashion-MNIST image
  params       Example 5.3.1: one 5x5 filter against two stacked 3x3 filters
"""
from __future__ import annotations

import os
import time

import numpy as np

EXPERIMENTS = ("fgsm", "degradation", "filters", "edge", "params")
CLASSES = ("T-shirt", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Boot")


def add_arguments(p):
    p.add_argument("experiment", choices=EXPERIMENTS, help="which experiment")
    p.add_argument("--out", default="runs/cnn", help="folder for the PNGs and tables (default runs/cnn)")
    p.add_argument("--train-size", type=int, default=12000, help="training images used (default 12000)")
    p.add_argument("--test-size", type=int, default=2000, help="test images used (default 2000)")
    p.add_argument("--epochs", type=int, default=3, help="training epochs (default 3)")
    p.add_argument("--blocks", type=int, default=4, help="degradation: basic blocks per stage (depth 6n+2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-root", default=None, help="directory with the Fashion-MNIST IDX files")


def load(args):
    import varlens as vl
    from varlens import datasets as D
    Xtr, ytr = D.fashion_mnist(args.data_root, train=True)
    Xte, yte = D.fashion_mnist(args.data_root, train=False)
    rng = np.random.default_rng(args.seed)
    i = rng.permutation(len(Xtr))[:args.train_size]
    j = rng.permutation(len(Xte))[:args.test_size]
    f = lambda X: vl.tensor((X.astype(np.float32) / 255.0)[:, None])  # noqa: E731  pixels in [0, 1]
    return f(Xtr[i]), vl.tensor(ytr[i].astype(np.int64)), f(Xte[j]), vl.tensor(yte[j].astype(np.int64))


def train_small_cnn(Xtr, Ytr, epochs, seed, log=print):
    """LeNet-5 (ReLU, max pool) with Adam: the model the attack and filter pictures use."""
    import varlens as vl
    import varlens.nn.functional as F
    from varlens import optim
    from varlens.models import LeNet5
    from varlens.train.loop import train_loop
    vl.manual_seed(seed)
    model = LeNet5(width=2)
    opt = optim.Adam(model.parameters(), lr=2e-3)
    g = vl.Generator().manual_seed(seed + 1)
    t0 = time.time()
    for ep in range(epochs):
        perm = vl.randperm(len(Xtr), generator=g)._data
        train_loop(model, lambda idx: F.cross_entropy(model(Xtr[idx]), Ytr[idx]),
                   (perm[k:k + 64] for k in range(0, len(Xtr) - 63, 64)), opt)
        log(f"  epoch {ep + 1}/{epochs} done ({time.time() - t0:.0f} s)")
    model.eval()
    return model


def run(args):
    import varlens as vl
    from varlens import vision as V
    from varlens.vision import attacks as A
    from varlens.vision import degradation
    from varlens.vision import visualize as Z
    out = args.out
    os.makedirs(out, exist_ok=True)
    if args.experiment == "params":
        n5, n3, rf = Z.param_count_5x5_vs_3x3()
        msg = (f"Example 5.3.1: one 5x5 filter has {n5} weights; two stacked 3x3 filters have {n3} "
               f"and see a {rf}x{rf} field")
        print(msg)
        with open(os.path.join(out, "params.txt"), "w") as f:
            f.write(msg + "\n")
        return 0
    Xtr, Ytr, Xte, Yte = load(args)
    if args.experiment == "edge":
        img = Xte._data[0, 0]
        p = Z.save_edge_filter_demo(img, os.path.join(out, "edge_filter.png"))
        print(f"wrote {p}")
        return 0
    if args.experiment == "degradation":
        degradation.run(Xtr, Ytr, Xte, Yte, blocks=args.blocks, epochs=args.epochs, seed=args.seed, out_dir=out)
        print(f"wrote {out}/degradation.png, {out}/init_moments.png, {out}/degradation.json")
        return 0
    print(f"training LeNet-5 on {len(Xtr)} Fashion-MNIST images for {args.epochs} epochs")
    model = train_small_cnn(Xtr, Ytr, args.epochs, args.seed)
    if args.experiment == "filters":
        V.save_filters(model.features[0].weight, os.path.join(out, "filters.png"))
        V.save_feature_maps(model, Xte[:1], model.features[1], os.path.join(out, "feature_maps.png"),
                            title=f"conv1 + ReLU feature maps of a {CLASSES[int(Yte[0].item())]}")
        V.save_image_grid(Xte[:1], os.path.join(out, "sample.png"), titles=[CLASSES[int(Yte[0].item())]])
        print(f"wrote {out}/filters.png, {out}/feature_maps.png, {out}/sample.png")
        return 0
    eps_list = [0.0, 0.01, 0.02, 0.05, 0.1, 0.2]
    rows = {"FGSM": A.accuracy_under_attack(model, Xte, Yte, eps_list, "fgsm"),
            "PGD-10": A.accuracy_under_attack(model, Xte, Yte, eps_list, "pgd", steps=10,
                                              generator=vl.Generator().manual_seed(args.seed))}
    table = A.format_table(rows)
    print(table)
    with open(os.path.join(out, "attack_accuracy.md"), "w") as f:
        f.write(table + "\n")
    A.plot_accuracy_vs_eps(rows, os.path.join(out, "attack_accuracy.png"),
                           title=f"LeNet-5 on Fashion-MNIST ({len(Xte)} test images)")
    n, eps = 8, 0.1
    x, y = Xte[:n], Yte[:n]
    adv = A.fgsm(model, x, y, eps)
    p0, p1 = A.predict(model, x), A.predict(model, adv)
    imgs = np.concatenate([x._data, adv._data, (adv - x)._data / (2 * eps) + 0.5])
    titles = ([f"{CLASSES[a]}" for a in p0] + [f"-> {CLASSES[a]}" for a in p1] + ["perturbation"] * n)
    V.save_image_grid(imgs, os.path.join(out, "fgsm_examples.png"), nrow=n, titles=titles, normalize="all",
                      suptitle=f"FGSM, eps = {eps}: clean (top, predicted), attacked (middle), x' - x (bottom)")
    print(f"wrote {out}/attack_accuracy.md, {out}/attack_accuracy.png, {out}/fgsm_examples.png")
    return 0

"""Named training recipes: a dataset, a model, an optimiser and their settings in one place.

``varlens train RECIPE`` starts from one of these and lets any field be overridden from
the command line.  A recipe is a plain dict, saved into every checkpoint, so
``varlens eval`` can rebuild the data and the model from the checkpoint alone.

Recipes live with the Trainer they configure; ``varlens.commands`` only dispatches to them.  The
model builders import varlens.models inside the functions that need them (build_model, check_config).
"""
from __future__ import annotations

import copy
import difflib

import numpy as np

RECIPES = {
    "digits-mlp": dict(
        description="MLP on scikit-learn's bundled 8x8 digits (1,797 images; the main job, ~10 s)",
        dataset="digits", model="mlp", hidden=[256, 128], activation="relu", dropout=0.1, batchnorm=False,
        init="he", optimizer="adam", lr=1e-3, weight_decay=1e-4, momentum=0.9, batch_size=32, epochs=20,
        scheduler="cosine", early_stopping=6, grad_clip=None, accumulate=1, seed=0),
    "fashion-mlp": dict(
        description="MLP on Fashion-MNIST (60,000 + 10,000 28x28 images; needs `make data`)",
        dataset="fashion-mnist", model="mlp", hidden=[256, 128], activation="relu", dropout=0.1,
        batchnorm=False, init="he", optimizer="adam", lr=1e-3, weight_decay=1e-4, momentum=0.9,
        batch_size=128, epochs=15, scheduler="cosine", early_stopping=5, grad_clip=None, accumulate=1,
        seed=0),
    "circle-mlp": dict(
        description="MLP on the circle-boundary toy set of seed 003 Figure 1.4.1 (seconds)",
        dataset="circle", model="mlp", hidden=[32, 32], activation="relu", dropout=0.0, batchnorm=False,
        init="he", optimizer="sgd", lr=0.1, weight_decay=0.0, momentum=0.9, batch_size=32, epochs=30,
        scheduler="none", early_stopping=None, grad_clip=None, accumulate=1, seed=0),
    "moons-mlp": dict(
        description="MLP on two moons (seconds)",
        dataset="moons", model="mlp", hidden=[32, 32], activation="relu", dropout=0.0, batchnorm=False,
        init="he", optimizer="adam", lr=1e-2, weight_decay=0.0, momentum=0.9, batch_size=32, epochs=30,
        scheduler="none", early_stopping=None, grad_clip=None, accumulate=1, seed=0),
    # CNN recipes (issue 6; models built by varlens.models.cnn.build_cnn)
    "fashion-cnn": dict(
        description="VGG-style CNN on Fashion-MNIST (3x3 convs 16->32 ch, BN, max pools; 91.9% test, ~28 min)",
        dataset="fashion-mnist", model="vgg", depths=[1, 1], width=16, cnn_hidden=128, batchnorm=True,
        dropout=0.25, hidden=[], init="pytorch", optimizer="adam", lr=2e-3, weight_decay=0.0, momentum=0.9,
        batch_size=128, epochs=10, scheduler="cosine", early_stopping=None, grad_clip=None, accumulate=1,
        seed=0),
    "fashion-resnet": dict(
        description="small ResNet on Fashion-MNIST (3 stages 16-32-64 ch, 1 basic block each; random crops "
                    "and flips, label smoothing; 92.5% test, ~25-45 min)",
        dataset="fashion-mnist", model="resnet", blocks=1, widths=[16, 32, 64], shortcut="B", skip=True,
        hidden=[], init="pytorch", optimizer="adam", lr=2e-3, weight_decay=1e-4, momentum=0.9,
        batch_size=128, epochs=15, scheduler="cosine", early_stopping=None, grad_clip=None, accumulate=1,
        augment="crop-flip", crop_padding=2, label_smoothing=0.1, seed=0),
    # Transformer recipes (issue 8; models built by varlens.models.vit.build_vit)
    "fashion-vit": dict(
        description="small ViT on Fashion-MNIST (7x7 patches, dim 64, 4 pre-LN layers, 4 heads; >= 87% test)",
        dataset="fashion-mnist", model="vit", patch_size=7, dim=64, depth=4, heads=4, mlp_dim=128,
        dropout=0.0, hidden=[], init="pytorch", optimizer="adamw", lr=2e-3, weight_decay=0.05, momentum=0.9,
        batch_size=128, epochs=8, scheduler="cosine", early_stopping=None, grad_clip=1.0, accumulate=1,
        seed=0),
}

DATASETS = ("digits", "fashion-mnist", "circle", "moons", "spirals", "gaussians")
MODELS = ("mlp", "linear", "lenet", "vgg", "resnet", "vit")
OPTIMIZERS = ("sgd", "adam", "adamw")
SCHEDULERS = ("none", "cosine", "step", "plateau")


def unknown(kind, name, valid):
    """A ValueError for a misspelt name that suggests the closest valid ones and lists them all."""
    close = difflib.get_close_matches(str(name), list(valid), n=3, cutoff=0.5)
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return ValueError(f"unknown {kind} {name!r}.{hint} Valid {kind}s: {', '.join(valid)}")


def get_recipe(name):
    if name not in RECIPES:
        raise unknown("recipe", name, list(RECIPES))
    cfg = copy.deepcopy(RECIPES[name])
    cfg["recipe"] = name
    return cfg


def check_config(cfg):
    for key, valid in (("dataset", DATASETS), ("model", MODELS), ("optimizer", OPTIMIZERS),
                       ("scheduler", SCHEDULERS)):
        if cfg[key] not in valid:
            raise unknown(key, cfg[key], valid)
    from varlens.models.mlp import INITS
    if cfg["init"] not in INITS:
        raise unknown("init", cfg["init"], INITS)
    for key in ("batch_size", "epochs"):
        if not isinstance(cfg[key], int) or cfg[key] < 1:
            raise ValueError(f"{key} must be a positive int, got {cfg[key]!r}")
    if not cfg["lr"] > 0:
        raise ValueError(f"lr must be positive, got {cfg['lr']!r}")
    _augment(cfg)
    ls = cfg.get("label_smoothing") or 0.0
    if not 0.0 <= ls <= 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1], got {ls!r}")
    return cfg


# ---------------------------------------------------------------------- data
AUGMENTS = ("none", "crop", "flip", "crop-flip")


def _augment(cfg):
    a = cfg.get("augment") or "none"
    if a not in AUGMENTS:
        raise unknown("augment", a, AUGMENTS)
    return a


def load_arrays(cfg, standardizer_state=None):
    """(train, val, test) pairs of float32 inputs / int64 labels, the Standardizer, and n_classes.

    Digits and toy sets: an 80/10/10 split (seed 003 §1.5.3), stratified for digits.
    Fashion-MNIST: its official 10,000 test images; 10% of the 60,000 training ones
    held out for validation.  Inputs are z-scored with statistics of the training split
    only (seed 003 §1.5.2); ``standardizer_state`` (from a checkpoint) reuses saved ones.

    With ``augment`` (image data only) the statistics are one mean and one std over all
    pixels (a per-pixel z-score would rescale a shifted image wrongly), and the training
    inputs stay raw pixels of shape (N, C, H, W): the training loader crops/flips them and
    then normalises (``build_loaders``).
    """
    from varlens import datasets as D
    name, seed = cfg["dataset"], int(cfg["seed"])
    if name == "digits":
        X, y = D.load_digits()
        sp = D.train_val_test_split(X, y, seed=seed, stratify=True)
        ncls = 10
    elif name == "fashion-mnist":
        Xtr, ytr = D.fashion_mnist(cfg.get("data_root"), train=True)
        Xte, yte = D.fashion_mnist(cfg.get("data_root"), train=False)
        Xtr = Xtr.reshape(len(Xtr), -1).astype(np.float32) / 255
        Xte = Xte.reshape(len(Xte), -1).astype(np.float32) / 255
        a = D.train_val_test_split(Xtr, ytr, fractions=(0.9, 0.1, 0.0), seed=seed)
        sp = D.Split(a.train, a.val, (Xte, yte))
        ncls = 10
    else:
        maker = {"circle": D.make_circle, "moons": D.make_moons, "spirals": D.make_spirals,
                 "gaussians": D.make_ring_of_gaussians}[name]
        X, y = maker(n=int(cfg.get("n_samples", 2000)), seed=seed)
        sp = D.train_val_test_split(X, y, seed=seed)
        ncls = int(y.max()) + 1
    st = D.Standardizer()
    augment = _augment(cfg) != "none"
    if augment and name != "fashion-mnist":
        raise ValueError(f"augment={cfg['augment']!r} needs image data (dataset fashion-mnist), "
                         f"got dataset {name!r}")
    if standardizer_state is not None:
        st.load_state_dict(standardizer_state)
    elif augment:  # one scalar mean and std, stored per pixel so that eval rebuilds the same
        X = sp.train[0]
        st.mean = np.full(X.shape[1:], X.mean(dtype=np.float64))
        st.std = np.full(X.shape[1:], X.std(dtype=np.float64))
    else:
        st.fit(sp.train[0])
    out = tuple((st.transform(Xs), ys) for Xs, ys in sp)
    if augment:
        C, H, W = cfg.get("image_shape", (1, 28, 28))
        Xtr = sp.train[0]
        out = ((Xtr.reshape(len(Xtr), C, H, W).astype(np.float32, copy=False), sp.train[1]),) + out[1:]
    return out, st, ncls


def build_augment(cfg, standardizer):
    """The training loader's batch transform for ``cfg['augment']`` (None for 'none').

    'crop': a random 28x28 window of the image zero-padded by ``crop_padding`` (default 2)
    pixels on each side; 'flip': mirror left-right with probability 1/2 (clothing is
    left-right symmetric, so the mirror image is another plausible sample of the class);
    then the same z-score as the validation and test inputs.
    """
    kind = _augment(cfg)
    if kind == "none":
        return None
    from varlens.vision import transforms as T
    C, H, W = cfg.get("image_shape", (1, 28, 28))
    steps = []
    if "crop" in kind:
        steps.append(T.BatchRandomCrop((H, W), padding=int(cfg.get("crop_padding", 2))))
    if "flip" in kind:
        steps.append(T.BatchRandomHorizontalFlip(0.5))
    mean = np.asarray(standardizer.mean, dtype=np.float64).reshape(C, H, W)
    std = np.asarray(standardizer.std, dtype=np.float64).reshape(C, H, W)
    steps.append(T.Normalize(mean, std))
    return T.Compose(steps)


def build_loaders(cfg, arrays, standardizer=None):
    """DataLoaders over TensorDatasets; the training one shuffles with its own seeded generator
    (and augments with ``build_augment`` when the config asks for it)."""
    import varlens as vl
    from varlens.utils.data import DataLoader, TensorDataset
    (tr, va, te) = arrays
    g = vl.Generator().manual_seed(int(cfg["seed"]) + 1)
    aug = build_augment(cfg, standardizer) if _augment(cfg) != "none" else None
    train = DataLoader(TensorDataset(*tr), batch_size=cfg["batch_size"], shuffle=True, generator=g,
                       batch_transform=aug)
    ebs = max(cfg["batch_size"], 1024)
    val = DataLoader(TensorDataset(*va), batch_size=ebs) if len(va[0]) else None
    test = DataLoader(TensorDataset(*te), batch_size=ebs) if len(te[0]) else None
    return train, val, test


# ---------------------------------------------------------------------- model and optimiser
def build_model(cfg, in_features, n_classes):
    from varlens.models import MLP
    if cfg["model"] in ("lenet", "vgg", "resnet"):
        from varlens.models.cnn import build_cnn
        return build_cnn(cfg, in_features, n_classes)
    if cfg["model"] == "vit":
        from varlens.models.vit import build_vit
        return build_vit(cfg, in_features, n_classes)
    hidden = [] if cfg["model"] == "linear" else list(cfg["hidden"])
    return MLP(in_features, hidden, n_classes, activation=cfg.get("activation", "relu"),
               dropout=float(cfg.get("dropout", 0.0)), batchnorm=bool(cfg.get("batchnorm", False)),
               init=cfg["init"])


def build_optimizer(cfg, model):
    from varlens import optim
    p, lr, wd = model.parameters(), cfg["lr"], cfg.get("weight_decay", 0.0)
    if cfg["optimizer"] == "sgd":
        return optim.SGD(p, lr=lr, momentum=cfg.get("momentum", 0.0), weight_decay=wd)
    if cfg["optimizer"] == "adam":
        return optim.Adam(p, lr=lr, weight_decay=wd)
    return optim.AdamW(p, lr=lr, weight_decay=wd)


def build_scheduler(cfg, optimizer):
    from varlens.optim import lr_scheduler as S
    kind = cfg.get("scheduler", "none")
    if kind == "none":
        return None
    if kind == "cosine":
        return S.CosineAnnealingLR(optimizer, T_max=cfg["epochs"])
    if kind == "step":
        return S.StepLR(optimizer, step_size=max(1, cfg["epochs"] // 3), gamma=0.1)
    return S.ReduceLROnPlateau(optimizer, mode="min", factor=0.1, patience=2)


def build_run(cfg, standardizer_state=None, device=None):
    """Seed everything and build (model, optimizer, scheduler, loss, loaders, standardizer).
    ``device`` ("cuda", "cpu" or None): the model is moved there before the optimiser is made
    (the loaders stay on the host; the Trainer moves each batch)."""
    import varlens as vl
    from varlens import nn
    check_config(cfg)
    vl.manual_seed(int(cfg["seed"]))
    arrays, st, ncls = load_arrays(cfg, standardizer_state)
    loaders = build_loaders(cfg, arrays, st)
    model = build_model(cfg, int(np.prod(arrays[0][0].shape[1:])), ncls)
    if device is not None:
        model.to(device)
    opt = build_optimizer(cfg, model)
    sched = build_scheduler(cfg, opt)
    loss = nn.CrossEntropyLoss(label_smoothing=float(cfg.get("label_smoothing") or 0.0))
    return model, opt, sched, loss, loaders, st

"""Checks on a recipe configuration read from a checkpoint (``varlens eval``, ``varlens lens
--checkpoint``) or given on the command line, made before anything is built: every key's type
and range, and an estimate of the memory the model needs, refused above ``MAX_MODEL_BYTES``.

A checkpoint is a file someone may have crafted: its stored configuration decides what gets
allocated, so a stored ``hidden`` of 200,000 must be refused with a clear message, not end in
an attempt to allocate 149 GiB.  Every problem raises ``StoredConfigError`` (a ``ValueError``)
naming the key, what was expected and what was found.
"""
from __future__ import annotations

import math

__all__ = ["StoredConfigError", "validate_config", "estimate_parameters", "estimate_bytes", "MAX_MODEL_BYTES"]

MAX_MODEL_BYTES = 2 * 1024 ** 3     # weights + gradients + two optimiser moments + one batch's activations
IN_SHAPE = {"digits": (1, 8, 8), "fashion-mnist": (1, 28, 28), "circle": (2, 1, 1), "moons": (2, 1, 1),
            "spirals": (2, 1, 1), "gaussians": (2, 1, 1)}
MAX_CLASSES = 16                    # digits and Fashion-MNIST have 10; the toy sets fewer


class StoredConfigError(ValueError):
    """A recipe configuration with a missing key, a value of the wrong type or range, or a model
    too large to build."""


def _value(cfg, key, optional, none_ok, what):
    """(True, value) when ``cfg[key]`` must be checked; (False, None) when it may be absent/null."""
    if key not in cfg:
        if optional:
            return False, None
        raise StoredConfigError(f"config: missing key {key!r} ({what})")
    v = cfg[key]
    return not (v is None and none_ok), v


def _int(cfg, key, lo, hi, optional=True, none_ok=False):
    check, v = _value(cfg, key, optional, none_ok, f"an int in [{lo}, {hi}]")
    if check and (type(v) is not int or not lo <= v <= hi):
        raise StoredConfigError(f"config: {key} must be an int in [{lo}, {hi}]"
                                + (" or null" if none_ok else "") + f", got {str(v)[:40]!r}")


def _float(cfg, key, lo, hi, optional=True, none_ok=False, lo_open=False, hi_open=False):
    rng = f"{'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}"
    check, v = _value(cfg, key, optional, none_ok, f"a number in {rng}")
    ok = (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
          and (lo < v if lo_open else lo <= v) and (v < hi if hi_open else v <= hi))
    if check and not ok:
        raise StoredConfigError(f"config: {key} must be a finite number in {rng}"
                                + (" or null" if none_ok else "") + f", got {str(v)[:40]!r}")


def _choice(cfg, key, valid, optional=False):
    if key not in cfg:
        if optional:
            return
        raise StoredConfigError(f"config: missing key {key!r} (one of {', '.join(map(str, valid))})")
    if not isinstance(cfg[key], str) or cfg[key] not in valid:
        from varlens.train.recipes import unknown     # names the closest valid values
        raise StoredConfigError(str(unknown(key, str(cfg[key])[:40], list(valid))))


def _int_list(cfg, key, lo, hi, max_len, optional=True):
    if key not in cfg:
        if optional:
            return
        raise StoredConfigError(f"config: missing key {key!r} (a list of ints)")
    v = cfg[key]
    if not isinstance(v, (list, tuple)) or len(v) > max_len or not all(type(x) is int and lo <= x <= hi for x in v):
        raise StoredConfigError(f"config: {key} must be a list of at most {max_len} ints in [{lo}, {hi}], "
                                f"got {str(v)[:60]}")


def _bool(cfg, key):
    if key in cfg and not isinstance(cfg[key], bool):
        raise StoredConfigError(f"config: {key} must be true or false, got {str(cfg[key])[:40]!r}")


def validate_config(cfg):
    """Check a recipe configuration before building anything; returns it.  Raises
    StoredConfigError (a ValueError) naming the first problem."""
    from varlens.train.recipes import AUGMENTS, DATASETS, MODELS, OPTIMIZERS, SCHEDULERS
    from varlens.models.mlp import ACTIVATIONS, INITS
    if not isinstance(cfg, dict):
        raise StoredConfigError(f"config: expected a dict of recipe settings, got {type(cfg).__name__}")
    _choice(cfg, "dataset", DATASETS)
    _choice(cfg, "model", MODELS)
    _choice(cfg, "optimizer", OPTIMIZERS)
    _choice(cfg, "scheduler", SCHEDULERS, optional=True)
    _choice(cfg, "init", INITS)
    _choice(cfg, "activation", tuple(ACTIVATIONS), optional=True)
    _choice(cfg, "augment", AUGMENTS, optional=True)
    _choice(cfg, "shortcut", ("A", "B"), optional=True)
    _int(cfg, "batch_size", 1, 1 << 16, optional=False)
    _int(cfg, "epochs", 1, 10 ** 6, optional=False)
    _int(cfg, "seed", 0, 2 ** 32 - 1, optional=False)
    _float(cfg, "lr", 0, 1e3, optional=False, lo_open=True)
    _int(cfg, "accumulate", 1, 10 ** 4)
    _int(cfg, "early_stopping", 1, 10 ** 6, none_ok=True)
    _int(cfg, "n_samples", 10, 10 ** 6)
    _int(cfg, "width", 1, 4096)
    _int(cfg, "cnn_hidden", 0, 1 << 16)
    _int(cfg, "blocks", 1, 64)
    _int(cfg, "patch_size", 1, 28)
    _int(cfg, "dim", 1, 1 << 14)
    _int(cfg, "depth", 1, 256)
    _int(cfg, "heads", 1, 256)
    _int(cfg, "mlp_dim", 1, 1 << 16)
    _int(cfg, "crop_padding", 0, 28)
    _int(cfg, "in_channels", 1, 4)
    _int_list(cfg, "hidden", 1, 1 << 20, 64, optional=cfg["model"] != "mlp")
    _int_list(cfg, "depths", 0, 64, 8)
    _int_list(cfg, "widths", 1, 4096, 8)
    _int_list(cfg, "image_shape", 1, 4096, 3)
    _float(cfg, "weight_decay", 0, 10)
    _float(cfg, "momentum", 0, 1)
    _float(cfg, "dropout", 0, 1, hi_open=True)
    _float(cfg, "label_smoothing", 0, 1, none_ok=True)
    _float(cfg, "grad_clip", 0, 1e12, none_ok=True, lo_open=True)
    for key in ("batchnorm", "skip", "global_pool"):
        _bool(cfg, key)
    if "data_root" in cfg and cfg["data_root"] is not None and not isinstance(cfg["data_root"], str):
        raise StoredConfigError(f"config: data_root must be a path string or null, got {str(cfg['data_root'])[:40]!r}")
    if "image_shape" in cfg:
        C, H, W = (list(cfg["image_shape"]) + [1, 1, 1])[:3]
        if C * H * W != math.prod(IN_SHAPE[cfg["dataset"]]):
            raise StoredConfigError(f"config: image_shape {cfg['image_shape']} does not hold the "
                                    f"{math.prod(IN_SHAPE[cfg['dataset']])} values of a {cfg['dataset']} input")
    need = estimate_bytes(cfg)
    if need > MAX_MODEL_BYTES:
        raise StoredConfigError(
            f"config: this {cfg['model']} would need about {need / 2 ** 30:.1f} GiB ({estimate_parameters(cfg):,} "
            f"parameters; weights, gradients, optimiser state and one batch), above the limit of "
            f"{MAX_MODEL_BYTES / 2 ** 30:.0f} GiB (varlens.commands.stored_config.MAX_MODEL_BYTES); refusing to "
            f"build it")
    return cfg


def _linear(a, b):
    return a * b + b


def estimate_parameters(cfg):
    """An upper estimate of the model's parameter count from the recipe settings alone (exact
    for the MLP; within a small factor for the convolutional and transformer models)."""
    C, H, W = IN_SHAPE[cfg["dataset"]]
    if "image_shape" in cfg:
        C, H, W = (list(cfg["image_shape"]) + [1, 1, 1])[:3]
    n_in, ncls, model = C * H * W, MAX_CLASSES, cfg["model"]
    if model in ("mlp", "linear"):
        dims = [n_in] + ([] if model == "linear" else list(cfg.get("hidden") or [])) + [ncls]
        return sum(_linear(a, b) + 2 * b for a, b in zip(dims, dims[1:]))
    if model == "lenet":
        w = cfg.get("width", 1)
        c1, c2 = 6 * w, 16 * w
        return 25 * C * c1 + 25 * c1 * c2 + _linear(c2 * (H // 4 + 1) * (W // 4 + 1), 120) + 120 * 84 + 84 * ncls
    if model == "vgg":
        depths, width = list(cfg.get("depths", (2, 2))), cfg.get("width", 32)
        n, cin = 0, C
        for s, d in enumerate(depths):
            cout = width * 2 ** s
            for _ in range(d):
                n += 9 * cin * cout + 3 * cout
                cin = cout
        feat = cin * max(1, H // 2 ** len(depths)) * max(1, W // 2 ** len(depths))
        hidden = cfg.get("cnn_hidden", 0)
        return n + (_linear(feat, hidden) + _linear(hidden, ncls) if hidden else _linear(feat, ncls))
    if model == "resnet":
        widths, blocks = list(cfg.get("widths", (16, 32, 64))), cfg.get("blocks", 1)
        n, cin = 9 * C * widths[0], widths[0]
        for w in widths:
            for _ in range(blocks):
                n += 9 * cin * w + 9 * w * w + cin * w + 6 * w
                cin = w
        return n + _linear(cin, ncls)
    # vit
    p, dim, depth, mlp = cfg.get("patch_size", 7), cfg.get("dim", 64), cfg.get("depth", 4), cfg.get("mlp_dim", 128)
    tokens = (H // p) * (W // p) + 1
    return (_linear(C * p * p, dim) + tokens * dim + depth * (4 * dim * dim + 2 * dim * mlp + 9 * dim + mlp)
            + _linear(dim, ncls))


def estimate_bytes(cfg):
    """Bytes needed to build and train or evaluate the model: 4 float32 copies of the parameters
    (weights, gradients, two optimiser moments) plus one evaluation batch's widest activations."""
    params = estimate_parameters(cfg)
    batch = max(cfg["batch_size"], 1024)          # evaluation batches (recipes.build_loaders)
    C, H, W = IN_SHAPE[cfg["dataset"]]
    widths = list(cfg.get("hidden") or []) + [C * H * W]
    if cfg["model"] in ("lenet", "vgg", "resnet"):
        widths.append(max([cfg.get("width", 32)] + list(cfg.get("widths", []))) * H * W)
    if cfg["model"] == "vit":
        tokens = (H // cfg.get("patch_size", 7)) * (W // cfg.get("patch_size", 7)) + 1
        widths.append(tokens * max(cfg.get("mlp_dim", 128), cfg.get("dim", 64))
                      + cfg.get("heads", 4) * tokens * tokens)
    return 4 * 4 * params + 4 * 2 * batch * max(widths)

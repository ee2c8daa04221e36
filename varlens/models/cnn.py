"""Build the CNNs of the Fashion-MNIST recipes from a recipe config (used by varlens.train.recipes).

Keys read: model ('lenet', 'vgg', 'resnet'), image_shape ([C, H, W], default [1, 28, 28]),
and per model: lenet: width, batchnorm, dropout; vgg: depths, width, batchnorm, dropout,
cnn_hidden, global_pool; resnet: blocks, widths, shortcut, skip.
"""
from __future__ import annotations

CNN_MODELS = ("lenet", "vgg", "resnet")


def build_cnn(cfg, in_features, n_classes):
    from varlens.models.lenet import LeNet5
    from varlens.models.resnet import ResNet
    from varlens.models.vgg import VGG
    C, H, W = cfg.get("image_shape", (1, 28, 28))
    if C * H * W != in_features:
        raise ValueError(f"build_cnn: image_shape {C}x{H}x{W} does not match the {in_features} input features")
    name = cfg["model"]
    if name == "lenet":
        return LeNet5(n_classes, C, H, width=int(cfg.get("width", 1)), batchnorm=bool(cfg.get("batchnorm", False)),
                      dropout=float(cfg.get("dropout", 0.0)))
    if name == "vgg":
        return VGG(n_classes, C, H, depths=tuple(cfg.get("depths", (2, 2))), width=int(cfg.get("width", 32)),
                   batchnorm=bool(cfg.get("batchnorm", True)), dropout=float(cfg.get("dropout", 0.0)),
                   global_pool=bool(cfg.get("global_pool", False)), hidden=int(cfg.get("cnn_hidden", 0)))
    if name == "resnet":
        return ResNet(n_classes, C, H, blocks=int(cfg.get("blocks", 1)), widths=tuple(cfg.get("widths", (16, 32, 64))),
                      shortcut=cfg.get("shortcut", "B"), skip=bool(cfg.get("skip", True)))
    raise ValueError(f"build_cnn: model must be one of {CNN_MODELS}, got {name!r}")

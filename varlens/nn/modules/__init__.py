"""torch.nn.modules: the submodule paths PyTorch code imports classes from
(``from torch.nn.modules.loss import _Loss``, ``torch.nn.modules.batchnorm._BatchNorm``,
``torch.nn.modules.module.Module``).

varlens.nn's module files carry torch.nn.modules's file names (loss.py, batchnorm.py, conv.py,
...), so each ``varlens.nn.modules.<name>`` is registered here as that very module object
(``varlens.nn.modules.loss is varlens.nn.loss``): one definition of every class, reachable under
both paths.  ``varlens.nn.modules`` itself holds every public module class, as torch's does.
"""
import importlib as _importlib
import sys as _sys

_nn = _importlib.import_module("varlens.nn")   # by path: during varlens.nn's own import the name varlens.nn may still be ops.nn

# torch.nn.modules's submodules (torch 2.13) -> the varlens.nn module that holds the same classes
_SUBMODULES = {name: name for name in (
    "activation", "adaptive", "batchnorm", "channelshuffle", "container", "conv", "distance", "dropout",
    "flatten", "fold", "instancenorm", "linear", "loss", "module", "normalization", "padding",
    "pixelshuffle", "pooling", "rnn", "sparse", "transformer", "upsampling")}

for _name, _target in _SUBMODULES.items():
    _mod = _importlib.import_module(f"varlens.nn.{_target}")
    _sys.modules[f"{__name__}.{_name}"] = _mod
    globals()[_name] = _mod

# classes torch keeps in a different file than varlens does: re-exported (same objects) where torch has them
for _name, _classes in {"batchnorm": ("SyncBatchNorm",), "activation": ("MultiheadAttention",)}.items():
    for _cls in _classes:
        setattr(globals()[_name], _cls, getattr(_nn, _cls))

# every public class of varlens.nn that is a Module subclass (torch.nn.modules.__all__'s content)
globals().update({_k: _v for _k, _v in vars(_nn).items()
                  if isinstance(_v, type) and issubclass(_v, _nn.Module) and not _k.startswith("_")})
del _name, _target, _mod, _classes, _cls

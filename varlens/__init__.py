"""varlens: a NumPy deep-learning framework with its own autograd, built to make the
mathematics of deep learning (and the variance lens) visible.

The public API follows PyTorch's names: ``varlens.tensor``, ``Tensor.backward``,
``varlens.no_grad``, ``varlens.nn``, ``varlens.optim``, ``varlens.utils.data``.
"""
from varlens import backend
from varlens.backend import get_num_threads, set_num_threads  # noqa: F401
from varlens.backend import (bool_, double, float, float16, float32, float64, get_default_dtype,
                             half, int, int8, int16, int32, int64, long, set_default_dtype,
                             short, uint8)
from varlens.tensor import Size, Tensor, device, tensor
from varlens import ops
from varlens.ops import *  # noqa: F401,F403  (varlens.exp, varlens.cat, ...)
from varlens.ops import (abs, all, any, max, min, pow, round, sum)  # noqa: F401  (shadow builtins on purpose)
from varlens.creation import (arange, as_tensor, bernoulli, empty, empty_like, eye, from_numpy, full,
                              full_like, linspace, multinomial, normal, ones, ones_like, rand, rand_like, randint,
                              randn, randn_like, randperm, zeros, zeros_like)
from varlens.random import Generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state
from varlens import autograd
from varlens import cuda  # noqa: F401  (cuda.is_available() is False)
import varlens.linalg as linalg  # noqa: E402  (torch.linalg; replaces the ops.linalg name star-imported above)
import math as _math
import numpy as _np

inf, nan, pi, e = _math.inf, _math.nan, _math.pi, _math.e
finfo, iinfo = _np.finfo, _np.iinfo
from varlens.serialization import load, save  # noqa: F401  (safe torch.save/torch.load)
from varlens.autograd import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from varlens import nn  # noqa: E402  (varlens.nn.Linear, as torch.nn)
from varlens import optim  # noqa: E402  (varlens.optim.AdamW, as torch.optim)
import varlens.utils.data  # noqa: E402,F401  (varlens.utils.data.DataLoader)

bool = bool_  # noqa: A001  (varlens.bool, as torch.bool)
float_ = float
__version__ = "0.1.0"


def is_tensor(obj):
    return isinstance(obj, Tensor)


def numel(x):
    return x.numel()


_LAZY = ("datasets", "train", "lens", "theory", "models", "info", "stats", "text", "vision",
         "generative", "examples", "serialization", "distributions")


def __getattr__(name):
    """Import the heavier subpackages (varlens.datasets, varlens.lens, ...) on first use."""
    if name in _LAZY:
        import importlib
        return importlib.import_module(f"varlens.{name}")
    raise AttributeError(f"module 'varlens' has no attribute {name!r}")

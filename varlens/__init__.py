"""varlens: a NumPy deep-learning framework with its own autograd, built to make the
mathematics of deep learning (and the variance lens) visible.

The public API follows PyTorch's names: ``varlens.tensor``, ``Tensor.backward``,
``varlens.no_grad``, ``varlens.nn``, ``varlens.optim``, ``varlens.utils.data``.
"""
import warnings as _warnings
# NumPy's floating-point RuntimeWarnings (log of 0, 0/0, sqrt of a negative, overflow) raised in
# varlens's own array code are not shown: PyTorch returns inf/nan silently and so does varlens
# (varlens.autograd.detect_anomaly names the op that made the first NaN/Inf).  The filter only
# matches warnings attributed to varlens modules; it costs nothing per op.
_warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"varlens(\.|$)")
from varlens.core.array import get_num_threads, set_num_threads
from varlens.core.arg_rules import torch_args as _arg_rule  # (marks below; varlens/_torch_args.py reads them)
from varlens.core.dtypes import (bool_, double, float, float16, float32, float64, get_default_dtype,
                                 half, int, int8, int16, int32, int64, long, set_default_dtype,
                                 short, uint8)
from varlens.core import dtypes as _dtypes  # noqa: E402
globals().update({_k: getattr(_dtypes, _k) for _k in _dtypes.UNSUPPORTED_DTYPES})  # bfloat16...: names that refuse use
from varlens.core.tensor import Size, Tensor, device, tensor
from varlens import ops
from varlens import _surface  # noqa: E402  (the Tensor methods and operators: varlens/_surface.py)

_surface.install_methods()
from varlens.ops import *  # noqa: F401,F403  (varlens.exp, varlens.cat, ...)
from varlens.ops import (abs, all, any, max, min, pow, round, sum)  # noqa: F401  (shadow builtins on purpose)
from varlens.ops.creation import (arange, as_tensor, bernoulli, empty, empty_like, eye, from_numpy, full,
                              full_like, linspace, multinomial, normal, ones, ones_like, rand, rand_like, randint,
                              randn, randn_like, randperm, zeros, zeros_like)
from varlens.random import Generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state
from varlens import autograd
from varlens import cuda  # noqa: F401  (cuda.is_available() is False)
from varlens import accelerator  # noqa: F401,E402  (torch.accelerator: no accelerator, CPU answers)
import varlens.linalg as linalg  # noqa: E402  (torch.linalg; replaces the ops.linalg name star-imported above)
import varlens.special as special  # noqa: E402  (torch.special: varlens/special.py)
import math as _math
import numpy as _np

inf, nan, pi, e = _math.inf, _math.nan, _math.pi, _math.e
from varlens.core.dtypes import finfo, iinfo  # noqa: E402,F401
from varlens.core.tensor import get_printoptions, set_printoptions  # noqa: E402,F401
from varlens.serialization import load, save  # noqa: F401  (safe torch.save/torch.load)
from varlens.autograd import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from varlens import nn  # noqa: E402  (varlens.nn.Linear, as torch.nn)
import varlens.nn.functional as _F  # noqa: E402
from varlens import optim  # noqa: E402  (varlens.optim.AdamW, as torch.optim)
import varlens.utils.data  # noqa: E402,F401  (varlens.utils.data.DataLoader)

bool = bool_  # noqa: A001  (varlens.bool, as torch.bool)
float_ = float
from varlens import version  # noqa: E402  (torch.version: cuda is None)
from varlens.ops import return_types  # noqa: E402  (torch.return_types: sort, topk, max, ...)
__version__ = version.__version__


class memory_format:
    """torch's memory-format tags (preserve_format, contiguous_format, channels_last,
    channels_last_3d).  varlens arrays are C-ordered NumPy arrays: a memory_format argument is
    accepted and changes nothing."""

    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return f"varlens.{self._name}"


preserve_format = memory_format("preserve_format")
contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")


dtype = _np.dtype   # torch.dtype: varlens dtypes are NumPy dtype objects (docs/conventions.md)


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """torch.empty_strided: varlens arrays are C-ordered, so the strides are not honoured and the
    result is ``empty(size)`` (its values are unspecified either way)."""
    return empty(tuple(size), dtype=dtype, device=device, requires_grad=requires_grad)


@_arg_rule(wrap=False)
def is_tensor(obj):
    return isinstance(obj, Tensor)


@_arg_rule(tensor_first=True)
def numel(x):
    return x.numel()


_LAZY = ("datasets", "train", "lens", "theory", "models", "info", "stats", "text", "vision",
         "generative", "examples", "serialization", "distributions", "distributed",
         "onnx", "jit", "hub", "fft", "testing", "func")  # torch.onnx/jit/hub/fft: refusals or no-ops that say so


def __getattr__(name):
    """Import the heavier subpackages (varlens.datasets, varlens.lens, ...) on first use."""
    if name in _LAZY:
        import importlib
        return importlib.import_module(f"varlens.{name}")
    if name == "vmap":   # torch.vmap: torch.func.vmap under its top-level name
        from varlens.func import vmap
        return vmap
    raise AttributeError(f"module 'varlens' has no attribute {name!r}")


# ---- PyTorch API compatibility (docs/conventions.md, "PyTorch API compatibility")
from varlens import backends, amp  # noqa: E402,F401  (torch.backends.cudnn..., torch.amp: pass-throughs)
from varlens.amp import autocast  # noqa: E402,F401
from varlens.autograd import is_inference_mode_enabled  # noqa: E402,F401
from varlens.ops.creation import (BoolTensor, ByteTensor, CharTensor, DoubleTensor, FloatTensor,  # noqa: E402,F401
                              HalfTensor, IntTensor, LongTensor, ShortTensor)


@_arg_rule(tensor_first=True)
def dropout(input, p, train):  # noqa: A002
    """torch.dropout(input, p, train): nn.functional.dropout with torch's positional names."""
    return _F.dropout(input, p, train)


_surface.install_namespace(globals())  # torch.* functions and keyword aliases (varlens/_surface.py)
import importlib as _importlib  # noqa: E402
from varlens import random  # noqa: E402  (torch.random: manual_seed, fork_rng)

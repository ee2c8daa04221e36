"""Process-wide switches PyTorch programs set: float32 matmul precision, deterministic algorithms,
inter-op threads, ``compile`` (an identity: varlens runs eagerly), flush-denormal.  varlens accepts
and records them; none changes a result (NumPy matmul is full precision, every op is
deterministic on the CPU).  Exposed as varlens.set_float32_matmul_precision etc."""
from __future__ import annotations

from varlens.core import array as _B
from varlens.core.arg_rules import torch_args
from varlens.core.tensor import device as _device


# ---------------------------------------------------------------- runtime switches training scripts call
_SETTINGS = {"matmul_precision": "highest", "deterministic": False, "warn_only": False, "interop_threads": 1}


def set_float32_matmul_precision(precision):
    """Accepted for compatibility: NumPy's float32 matmul is always full precision."""
    if precision not in ("highest", "high", "medium"):
        raise RuntimeError(f"set_float32_matmul_precision: precision must be 'highest', 'high' or 'medium', "
                           f"got {precision!r}")
    _SETTINGS["matmul_precision"] = precision


def get_float32_matmul_precision():
    return _SETTINGS["matmul_precision"]


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Accepted for compatibility: every varlens op is already deterministic on CPU."""
    if not isinstance(mode, bool):
        raise TypeError(f"use_deterministic_algorithms: mode must be a bool, got {type(mode).__name__}")
    _SETTINGS["deterministic"], _SETTINGS["warn_only"] = mode, bool(warn_only)


def are_deterministic_algorithms_enabled():
    return _SETTINGS["deterministic"]


def is_deterministic_algorithms_warn_only_enabled():
    return _SETTINGS["warn_only"]


def set_num_interop_threads(num):
    if not isinstance(num, int) or num < 1:
        raise RuntimeError(f"set_num_interop_threads: expected a positive int, got {num!r}")
    _SETTINGS["interop_threads"] = num


def get_num_interop_threads():
    return _SETTINGS["interop_threads"]


@torch_args(wrap=False)
def compile(model=None, **kwargs):  # noqa: A001
    """torch.compile stand-in: varlens runs eagerly, so the model (or function) comes back as is;
    used as a decorator with options (``@compile(mode=...)``) it returns the identity decorator."""
    if model is None:
        return lambda m: m
    return model


def set_flush_denormal(mode):
    """Returns False: flushing denormals is not supported (NumPy keeps them)."""
    return False


def set_default_device(device):
    """torch.set_default_device: varlens creates tensors on the CPU, so ``'cpu'``, a cpu device and
    None are accepted (nothing changes); a CUDA device raises the error any CUDA request gets
    without a GPU (and, with one, that varlens does not move factory functions there)."""
    if device is None:
        return
    if not isinstance(device, str) and not hasattr(device, "type"):
        raise TypeError(f"set_default_device(): argument 'device' must be a device, a string or None, "
                        f"not {type(device).__name__}")
    if _B.namespace_of_device(device) is not _B.np:
        raise RuntimeError(f"set_default_device(): argument 'device' is {str(device)!r}: varlens creates "
                           "tensors on the CPU only; pass device= to each factory or call .to(device)")


def get_default_device():
    """torch.get_default_device: always ``device('cpu')`` in varlens."""
    return _device("cpu")

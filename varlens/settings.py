"""Process-wide switches PyTorch programs set: float32 matmul precision, deterministic algorithms,
inter-op threads, ``compile`` (an identity: varlens runs eagerly), flush-denormal.  varlens accepts
and records them; none changes a result (NumPy matmul is full precision, every op is
deterministic on the CPU).  Exposed as varlens.set_float32_matmul_precision etc."""
from __future__ import annotations

from varlens.core.arg_rules import torch_args


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

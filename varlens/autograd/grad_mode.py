"""Grad mode: whether new ops are recorded on the tape (no_grad, enable_grad, ...)."""
from __future__ import annotations

import functools

# a one-element list so hot paths read it without a function call
_enabled = [True]
_anomaly = [False]


def is_grad_enabled() -> bool:
    return _enabled[0]


class _GradModeContext:
    """Base for the grad-mode context managers; also usable as decorators."""

    mode = True

    def __enter__(self):
        self._prev = _enabled[0]
        _enabled[0] = self.mode

    def __exit__(self, *exc):
        _enabled[0] = self._prev
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__() if type(self) is not set_grad_enabled else set_grad_enabled(self.mode):
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradModeContext):
    """Context manager / decorator: ops inside are not recorded for backward."""

    mode = False


class enable_grad(_GradModeContext):
    """Context manager / decorator: turn recording back on inside a no_grad block."""

    mode = True


class set_grad_enabled(_GradModeContext):
    """``set_grad_enabled(False)`` acts immediately (like PyTorch) and as a context manager."""

    def __init__(self, mode: bool):
        self.mode = bool(mode)
        self._prev = _enabled[0]
        _enabled[0] = self.mode

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        _enabled[0] = self._prev
        return False


class inference_mode(no_grad):
    """Alias of no_grad (varlens has no separate inference tensors)."""

    def __init__(self, mode: bool = True):
        self.mode = not mode


class detect_anomaly:
    """Check every op's output (forward) and every gradient (backward) for NaN/Inf.

    The first offender raises a RuntimeError naming the op. Slow; for debugging.
    """

    def __init__(self, check_nan: bool = True):
        self.check = check_nan

    def __enter__(self):
        self._prev = _anomaly[0]
        _anomaly[0] = self.check

    def __exit__(self, *exc):
        _anomaly[0] = self._prev
        return False


def set_detect_anomaly(mode: bool) -> None:
    _anomaly[0] = bool(mode)


def is_anomaly_enabled() -> bool:
    return _anomaly[0]

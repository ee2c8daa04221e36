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

    def __new__(cls, *args, **kwargs):
        # bare decorator use, ``@no_grad`` without parentheses (PyTorch allows it)
        if cls in (no_grad, enable_grad) and len(args) == 1 and callable(args[0]) and not kwargs:
            return cls()(args[0])
        return super().__new__(cls)

    def __enter__(self):
        self._prev = _enabled[0]
        _enabled[0] = self.mode

    def __exit__(self, *exc):
        _enabled[0] = self._prev
        return False

    def _fresh(self):
        return type(self)()

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self._fresh():
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

    def _fresh(self):
        return set_grad_enabled(self.mode)

    def __call__(self, fn):
        _enabled[0] = self._prev  # used as a decorator: undo the immediate switch made by __init__
        return super().__call__(fn)

    def __exit__(self, *exc):
        _enabled[0] = self._prev
        return False


class inference_mode(no_grad):
    """Alias of no_grad (varlens has no separate inference tensors)."""

    def __init__(self, mode: bool = True):
        self.mode = not mode

    def _fresh(self):
        return inference_mode(not self.mode)

    def __enter__(self):
        self._prev_inf = _inference[0]
        _inference[0] = not self.mode
        super().__enter__()

    def __exit__(self, *exc):
        _inference[0] = self._prev_inf
        return super().__exit__(*exc)


_inference = [False]


def is_inference_mode_enabled() -> bool:
    """True inside ``inference_mode()`` (torch.is_inference_mode_enabled)."""
    return _inference[0]


class detect_anomaly:
    """PyTorch's anomaly mode: every op notes where its forward ran (module path and line), and
    a backward that returns NaN raises RuntimeError naming the op and that place
    (varlens/core/anomaly.py).  Infinite values are not anomalies (a -inf mask before softmax
    is fine), as in PyTorch.  Slow; for debugging.
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

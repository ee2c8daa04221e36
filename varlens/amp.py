"""torch.amp / torch.autocast and GradScaler, as pass-throughs.

Automatic mixed precision runs chosen ops in float16/bfloat16 on a GPU.  varlens runs
its ops in the tensors' own dtypes (float32 by default), so ``autocast`` changes
nothing: it is a context manager and decorator that only checks its arguments.
``GradScaler`` keeps torch's interface (scale, unscale_, step, update, get_scale,
state_dict): when enabled, scale(loss) multiplies by the current scale and unscale_/step
divide it back out (skipping a step whose gradients hold inf/NaN and backing the scale
off), so training gives the same numbers as without it; when disabled it passes
everything through.

On the CUDA device (``GradScaler("cuda")`` when varlens has one) the scale, the growth tracker
and the found-inf flags live on the device, as PyTorch's: ``unscale_`` and ``update`` read
nothing on the host, and ``step`` reads the found-inf flags once (to decide whether to step,
PyTorch's one synchronisation per step).  ``get_scale()`` and ``state_dict()`` read the scale
on the host, as in PyTorch.
"""
from __future__ import annotations

import functools

import numpy as np

from varlens.core import array as B

_DEVICES = ("cpu", "cuda", "mps", "xpu", "xla", "hpu", "mtia", "meta")


class autocast:
    """``with autocast('cpu'):`` / ``@autocast('cuda')``: accepted and does nothing in varlens."""

    def __init__(self, device_type="cpu", dtype=None, enabled=True, cache_enabled=None):
        dt = str(getattr(device_type, "type", device_type))
        if dt not in _DEVICES:
            raise ValueError(f"autocast: device_type must be one of {_DEVICES}, got {device_type!r}")
        self.device_type, self.fast_dtype, self._enabled = dt, dtype, bool(enabled)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        return wrapper


def is_autocast_available(device_type):
    return False


def custom_fwd(fwd=None, *, device_type="cpu", cast_inputs=None):
    """Decorator for a custom Function's forward under autocast: a no-op in varlens."""
    if fwd is None:
        return lambda f: f
    return fwd


def custom_bwd(bwd=None, *, device_type="cpu"):
    if bwd is None:
        return lambda f: f
    return bwd


class GradScaler:
    """Loss scaling with torch's interface; see the module docstring."""

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        dev = str(getattr(device, "type", device))
        self._xp = None       # host bookkeeping (Python floats); the device's array library on CUDA
        if enabled and dev.split(":")[0] == "cuda" and B.cuda_namespace(required=False) is not None:
            self._xp = B.cuda_namespace()
        elif enabled and dev != "cpu":
            # torch's default device is 'cuda'; with no such device torch disables the scaler
            # with a UserWarning, and so does varlens (no CuPy or no GPU here)
            import warnings
            warnings.warn(f"GradScaler is enabled for device {dev!r}, but that device is not available "
                          "(varlens.cuda.is_available() is False). Disabling.", UserWarning, stacklevel=2)
            enabled = False
        self.device = dev
        if growth_factor <= 1.0:
            raise ValueError(f"GradScaler: growth_factor must be > 1, got {growth_factor}")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"GradScaler: backoff_factor must be in (0, 1), got {backoff_factor}")
        self._enabled = bool(enabled)
        self._scale = float(init_scale)
        self._growth_factor, self._backoff_factor = float(growth_factor), float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._growth_tracker = 0
        self._unscaled = set()
        self._found_inf = {}
        if self._xp is not None:
            xp = self._xp
            self._scale = xp.asarray(np.float32(self._scale))
            self._growth_tracker = xp.zeros((), dtype=np.int32)

    def is_enabled(self):
        return self._enabled

    def get_scale(self):
        if not self._enabled:
            return 1.0
        return float(self._scale)    # (on the device: a host read, as PyTorch's .item())

    def scale(self, outputs):
        """outputs times the current scale (a tensor, or a list/tuple of them)."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        if self._xp is not None and not B.is_device_array(outputs._data):
            self._keep_on_host()
        if self._xp is not None:
            from varlens.core.tensor import Tensor
            return outputs * Tensor._make(self._scale.astype(outputs._data.dtype))
        return outputs * self._scale

    def _keep_on_host(self):
        """The loss is on the CPU although the scaler was made for CUDA (a script that picks its
        dtype from cuda.is_available() but trains on the CPU): PyTorch makes the scale on the
        outputs' device at the first scale(), so the bookkeeping moves to the host here (read once)."""
        self._scale = float(B.to_host(self._scale))
        self._growth_tracker = int(B.to_host(self._growth_tracker))
        self._xp = None

    def unscale_(self, optimizer):
        """Divide the gradients of ``optimizer``'s parameters by the scale (once per step)."""
        if not self._enabled:
            return
        if id(optimizer) in self._unscaled:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update()")
        from varlens.core.grad_mode import no_grad
        if self._xp is not None:
            self._unscale_on_device(optimizer)
            return
        inv = 1.0 / self._scale
        found = False
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        p.grad._data = p.grad._data * np.asarray(inv, dtype=p.grad._data.dtype)
                        if not bool(np.isfinite(p.grad._data).all()):
                            found = True
        self._unscaled.add(id(optimizer))
        self._found_inf[id(optimizer)] = found

    def _unscale_on_device(self, optimizer):
        """unscale_ on the device: gradients times 1/scale (rounded to float32, as PyTorch's
        inv_scale), and a device flag counting the gradients that hold inf/NaN; no host read."""
        xp = self._xp
        inv = (1.0 / self._scale.astype(np.float64)).astype(np.float32)
        found = xp.zeros((), dtype=np.float32)
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    g = p.grad._data * inv.astype(p.grad._data.dtype)
                    p.grad._data = g
                    found = found + xp.logical_not(xp.isfinite(g).all()).astype(np.float32)
        self._unscaled.add(id(optimizer))
        self._found_inf[id(optimizer)] = found

    def step(self, optimizer, *args, **kwargs):
        """Unscale (if not done yet) and call optimizer.step() unless a gradient is inf/NaN."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if id(optimizer) not in self._unscaled:
            self.unscale_(optimizer)
        found = self._found_inf.get(id(optimizer))
        if found is not None and float(found):    # on the device: the step's one host read
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None):
        """Adjust the scale: back off after an inf/NaN step, grow after growth_interval good steps."""
        if not self._enabled:
            return
        if self._xp is not None:
            self._update_on_device(new_scale)
        elif new_scale is not None:
            self._scale = float(new_scale.item() if hasattr(new_scale, "item") else new_scale)
        elif any(self._found_inf.values()):
            self._scale *= self._backoff_factor
            self._growth_tracker = 0
        else:
            self._growth_tracker += 1
            if self._growth_tracker == self._growth_interval:
                self._scale *= self._growth_factor
                self._growth_tracker = 0
        self._unscaled.clear()
        self._found_inf.clear()

    def _update_on_device(self, new_scale):
        """update() with the scale and growth tracker on the device (PyTorch's
        _amp_update_scale_): back off after inf/NaN, grow after growth_interval good steps."""
        xp = self._xp
        if new_scale is not None:
            v = getattr(new_scale, "_data", new_scale)
            self._scale = (B.to_namespace(v, xp) if B.is_array(v) else xp.asarray(v)).astype(np.float32)
            return
        found = None
        for f in self._found_inf.values():
            found = f if found is None else found + f
        tracker = self._growth_tracker + 1
        grow = tracker >= self._growth_interval
        if found is None:
            bad = xp.zeros((), dtype=np.bool_)
        else:
            bad = found > 0
        s = self._scale
        s = xp.where(bad, s * np.float32(self._backoff_factor),
                     xp.where(grow, s * np.float32(self._growth_factor), s))
        self._scale = s.astype(np.float32)
        self._growth_tracker = xp.where(xp.logical_or(bad, grow), 0, tracker).astype(np.int32)

    def get_growth_factor(self):
        return self._growth_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def get_growth_interval(self):
        return self._growth_interval

    def state_dict(self):
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": int(self._growth_tracker)}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if not state_dict:
            raise RuntimeError("GradScaler.load_state_dict: the state dict is empty (saved from a "
                               "disabled GradScaler?)")
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])
        if self._xp is not None:
            self._scale = self._xp.asarray(np.float32(self._scale))
            self._growth_tracker = self._xp.asarray(np.int32(self._growth_tracker))


__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd", "is_autocast_available"]

"""torch.cuda.amp: the CUDA spellings of autocast and GradScaler (deprecated in PyTorch in favour
of torch.amp, still common in public code).  ``autocast()`` does nothing (varlens.amp.autocast);
``GradScaler()`` scales on the CUDA device when varlens has one (its state on the device, see
varlens.amp) and otherwise disables itself with a UserWarning, as PyTorch's does on a machine
without CUDA."""
from varlens.amp import GradScaler as _GradScaler, autocast as _autocast, custom_bwd, custom_fwd  # noqa: F401

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]


class autocast(_autocast):
    """``torch.cuda.amp.autocast(enabled=True, dtype=torch.float16, cache_enabled=True)``."""

    def __init__(self, enabled=True, dtype=None, cache_enabled=True):
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_GradScaler):
    """``torch.cuda.amp.GradScaler(init_scale, growth_factor, backoff_factor, growth_interval,
    enabled)``: torch.amp.GradScaler on device 'cuda' (disabled, with a warning, without CUDA)."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                 enabled=True):
        super().__init__("cuda", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval, enabled=enabled)

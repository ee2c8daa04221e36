"""DataParallel: torch's single-process multi-GPU wrapper.  varlens runs on one device, so it
calls the wrapped module unchanged; it exists so that CPU programs written for torch (which
wrap their model and use ``model.module``) run as they are."""
from __future__ import annotations

from varlens.nn.module import Module


class DataParallel(Module):
    """Holds ``module`` (``.module``; state_dict keys get the ``module.`` prefix, as in PyTorch)
    and forwards every call to it.  ``device_ids`` may name only the one device there is."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DataParallel: module must be an nn.Module, got {type(module).__name__}")
        self.module = module
        self.device_ids = [] if device_ids is None else list(device_ids)
        self.output_device, self.dim = output_device, dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)

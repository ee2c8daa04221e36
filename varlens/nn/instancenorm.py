"""Instance normalisation: InstanceNorm1d/2d/3d.
"""
from __future__ import annotations

from varlens.nn import functional as F
from varlens.nn._device import _check_device
from varlens.nn.batchnorm import _NormBase


class _InstanceNorm(_NormBase):
    """Per-example, per-channel normalisation over the spatial axes; ``affine`` adds a weight
    (init 1) and bias (init 0) per channel; ``track_running_stats`` keeps running averages
    (used in eval mode), as BatchNorm does."""
    nd = 1

    def __init__(self, num_features, eps=1e-05, momentum=0.1, affine=False, track_running_stats=False,
                 device=None, dtype=None, *, bias=True):
        _check_device(device)
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def forward(self, input):
        name = type(self).__name__
        if input.ndim not in (self.nd + 1, self.nd + 2):
            raise ValueError(f"{name}: expected {self.nd + 1}D (unbatched) or {self.nd + 2}D (batched) input "
                             f"(got {input.ndim}D input of shape {tuple(input.shape)})")
        fdim = input.ndim - self.nd - 1
        if input.shape[fdim] != self.num_features and self.affine:
            raise ValueError(f"{name}: expected input's size at dim={fdim} to match num_features "
                             f"({self.num_features}), but got: {input.shape[fdim]}.")
        unb = input.ndim == self.nd + 1
        x = input.unsqueeze(0) if unb else input
        use_input = self.training or not self.track_running_stats
        mom = self.momentum if self.momentum is not None else 0.0    # as PyTorch's InstanceNorm
        y = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias, use_input, mom,
                            self.eps)
        return y.squeeze(0) if unb else y

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.affine and self.bias is not None}, track_running_stats={self.track_running_stats}")


class InstanceNorm1d(_InstanceNorm):
    nd = 1


class InstanceNorm2d(_InstanceNorm):
    nd = 2


class InstanceNorm3d(_InstanceNorm):
    nd = 3

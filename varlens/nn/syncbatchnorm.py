"""SyncBatchNorm: batch normalisation whose statistics are those of the global batch, the
union of every rank's local batch (torch.nn.SyncBatchNorm, over varlens.distributed).

Forward, per channel over the N and spatial axes of all ranks: one allreduce of the local sums
and element counts gives the mean, a second of the local sums of squared deviations from it the
biased variance (two passes, as accurate as one process's BatchNorm).  Backward: the gradient
with respect to the input needs two global sums, of dy and of dy * xhat, so one allreduce of the
two per-channel vectors; the weight and bias gradients stay local (DistributedDataParallel
averages them with the others).  Outside training, without an initialised process group or
with one rank, it is BatchNorm.
"""
from __future__ import annotations

from varlens.core import array as B
from varlens.core.array import xp
from varlens import distributed as dist
from varlens.nn.batchnorm import _BatchNorm
from varlens.ops.nn.norm import _SyncBatchNormFunction, _global_stats


class SyncBatchNorm(_BatchNorm):
    """Batch norm over (N, C, *) inputs with statistics over the batches of every rank of
    ``process_group`` (default: the world) while training."""

    def __init__(self, num_features, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True,
                 process_group=None, device=None, dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)
        self.process_group = process_group

    def _check_input_dim(self, input):
        if input.ndim < 2:
            raise ValueError(f"SyncBatchNorm: expected at least 2D input (got {input.ndim}D input)")
        if input.shape[1] != self.num_features:
            raise ValueError(f"SyncBatchNorm({self.num_features}): expected {self.num_features} channels in dim 1, "
                             f"got input of shape {tuple(input.shape)}")

    def forward(self, input):
        bn_training = self.training or (self.running_mean is None and self.running_var is None)
        need_sync = (bn_training and self.training and dist.is_initialized()
                     and dist.get_world_size(self.process_group) > 1)
        if not need_sync:
            return super().forward(input)
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.track_running_stats:
            self.num_batches_tracked._data += 1
            if self.momentum is None:
                nbt = self.num_batches_tracked._data   # (stays a device value on CUDA)
                factor = 1.0 / float(nbt) if nbt.__class__ is xp.ndarray else 1.0 / nbt
        group = dist.group.WORLD if self.process_group is None else self.process_group
        mean, var, count = _global_stats(input._data, group)
        invstd = 1.0 / B.namespace(var).sqrt(var + self.eps)
        out = _SyncBatchNormFunction.apply(input, self.weight, self.bias, mean, invstd, count, group)
        if self.track_running_stats:
            rm, rv = self.running_mean._data, self.running_var._data
            rm *= 1 - factor
            rm += factor * mean
            rv *= 1 - factor
            rv += factor * var * (count / (count - 1))
            self.running_mean._version[0] += 1
            self.running_var._version[0] += 1
        return out

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """Replace every BatchNorm*d in ``module`` by a SyncBatchNorm with the same state."""
        out = module
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            dt = (module.weight if module.weight is not None else module.running_mean)
            out = cls(module.num_features, module.eps, module.momentum, module.affine,
                      module.track_running_stats, process_group,
                      dtype=dt.dtype if dt is not None else None, bias=module.bias is not None or not module.affine)
            out.load_state_dict(module.state_dict())
            out.train(module.training)
        for name, child in list(module._modules.items()):
            if child is not None:
                new = cls.convert_sync_batchnorm(child, process_group)
                if new is not child:
                    out._modules[name] = new
        return out


__all__ = ["SyncBatchNorm"]

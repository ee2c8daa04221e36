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

from varlens.core.array import xp
from varlens.core.function import Function
from varlens.core.tensor import Tensor
from varlens import distributed as dist
from varlens.nn import functional as F
from varlens.nn.batchnorm import _BatchNorm


def _allreduce(arr, group):
    t = Tensor._make(arr)
    dist.all_reduce(t, group=group)
    return t._data


def _global_stats(x, group):
    """Per-channel mean, biased variance and element count over every rank's batch."""
    axes = (0,) + tuple(range(2, x.ndim))
    c = x.shape[1]
    s = xp.empty(c + 1, dtype=x.dtype)
    s[:c] = x.sum(axis=axes)
    s[c] = x.size // c if c else 0
    s = _allreduce(s, group)
    count = float(s[c])
    if count <= 1:
        raise ValueError(f"SyncBatchNorm: expected more than 1 value per channel when training over all "
                         f"ranks, got input size {tuple(x.shape)} on this rank and {int(count)} in all")
    mean = s[:c] / count
    xc = x - mean.reshape((1, -1) + (1,) * (x.ndim - 2))
    var = _allreduce((xc * xc).sum(axis=axes), group) / count
    return mean, var, count


class _SyncBatchNormFunction(Function):
    """y = (x - mean) * invstd * weight + bias with the global batch's statistics.  backward: with
    xhat = (x - mean) * invstd, m the global element count per channel and dyw = dy * weight,
    dx = invstd * (dyw - sum(dyw)/m - xhat * sum(dyw * xhat)/m) with the sums over all ranks
    (the derivative of the normalisation through both statistics, seed 003 §4.3.2's batch-norm
    backward with the batch spread over ranks); dweight = sum(dy * xhat), dbias = sum(dy), local."""

    def forward(self, x, weight, bias, mean, invstd, count, group):
        shape = (1, -1) + (1,) * (x.ndim - 2)
        xhat = (x - mean.reshape(shape)) * invstd.reshape(shape)
        y = xhat if weight is None else xhat * weight.reshape(shape)
        if bias is not None:
            y = y + bias.reshape(shape)
        self.save_for_backward(xhat, invstd, weight)
        self.meta = (shape, count, group)
        return y

    def backward(self, g):
        xhat, invstd, weight = self.saved
        shape, count, group = self.meta
        axes = (0,) + tuple(range(2, g.ndim))
        c = xhat.shape[1]
        sums = xp.empty(2 * c, dtype=g.dtype)
        sums[:c] = g.sum(axis=axes)
        sums[c:] = (g * xhat).sum(axis=axes)
        gb, gw = sums[:c].copy(), sums[c:].copy()  # local: DDP averages them with the other gradients
        if weight is not None:
            sums *= xp.concatenate([weight, weight])
        tot = _allreduce(sums, group)
        scale = invstd if weight is None else weight * invstd
        dx = scale.reshape(shape) * g - (invstd * tot[:c] / count).reshape(shape) \
            - xhat * (invstd * tot[c:] / count).reshape(shape)
        return dx, gw, gb


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
                factor = 1.0 / float(self.num_batches_tracked._data)
        group = dist.group.WORLD if self.process_group is None else self.process_group
        mean, var, count = _global_stats(input._data, group)
        invstd = 1.0 / xp.sqrt(var + self.eps)
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

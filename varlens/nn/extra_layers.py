"""More torch.nn layers: activations, padding, shuffles, fold/unfold, 1-D/adaptive/LP/unpooling,
Upsample in every mode, distances, LocalResponseNorm, InstanceNorm, EmbeddingBag.

Thin modules over varlens.nn.functional (the math and its gradients live there); names,
constructor arguments, defaults, parameter shapes and ``extra_repr`` follow PyTorch.
"""
from __future__ import annotations

import numbers

from varlens.core.array import xp
from varlens.nn import functional as F
from varlens.nn.functional.loss import _check_reduction
from varlens.nn.embedding import Embedding, _check_padding_idx, _check_sizes, _init_table
from varlens.nn.module import Module
from varlens.nn.norm import _BatchNorm, _NormBase
from varlens.core.tensor import Tensor

__all__ = [
    "Hardsigmoid", "Hardswish", "Hardshrink", "Softshrink", "Tanhshrink", "GLU", "RReLU", "Softmax2d",
    "PixelShuffle", "PixelUnshuffle", "ChannelShuffle", "Fold", "Unfold",
    "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
    "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
    "ReplicationPad3d", "CircularPad1d", "CircularPad2d", "CircularPad3d",
    "CosineSimilarity", "PairwiseDistance",
    "MaxPool1d", "AvgPool1d", "AdaptiveAvgPool1d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d", "LPPool1d", "LPPool2d", "MaxUnpool1d", "MaxUnpool2d",
    "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d",
    "LocalResponseNorm", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "EmbeddingBag",
    "FeatureAlphaDropout",
]


def _check_device(device):
    if device is not None and not str(device).startswith("cpu"):
        raise RuntimeError(f"device {device!r} is not available; varlens runs on the CPU")


def _ntuple(v, n, name, what):
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        return (int(v),) * n
    v = tuple(v)
    if len(v) != n:
        raise ValueError(f"{what}: {name} must be an int or a tuple of {n} ints, got {v!r}")
    return tuple(int(a) for a in v)


# ---------------------------------------------------------------- activations
class _Inplace(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace


class Hardsigmoid(_Inplace):
    """clamp(x/6 + 1/2, 0, 1)."""

    def forward(self, input):
        return F.hardsigmoid(input)


class Hardswish(_Inplace):
    """x * hardsigmoid(x)."""

    def forward(self, input):
        return F.hardswish(input)


class Hardshrink(Module):
    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return F.hardshrink(input, self.lambd)

    def extra_repr(self):
        return f"{self.lambd}"


class Softshrink(Hardshrink):
    def forward(self, input):
        return F.softshrink(input, self.lambd)


class Tanhshrink(Module):
    def forward(self, input):
        return F.tanhshrink(input)


class GLU(Module):
    """First half of ``dim`` times the sigmoid of the second half."""

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class RReLU(Module):
    """Leaky ReLU with a random slope U(lower, upper) per negative entry in training and the
    mean slope (lower + upper)/2 in evaluation."""

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace else "")


class Softmax2d(Module):
    """Softmax over the channel axis of (N, C, H, W) or (C, H, W)."""

    def forward(self, input):
        return F.softmax2d(input)


class FeatureAlphaDropout(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"FeatureAlphaDropout: dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return F.feature_alpha_dropout(input, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


# ---------------------------------------------------------------- shuffles, fold
class PixelShuffle(Module):
    def __init__(self, upscale_factor):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self):
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"


class ChannelShuffle(Module):
    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"


class Fold(Module):
    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input):
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Unfold(Module):
    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, input):
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, "
                f"stride={self.stride}")


# ---------------------------------------------------------------- padding
class _PadNd(Module):
    nd = 1
    mode = "constant"

    def __init__(self, padding):
        super().__init__()
        self.padding = _ntuple(padding, 2 * self.nd, "padding", type(self).__name__)

    def _check(self, input):
        if self.mode != "constant" and input.ndim not in (self.nd + 1, self.nd + 2):
            raise ValueError(f"{type(self).__name__}: expected a {self.nd + 1}-D (unbatched) or "
                             f"{self.nd + 2}-D (batched) input, got shape {tuple(input.shape)}")

    def forward(self, input):
        self._check(input)
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value):
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    nd = 1


class ConstantPad2d(_ConstantPadNd):
    nd = 2


class ConstantPad3d(_ConstantPadNd):
    nd = 3


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad1d(_ZeroPadNd):
    nd = 1


class ZeroPad2d(_ZeroPadNd):
    nd = 2


class ZeroPad3d(_ZeroPadNd):
    nd = 3


def _pad_class(name, nd, mode):
    return type(name, (_PadNd,), {"nd": nd, "mode": mode, "__module__": __name__,
                                  "__doc__": f"{mode.capitalize()} padding of the last {nd} dimension(s)."})


ReflectionPad1d = _pad_class("ReflectionPad1d", 1, "reflect")
ReflectionPad2d = _pad_class("ReflectionPad2d", 2, "reflect")
ReflectionPad3d = _pad_class("ReflectionPad3d", 3, "reflect")
ReplicationPad1d = _pad_class("ReplicationPad1d", 1, "replicate")
ReplicationPad2d = _pad_class("ReplicationPad2d", 2, "replicate")
ReplicationPad3d = _pad_class("ReplicationPad3d", 3, "replicate")
CircularPad1d = _pad_class("CircularPad1d", 1, "circular")
CircularPad2d = _pad_class("CircularPad2d", 2, "circular")
CircularPad3d = _pad_class("CircularPad3d", 3, "circular")


# ---------------------------------------------------------------- distances
class CosineSimilarity(Module):
    def __init__(self, dim=1, eps=1e-08):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    def __init__(self, p=2.0, eps=1e-06, keepdim=False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


# ---------------------------------------------------------------- pooling
class MaxPool1d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input):
        return F.max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool1d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        super().__init__()
        self.kernel_size = _ntuple(kernel_size, 1, "kernel_size", "AvgPool1d")
        self.stride = _ntuple(stride if stride is not None else kernel_size, 1, "stride", "AvgPool1d")
        self.padding = _ntuple(padding, 1, "padding", "AvgPool1d")
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, input):
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _Adaptive(Module):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_Adaptive):
    def forward(self, input):
        return F.adaptive_avg_pool1d(input, self.output_size)


class AdaptiveAvgPool3d(_Adaptive):
    def forward(self, input):
        return F.adaptive_avg_pool3d(input, self.output_size)


class AdaptiveMaxPool1d(_Adaptive):
    def __init__(self, output_size, return_indices=False):
        super().__init__(output_size)
        self.return_indices = return_indices

    def forward(self, input):
        return F.adaptive_max_pool1d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool2d(AdaptiveMaxPool1d):
    def forward(self, input):
        return F.adaptive_max_pool2d(input, self.output_size, self.return_indices)


class LPPool1d(Module):
    """(sum of x^p over each window)^(1/p)."""

    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type, self.kernel_size, self.stride, self.ceil_mode = norm_type, kernel_size, stride, ceil_mode

    def forward(self, input):
        return F.lp_pool1d(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self):
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"ceil_mode={self.ceil_mode}")


class LPPool2d(LPPool1d):
    def forward(self, input):
        return F.lp_pool2d(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)


class MaxUnpool1d(Module):
    nd = 1

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        what = type(self).__name__
        self.kernel_size = _ntuple(kernel_size, self.nd, "kernel_size", what)
        self.stride = _ntuple(stride if stride is not None else kernel_size, self.nd, "stride", what)
        self.padding = _ntuple(padding, self.nd, "padding", what)

    def forward(self, input, indices, output_size=None):
        fn = F.max_unpool1d if self.nd == 1 else F.max_unpool2d
        k, s, p = ((self.kernel_size[0], self.stride[0], self.padding[0]) if self.nd == 1 else
                   (self.kernel_size, self.stride, self.padding))
        return fn(input, indices, k, s, p, output_size)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool2d(MaxUnpool1d):
    nd = 2


# ---------------------------------------------------------------- upsampling
class Upsample(Module):
    """Resize by ``size`` or ``scale_factor``: modes 'nearest', 'nearest-exact', 'linear',
    'bilinear', 'bicubic', 'trilinear', 'area' (see F.interpolate)."""

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, (tuple, list)):
            self.scale_factor = tuple(float(f) for f in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode, self.align_corners, self.recompute_scale_factor = mode, align_corners, recompute_scale_factor

    def forward(self, input):
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self):
        info = f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None else f"size={self.size!r}"
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


# ---------------------------------------------------------------- normalisation
class LocalResponseNorm(Module):
    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


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


# ---------------------------------------------------------------- embedding bag
class EmbeddingBag(Module):
    """Sums, means or maxima of embedding rows per bag, without building the (bag, len, dim)
    tensor of an Embedding; weight (num_embeddings, embedding_dim) init N(0, 1)."""

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                 mode="mean", sparse=False, _weight=None, include_last_offset=False, padding_idx=None,
                 device=None, dtype=None):
        super().__init__()
        _check_device(device)
        if mode not in ("sum", "mean", "max"):
            raise ValueError(f"EmbeddingBag: mode has to be one of sum, mean or max, got {mode!r}")
        if scale_grad_by_freq or sparse:
            raise NotImplementedError("EmbeddingBag: scale_grad_by_freq and sparse gradients are not supported")
        _check_sizes(num_embeddings, embedding_dim, "EmbeddingBag")
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.max_norm, self.norm_type, self.scale_grad_by_freq = max_norm, norm_type, scale_grad_by_freq
        self.padding_idx = _check_padding_idx(padding_idx, num_embeddings, "EmbeddingBag")
        _init_table(self, _weight, dtype, True, "EmbeddingBag")
        self.mode, self.sparse, self.include_last_offset = mode, sparse, include_last_offset

    reset_parameters = Embedding.reset_parameters    # N(0, 1), padding row zeroed

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type, self.scale_grad_by_freq,
                               self.mode, self.sparse, per_sample_weights, self.include_last_offset,
                               self.padding_idx)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                        mode="mean", sparse=False, include_last_offset=False, padding_idx=None):
        if embeddings.ndim != 2:
            raise ValueError(f"EmbeddingBag.from_pretrained: embeddings must be 2-D, got shape "
                             f"{tuple(embeddings.shape)}")
        arr = embeddings._data if isinstance(embeddings, Tensor) else xp.asarray(embeddings)
        m = cls(arr.shape[0], arr.shape[1], max_norm, norm_type, scale_grad_by_freq, mode, sparse, arr.copy(),
                include_last_offset, padding_idx)
        m.weight.requires_grad = not freeze
        return m

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm!r}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type!r}"
        if self.scale_grad_by_freq is not False:
            s += f", scale_grad_by_freq={self.scale_grad_by_freq!r}"
        s += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx!r}"
        return s


# ---------------------------------------------------------------- 3-D layers, ConvTranspose1d, SyncBatchNorm
from varlens.nn.conv import _Conv, _ConvNd  # noqa: E402


class Conv3d(_Conv):
    """3-D convolution over (N, C_in, D, H, W): weight (C_out, C_in/groups, kd, kh, kw)."""

    _n = 3
    _conv = staticmethod(F.conv3d)


class _ConvTransposeNd(_ConvNd):
    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0,
                 groups=1, bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, output_padding, device, dtype)

    def _output_padding(self, input, output_size):
        if output_size is None:
            return self.output_padding
        n = self._n
        size = tuple(int(s) for s in output_size)[-n:]
        ins = tuple(input.shape[-n:])
        op = tuple(s - ((L - 1) * st - 2 * p + d * (k - 1) + 1) for s, L, st, p, d, k in
                   zip(size, ins, self.stride, self.padding, self.dilation, self.kernel_size))
        if any(o < 0 or o >= max(st, d) for o, st, d in zip(op, self.stride, self.dilation)):
            raise ValueError(f"{type(self).__name__}: requested an output size of {size}, but valid sizes for an "
                             f"input of spatial size {ins} differ from the default by less than the stride")
        return op


class ConvTranspose1d(_ConvTransposeNd):
    """Transposed 1-D convolution: weight (C_in, C_out/groups, k)."""

    _n = 1

    def forward(self, input, output_size=None):
        op = self._output_padding(input, output_size)
        return F.conv_transpose1d(input, self.weight, self.bias, self.stride[0], self.padding[0], op[0],
                                  self.groups, self.dilation[0])


class ConvTranspose3d(_ConvTransposeNd):
    """Transposed 3-D convolution: weight (C_in, C_out/groups, kd, kh, kw)."""

    _n = 3

    def forward(self, input, output_size=None):
        op = self._output_padding(input, output_size)
        return F.conv_transpose3d(input, self.weight, self.bias, self.stride, self.padding, op, self.groups,
                                  self.dilation)


class MaxPool3d(MaxPool1d):
    def forward(self, input):
        return F.max_pool3d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class AvgPool3d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode, self.count_include_pad = padding, ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):
        return F.avg_pool3d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveMaxPool3d(AdaptiveMaxPool1d):
    def forward(self, input):
        return F.adaptive_max_pool3d(input, self.output_size, self.return_indices)


class LPPool3d(LPPool1d):
    def forward(self, input):
        return F.lp_pool3d(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)


class MaxUnpool3d(MaxUnpool1d):
    nd = 3

    def forward(self, input, indices, output_size=None):
        return F.max_unpool3d(input, indices, self.kernel_size, self.stride, self.padding, output_size)


class SyncBatchNorm(_BatchNorm):
    """Batch norm over any (N, C, *) input.  varlens runs in one process, so the statistics are
    those of the local batch, i.e. SyncBatchNorm with a world size of 1; ``process_group`` is
    accepted and ignored."""

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


__all__ += ["Conv3d", "ConvTranspose1d", "ConvTranspose3d", "MaxPool3d", "AvgPool3d", "AdaptiveMaxPool3d",
            "LPPool3d", "MaxUnpool3d", "SyncBatchNorm"]


class FractionalMaxPool2d(Module):
    """Max pooling with pseudo-random window offsets (F.fractional_max_pool2d); give output_size or
    output_ratio.  ``_random_samples`` (N, C, 2) fixes the offsets."""
    nd = 2

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                 _random_samples=None):
        super().__init__()
        name = type(self).__name__
        self.kernel_size, self.return_indices = kernel_size, return_indices
        self.output_size, self.output_ratio = output_size, output_ratio
        self.register_buffer("_random_samples", _random_samples)
        if output_size is None and output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output size, or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError(f"{name}: only one of output_size and output_ratio may be specified")
        if output_ratio is not None:
            r = (output_ratio,) * self.nd if isinstance(output_ratio, numbers.Real) else tuple(output_ratio)
            if not all(0 < v < 1 for v in r):
                raise ValueError(f"{name}: output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input):
        fn = F.fractional_max_pool2d if self.nd == 2 else F.fractional_max_pool3d
        return fn(input, self.kernel_size, self.output_size, self.output_ratio, self.return_indices,
                  _random_samples=self._random_samples)


class FractionalMaxPool3d(FractionalMaxPool2d):
    nd = 3


class LinearCrossEntropyLoss(Module):
    """cross_entropy(linear(input), target) with the Linear inside (``self.linear``, weight
    (C * prod(out_features), in_features)), PyTorch's reference (unchunked) form."""

    def __init__(self, in_features, num_classes, *, out_features=(), bias=False, device=None, dtype=None,
                 reduction="mean", weight=None, ignore_index=None, label_smoothing=0.0, options=None):
        super().__init__()
        from varlens.nn.linear import Linear
        if weight is not None and tuple(weight.shape) != (num_classes,):
            raise RuntimeError(f"expected weight shape to be {(num_classes,)}, got {tuple(weight.shape)}")
        if not 0 <= label_smoothing <= 1.0:
            raise RuntimeError(f"expected label_smoothing to be in range [0, 1], got {label_smoothing}")
        _check_reduction(reduction, "LinearCrossEntropyLoss")
        self.reduction = reduction
        self.register_buffer("weight", weight)
        self.num_classes, self.out_features = num_classes, tuple(out_features)
        self.ignore_index, self.label_smoothing, self.options = ignore_index, label_smoothing, options
        n_out = num_classes
        for d in self.out_features:
            n_out *= d
        self.linear = Linear(in_features, n_out, bias=bias, device=device, dtype=dtype)

    def forward(self, input, target):
        w = self.linear.weight.reshape((self.num_classes,) + self.out_features + (self.linear.in_features,))
        b = None if self.linear.bias is None else self.linear.bias.reshape((self.num_classes,) + self.out_features)
        return F.linear_cross_entropy(input, w, target, linear_bias=b, weight=self.weight, reduction=self.reduction,
                                      ignore_index=self.ignore_index, label_smoothing=self.label_smoothing,
                                      options=self.options)

    def extra_repr(self):
        return (f"in_features={self.linear.in_features}, num_classes={self.num_classes}, "
                f"out_features={self.out_features}, bias={self.linear.bias is not None}, "
                f"reduction={self.reduction}, ignore_index={self.ignore_index}, "
                f"label_smoothing={self.label_smoothing}, options={self.options}")


__all__ += ["FractionalMaxPool2d", "FractionalMaxPool3d", "LinearCrossEntropyLoss"]


# ---------------------------------------------------------------- adaptive softmax
from collections import namedtuple  # noqa: E402

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Grave et al.'s adaptive softmax: a head over the ``cutoffs[0]`` most frequent classes plus one
    entry per tail cluster, and per cluster a two-layer projection (in -> in/div^(i+1) -> cluster
    size).  log p(y) = log p_head(y) for shortlist classes, log p_head(cluster) + log p_cluster(y)
    otherwise.  ``forward(input, target)`` returns (output = log p(target), loss = -mean output)."""

    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False, device=None, dtype=None):
        super().__init__()
        from varlens.nn.container import ModuleList, Sequential
        from varlens.nn.linear import Linear
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("AdaptiveLogSoftmaxWithLoss: cutoffs should be a sequence of length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise ValueError("AdaptiveLogSoftmaxWithLoss: cutoffs should be a sequence of unique, positive integers "
                             "sorted in an increasing order, where each value is between 1 and n_classes-1, got "
                             f"{cutoffs}")
        self.in_features, self.n_classes = in_features, n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value, self.head_bias = div_value, head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, device=device, dtype=dtype)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hsz = int(in_features // (div_value ** (i + 1)))
            osz = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hsz, bias=False, device=device, dtype=dtype),
                                        Linear(hsz, osz, bias=False, device=device, dtype=dtype)))

    def reset_parameters(self):
        self.head.reset_parameters()
        for i2h, h2o in self.tail:
            i2h.reset_parameters()
            h2o.reset_parameters()

    def forward(self, input_, target_):
        from varlens import ops
        input, target = input_, target_
        unb = input.ndim == 1
        if input.ndim not in (1, 2):
            raise RuntimeError(f"AdaptiveLogSoftmaxWithLoss: input should be 1D or 2D, got shape {tuple(input.shape)}")
        t = target._data if isinstance(target, Tensor) else xp.asarray(target)
        if unb:
            if t.ndim != 0:
                raise RuntimeError("AdaptiveLogSoftmaxWithLoss: 0D target tensor expected, multi-target not supported")
            input, t = input.unsqueeze(0), t.reshape(1)
        elif t.ndim != 1 or t.shape[0] != input.shape[0]:
            raise RuntimeError(f"AdaptiveLogSoftmaxWithLoss: input and target should have the same size in the batch "
                               f"dimension, got {tuple(input.shape)} and {t.shape}")
        if input.shape[1] != self.in_features:
            raise RuntimeError(f"AdaptiveLogSoftmaxWithLoss: input should have {self.in_features} features, got "
                               f"shape {tuple(input.shape)}")
        N = input.shape[0]
        if t.size and (t.min() < 0 or t.max() >= self.n_classes):
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but values in range "
                               f"[{int(t.min())}, {int(t.max())}] were found. ")
        out = Tensor._make(xp.zeros(N, dtype=input.dtype))
        head_idx = t.copy()
        for i in range(1, self.n_clusters + 1):
            lo, hi = self.cutoffs[i - 1], self.cutoffs[i]
            rows = xp.flatnonzero((t >= lo) & (t < hi))
            if rows.size == 0:
                continue
            head_idx[rows] = self.shortlist_size + i - 1
            sub = ops.index_select(input, 0, Tensor._make(rows))
            lp = F.log_softmax(self.tail[i - 1](sub), 1)
            local = ops.gather(lp, 1, Tensor._make((t[rows] - lo)[:, None])).squeeze(1)
            out = ops.index_put(out, (rows,), local)
        head_lp = F.log_softmax(self.head(input), 1)
        out = out + ops.gather(head_lp, 1, Tensor._make(head_idx[:, None])).squeeze(1)
        loss = (-out).mean()
        return _ASMoutput(out.squeeze(0) if unb else out, loss)

    def _full_log_prob(self, input, head_output):
        from varlens import ops
        head_lp = F.log_softmax(head_output, 1)
        parts = [head_lp[:, :self.shortlist_size]]
        for i in range(self.n_clusters):
            lp = F.log_softmax(self.tail[i](input), 1)
            parts.append(lp + head_lp[:, self.shortlist_size + i:self.shortlist_size + i + 1])
        return ops.cat(parts, 1)

    def log_prob(self, input):
        """log p(c | x) for every class, (N, n_classes) (or (n_classes,) for one example)."""
        x = input.unsqueeze(0) if input.ndim == 1 else input
        out = self._full_log_prob(x, self.head(x))
        return out.squeeze(0) if input.ndim == 1 else out

    def predict(self, input):
        """The most probable class of each example."""
        return self.log_prob(input).argmax(-1)

    def extra_repr(self):
        return ""


__all__ += ["AdaptiveLogSoftmaxWithLoss"]

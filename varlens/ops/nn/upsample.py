"""Upsampling: nearest-neighbour (the backward sums each output block back onto its source
pixel) and interpolate's other modes, composed from checked ops."""
from __future__ import annotations
from varlens.core import primitives as D
from varlens.core.function import Function
from varlens.ops.nn.conv import _tuple
from varlens.ops.index import getitem
import math
from varlens.core.array import xp
from varlens.core import array as B


class UpsampleNearest2dFn(Function):
    """Nearest upsampling by integer factors: every pixel becomes an (sh x sw) block.

    Backward: the adjoint of copying is summing, so dL/dx sums g over each block
    (reshape and sum; works on Tensors too, so it is its own second derivative).
    """

    def forward(self, x, scale=(2, 2)):
        xp = self.xp
        N, C, H, W = x.shape
        sh, sw = scale
        self.shape6 = (N, C, H, sh, W, sw)
        v = xp.broadcast_to(x.reshape(N, C, H, 1, W, 1), self.shape6)
        return v.reshape(N, C, H * sh, W * sw)

    def backward(self, g):
        return D.sum(D.reshape(g, self.shape6), axis=(3, 5))


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize (N, C, H, W) input; only mode='nearest' (PyTorch's 'nearest' index rule).

    Output pixel i reads input pixel min(floor(i * scale), H - 1) with scale = 1/scale_factor
    when a scale factor is given (H/H_out when a size is given).  Integer factors take a
    fused path (copy into blocks; gradient sums each block).
    """
    op = "interpolate"
    if mode != "nearest":
        raise NotImplementedError(f"{op}: only mode='nearest' is implemented, got mode={mode!r}")
    if align_corners is not None:
        raise ValueError(f"{op}: align_corners only applies to linear modes, got {align_corners!r} "
                         "with mode='nearest'")
    if not hasattr(input, "ndim") or input.ndim != 4:
        raise RuntimeError(f"{op}: expected a 4-D (N, C, H, W) input, got "
                           f"{tuple(input.shape) if hasattr(input, 'shape') else type(input).__name__}")
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{op}: give exactly one of size and scale_factor, got size={size!r}, "
                         f"scale_factor={scale_factor!r}")
    H, W = input.shape[2], input.shape[3]
    if size is not None:
        Ho, Wo = _tuple(size, 2, "size", op, minimum=1)
        scales = (H / Ho, W / Wo)
    else:
        sf = (scale_factor, scale_factor) if isinstance(scale_factor, (int, float)) else tuple(scale_factor)
        if len(sf) != 2 or any(f <= 0 for f in sf):
            raise ValueError(f"{op}: scale_factor must be a positive number or a pair, got {scale_factor!r}")
        Ho, Wo = int(math.floor(H * sf[0])), int(math.floor(W * sf[1]))
        scales = (H / Ho, W / Wo) if recompute_scale_factor else (1.0 / sf[0], 1.0 / sf[1])
    if Ho % H == 0 and Wo % W == 0 and abs(scales[0] * (Ho // H) - 1) < 1e-12 \
            and abs(scales[1] * (Wo // W) - 1) < 1e-12:
        return UpsampleNearest2dFn.apply(input, scale=(Ho // H, Wo // W))
    ih = xp.minimum(xp.floor(xp.arange(Ho, dtype=xp.float32) * xp.float32(scales[0])).astype(xp.int64), H - 1)
    iw = xp.minimum(xp.floor(xp.arange(Wo, dtype=xp.float32) * xp.float32(scales[1])).astype(xp.int64), W - 1)
    lib = B.namespace(input._data)   # the (host-built) index arrays go to the input's device
    ih, iw = B.to_namespace(ih.reshape(Ho, 1), lib), B.to_namespace(iw.reshape(1, Wo), lib)
    return getitem(input, (slice(None), slice(None), ih, iw))


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Alias of interpolate (PyTorch's deprecated name)."""
    return interpolate(input, size, scale_factor, mode, align_corners)

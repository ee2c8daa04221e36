"""Image transforms and data augmentation (torchvision.transforms names and arguments).

Per-image transforms (``RandomCrop``, ``RandomHorizontalFlip``) take one image of shape
(C, H, W) or (H, W) and draw one set of random parameters, as torchvision does (given a
batch with leading dimensions they apply the same parameters to all of it, also as
torchvision).  Their batch variants (``BatchRandomCrop``, ``BatchRandomHorizontalFlip``)
take a whole (N, C, H, W) batch and draw independent parameters for every sample, then
transform the batch with one vectorised NumPy operation (no Python loop over samples), which
is what a training loop over tens of thousands of images needs.

Every random transform accepts ``generator=``: a ``varlens.Generator``, a NumPy
``np.random.Generator``, or None for varlens's global generator (``varlens.manual_seed``).
A ``DataLoader(..., batch_transform=...)`` passes a generator seeded for each (pass, batch),
and saves the pass seed in its ``state_dict``, so a run resumed from a checkpoint sees the
same augmented batches as one that never stopped.

Inputs may be NumPy arrays or varlens Tensors; the output has the same kind.  These are
data-loading steps, not differentiable ops (no gradient flows through them).

Differences from torchvision: no PIL images (arrays and tensors only); ``Normalize`` also
accepts mean/std arrays that broadcast against the image (e.g. per-pixel statistics).
"""
from __future__ import annotations

import numbers

import numpy as np

from varlens.core.tensor import Tensor

__all__ = ["Compose", "Normalize", "RandomCrop", "RandomHorizontalFlip", "BatchRandomCrop",
           "BatchRandomHorizontalFlip", "Lambda"]

PADDING_MODES = ("constant", "edge", "reflect", "symmetric")


# ---------------------------------------------------------------------- helpers
def _rng(generator):
    """A NumPy Generator from a varlens Generator, a NumPy Generator or None (global)."""
    if isinstance(generator, np.random.Generator):
        return generator
    if generator is None:
        from varlens.random import _gen
        return _gen(None).rng
    rng = getattr(generator, "rng", None)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"generator must be a varlens.Generator, a numpy.random.Generator or None, "
                        f"got {type(generator).__name__}")
    return rng


def _unwrap(x, name):
    if isinstance(x, Tensor):
        return x._data, True
    if isinstance(x, np.ndarray):
        return x, False
    raise TypeError(f"{name}: expected a NumPy array or a varlens Tensor, got {type(x).__name__}")


def _wrap(a, was_tensor):
    return Tensor._make(a) if was_tensor else a


def _pair(value, name):
    """(h, w) from an int or a 1- or 2-sequence of positive ints."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = (int(value), int(value))
    elif isinstance(value, (tuple, list)) and len(value) == 1:
        value = (value[0], value[0])
    if (not isinstance(value, (tuple, list)) or len(value) != 2
            or not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) and v > 0 for v in value)):
        raise ValueError(f"{name}: size must be a positive int or a sequence (h, w) of positive ints, "
                         f"got {value!r}")
    return int(value[0]), int(value[1])


def _padding4(padding, name):
    """(left, top, right, bottom) from torchvision's int / 2-sequence / 4-sequence forms."""
    if padding is None:
        return (0, 0, 0, 0)
    if isinstance(padding, numbers.Integral) and not isinstance(padding, bool):
        p = (int(padding),) * 4
    elif isinstance(padding, (tuple, list)) and len(padding) in (1, 2, 4) and all(
            isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in padding):
        p = {1: lambda q: (q[0],) * 4, 2: lambda q: (q[0], q[1], q[0], q[1]), 4: tuple}[len(padding)](padding)
        p = tuple(int(v) for v in p)
    else:
        raise ValueError(f"{name}: padding must be an int or a sequence of 1, 2 or 4 ints, got {padding!r}")
    if min(p) < 0:
        raise ValueError(f"{name}: padding must be non-negative, got {padding!r}")
    return p


def _check_image(a, name, batch):
    if batch:
        if a.ndim != 4:
            raise ValueError(f"{name}: expected a batch of shape (N, C, H, W), got shape {a.shape}")
    elif a.ndim < 2:
        raise ValueError(f"{name}: expected an image of shape (C, H, W) or (H, W), got shape {a.shape}")


# ---------------------------------------------------------------------- composition
class Compose:
    """Apply ``transforms`` in order; a random one gets the same ``generator``."""

    random = True

    def __init__(self, transforms):
        if not isinstance(transforms, (list, tuple)) or not all(callable(t) for t in transforms):
            raise TypeError(f"Compose: transforms must be a list of callables, got {transforms!r}")
        self.transforms = list(transforms)

    def __call__(self, x, generator=None):
        for t in self.transforms:
            x = t(x, generator=generator) if getattr(t, "random", False) else t(x)
        return x

    def __repr__(self):
        inner = "".join(f"\n    {t!r}," for t in self.transforms)
        return f"Compose([{inner}\n])"


class Lambda:
    """Wrap a function of the input as a transform."""

    def __init__(self, lambd):
        if not callable(lambd):
            raise TypeError(f"Lambda: lambd must be callable, got {type(lambd).__name__}")
        self.lambd = lambd

    def __call__(self, x):
        return self.lambd(x)

    def __repr__(self):
        return "Lambda()"


class Normalize:
    """``(x - mean[c]) / std[c]`` per channel of a (..., C, H, W) image or batch.

    ``mean`` and ``std`` are sequences with one value per channel (as torchvision), or
    arrays that broadcast against the trailing (C, H, W) dimensions.
    """

    random = False

    def __init__(self, mean, std, inplace=False):
        m = np.asarray(mean, dtype=np.float64)
        s = np.asarray(std, dtype=np.float64)
        if m.size == 0 or not np.all(np.isfinite(m)):
            raise ValueError(f"Normalize: mean must be non-empty and finite, got {mean!r}")
        if s.size == 0 or not np.all(np.isfinite(s)) or np.any(s == 0):
            raise ValueError(f"Normalize: std must be non-empty, finite and non-zero (it divides), got {std!r}")
        if m.ndim == 1:
            m = m[:, None, None]
        if s.ndim == 1:
            s = s[:, None, None]
        self.mean, self.std, self.inplace = m, s, bool(inplace)
        self._cache = None

    def __call__(self, x):
        a, was_tensor = _unwrap(x, "Normalize")
        if a.ndim < 3:
            raise ValueError(f"Normalize: expected an image of shape (..., C, H, W), got shape {a.shape}")
        if not np.issubdtype(a.dtype, np.floating):
            raise TypeError(f"Normalize: expected a floating-point image, got dtype {a.dtype}")
        if self._cache is None or self._cache[0] != a.dtype:
            self._cache = (a.dtype, self.mean.astype(a.dtype), (1.0 / self.std).astype(a.dtype))
        _, m, inv = self._cache
        if self.inplace:
            out = a
            np.subtract(a, m, out=out)
        else:
            out = np.subtract(a, m)
        np.multiply(out, inv, out=out)
        return _wrap(out, was_tensor)

    def __repr__(self):
        return f"Normalize(mean={self.mean.ravel().tolist()}, std={self.std.ravel().tolist()})"


# ---------------------------------------------------------------------- crops
def _pad(a, pad, fill, mode):
    """Pad the last two axes of ``a`` by (left, top, right, bottom)."""
    left, top, right, bottom = pad
    if not any(pad):
        return a
    widths = [(0, 0)] * (a.ndim - 2) + [(top, bottom), (left, right)]
    if mode == "constant":
        out = np.empty(a.shape[:-2] + (a.shape[-2] + top + bottom, a.shape[-1] + left + right), a.dtype)
        out[...] = np.asarray(fill, dtype=a.dtype).reshape((-1, 1, 1)) if np.ndim(fill) else fill
        out[..., top:top + a.shape[-2], left:left + a.shape[-1]] = a
        return out
    return np.pad(a, widths, mode=mode)


class RandomCrop:
    """Crop a random ``size`` window, after padding the image (torchvision's arguments).

    size: int or (h, w).  padding: None, an int (all sides), (left/right, top/bottom) or
    (left, top, right, bottom).  pad_if_needed: pad a too-small image up to ``size``.
    fill: the constant of ``padding_mode='constant'`` (a number, or one per channel).
    padding_mode: 'constant', 'edge', 'reflect' or 'symmetric'.
    """

    random = True
    _batched = False

    def __init__(self, size, padding=None, pad_if_needed=False, fill=0, padding_mode="constant"):
        name = type(self).__name__
        self.size = _pair(size, name)
        self.padding = padding
        self._pad = _padding4(padding, name)
        if not isinstance(pad_if_needed, bool):
            raise TypeError(f"{name}: pad_if_needed must be a bool, got {pad_if_needed!r}")
        self.pad_if_needed = pad_if_needed
        if padding_mode not in PADDING_MODES:
            raise ValueError(f"{name}: padding_mode must be one of {', '.join(PADDING_MODES)}, "
                             f"got {padding_mode!r}")
        if not (isinstance(fill, numbers.Real) or (isinstance(fill, (tuple, list)) and all(
                isinstance(v, numbers.Real) for v in fill))):
            raise TypeError(f"{name}: fill must be a number or a sequence of numbers, got {fill!r}")
        self.fill, self.padding_mode = fill, padding_mode

    def _padded(self, a):
        name = type(self).__name__
        a = _pad(a, self._pad, self.fill, self.padding_mode)
        th, tw = self.size
        H, W = a.shape[-2:]
        if self.pad_if_needed and (H < th or W < tw):
            dh, dw = max(th - H, 0), max(tw - W, 0)
            a = _pad(a, (dw, dh, dw, dh), self.fill, self.padding_mode)
            H, W = a.shape[-2:]
        if H < th or W < tw:
            raise ValueError(f"{name}: crop size {(th, tw)} is larger than the (padded) image size {(H, W)}; "
                             "increase padding or set pad_if_needed=True")
        return a

    def __call__(self, x, generator=None):
        name = type(self).__name__
        a, was_tensor = _unwrap(x, name)
        _check_image(a, name, self._batched)
        a = self._padded(a)
        th, tw = self.size
        H, W = a.shape[-2:]
        rng = _rng(generator)
        n = a.shape[0] if self._batched else 1
        # one top-left corner per sample: the top row in [0, H - th], the left column in [0, W - tw]
        tops = rng.integers(0, H - th + 1, size=n)
        lefts = rng.integers(0, W - tw + 1, size=n)
        if not self._batched:
            t, l = int(tops[0]), int(lefts[0])
            return _wrap(np.ascontiguousarray(a[..., t:t + th, l:l + tw]), was_tensor)
        # every (th, tw) window of every sample as a view, then one gather of the chosen ones:
        # windows[n, c, i, j] is the window with corner (i, j); indexing axes 0, 2, 3 with
        # arrays leaves (N, C, th, tw)
        windows = np.lib.stride_tricks.sliding_window_view(a, (th, tw), axis=(2, 3))
        out = windows[np.arange(n), :, tops, lefts]
        return _wrap(out, was_tensor)

    def __repr__(self):
        return (f"{type(self).__name__}(size={self.size}, padding={self.padding}, "
                f"pad_if_needed={self.pad_if_needed}, fill={self.fill}, padding_mode={self.padding_mode!r})")


class BatchRandomCrop(RandomCrop):
    """``RandomCrop`` for a (N, C, H, W) batch: an independent window for every sample."""

    _batched = True


# ---------------------------------------------------------------------- flips
class RandomHorizontalFlip:
    """Mirror the image left-right (the last axis) with probability ``p``."""

    random = True
    _batched = False

    def __init__(self, p=0.5):
        name = type(self).__name__
        if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0.0 <= p <= 1.0:
            raise ValueError(f"{name}: p must be a probability in [0, 1], got {p!r}")
        self.p = float(p)

    def __call__(self, x, generator=None):
        name = type(self).__name__
        a, was_tensor = _unwrap(x, name)
        _check_image(a, name, self._batched)
        rng = _rng(generator)
        if not self._batched:
            if rng.random() < self.p:
                a = np.ascontiguousarray(a[..., ::-1])
            return _wrap(a, was_tensor)
        flip = rng.random(a.shape[0]) < self.p
        out = np.where(flip[:, None, None, None], a[..., ::-1], a)
        return _wrap(out, was_tensor)

    def __repr__(self):
        return f"{type(self).__name__}(p={self.p})"


class BatchRandomHorizontalFlip(RandomHorizontalFlip):
    """``RandomHorizontalFlip`` for a (N, C, H, W) batch: each sample flipped independently."""

    _batched = True

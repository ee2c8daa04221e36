"""torch.fft, answered for varlens: not supported.

varlens tensors are real (float/int/bool) and its autograd has no complex numbers, so the
discrete Fourier transforms, whose results are complex, are not provided: every function raises
NotImplementedError saying so.  (``numpy.fft`` on ``tensor.numpy()`` computes them without
gradients.)  The real helpers are provided: ``fftfreq``, ``rfftfreq`` (sample frequencies) and
``fftshift``/``ifftshift`` (a roll, differentiable).
"""
__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2", "rfftn",
           "irfftn", "hfft", "ihfft", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]


def _refuse(what):
    def refuse(*args, **kwargs):
        raise NotImplementedError(
            f"varlens.fft.{what}: Fourier transforms are not supported (varlens has no complex tensors or "
            "complex autograd); use numpy.fft on tensor.numpy() where no gradient is needed")
    refuse.__name__ = what
    refuse.__varlens_unsupported__ = True
    return refuse


for _n in __all__[:14]:
    globals()[_n] = _refuse(_n)
del _n


def fftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False, **kwargs):
    """Sample frequencies [0, 1, ..., ceil(n/2)-1, -floor(n/2), ..., -1] / (d n), as torch.fft.fftfreq."""
    import varlens
    k = varlens.arange(n, dtype=varlens.float64)
    k = varlens.where(k < (n + 1) // 2, k, k - n)
    return _finish(k / (d * n), dtype, device, requires_grad)


def rfftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False, **kwargs):
    """[0, 1, ..., n // 2] / (d n), as torch.fft.rfftfreq."""
    import varlens
    k = varlens.arange(n // 2 + 1, dtype=varlens.float64)
    return _finish(k / (d * n), dtype, device, requires_grad)


def _finish(f, dtype, device, requires_grad):
    """The frequencies in the asked dtype (default: the default float) on the asked device."""
    import varlens
    f = f.to(dtype or varlens.get_default_dtype())
    if device is not None:
        f = f.to(device)
    return f.requires_grad_(requires_grad)


def _dims(x, dim):
    if dim is None:
        return tuple(range(x.ndim))
    return (dim,) if isinstance(dim, int) else tuple(dim)


def fftshift(input, dim=None):
    """Roll each dim by n // 2 so frequency 0 is centred (a roll: differentiable)."""
    import varlens
    dims = _dims(input, dim)
    return varlens.roll(input, [input.shape[d] // 2 for d in dims], dims)


def ifftshift(input, dim=None):
    """The inverse of fftshift: roll each dim by -(n // 2)."""
    import varlens
    dims = _dims(input, dim)
    return varlens.roll(input, [-(input.shape[d] // 2) for d in dims], dims)

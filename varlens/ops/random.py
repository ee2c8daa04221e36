"""varlens.ops.random."""
from __future__ import annotations
from varlens.core import dtypes as DT
from varlens.core.tensor import Tensor
from varlens.ops._args import _tensor
from varlens.core.array import xp
from varlens.random import _gen


def poisson(input, generator=None):  # noqa: A002
    """Poisson draws with the given rates (input's dtype, never requires grad)."""
    x = _tensor(input, "poisson: input")
    if bool((x._data < 0).any()):
        raise RuntimeError("poisson: rates must be non-negative")
    return Tensor._make(_gen(generator).rng.poisson(x._data).astype(x.dtype))


def binomial(count, prob, generator=None):
    c, p = _tensor(count, "binomial: count"), _tensor(prob, "binomial: prob")
    if bool(((p._data < 0) | (p._data > 1)).any()):
        raise RuntimeError("binomial: prob must be in [0, 1]")
    return Tensor._make(_gen(generator).rng.binomial(c._data.astype(xp.int64), p._data).astype(c.dtype))


def randint_like(input, low=0, high=None, *, dtype=None, generator=None, requires_grad=False):  # noqa: A002
    if high is None:
        low, high = 0, low
    if not high > low:
        raise RuntimeError(f"randint_like: high must be larger than low, got low={low}, high={high}")
    dt = input.dtype if dtype is None else DT.to_dtype(dtype)
    return Tensor._make(_gen(generator).integers(int(low), int(high), tuple(input.shape)).astype(dt))

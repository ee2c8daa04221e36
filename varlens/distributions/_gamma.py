"""Standard Gamma draws with a reparametrised (implicit) gradient, and the Dirichlet/Beta draws
built from them."""
from __future__ import annotations

from varlens.ops.random import StandardGamma


def standard_gamma(alpha, shape, rng):
    return StandardGamma.apply(alpha, shape=tuple(shape), rng=rng)

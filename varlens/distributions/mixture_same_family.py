"""MixtureSameFamily: a mixture of components of one family, weighted by a Categorical
(torch.distributions.MixtureSameFamily)."""
from __future__ import annotations

import varlens as _vl
from varlens.core.array import xp
from varlens.distributions import constraints
from varlens.distributions.discrete import Categorical
from varlens.distributions.distribution import Distribution
from varlens.core.tensor import Size, Tensor


class _MixtureSupport(constraints.Constraint):
    def __init__(self, base):
        self.base_constraint = base
        self.event_dim, self.is_discrete = base.event_dim, base.is_discrete

    def _check(self, v):
        return self.base_constraint._check(v)

    def __repr__(self):
        return f"MixtureSameFamilyConstraint({self.base_constraint!r})"


class MixtureSameFamily(Distribution):
    """A mixture of the components along component_distribution's last batch dim, weighted by the
    Categorical mixture_distribution: p(x) = sum_k pi_k p_k(x) (log_prob by logsumexp)."""

    arg_constraints = {}
    has_rsample = False

    def __init__(self, mixture_distribution, component_distribution, validate_args=None):
        if not isinstance(mixture_distribution, Categorical):
            raise ValueError(" The Mixture distribution needs to be an  instance of torch.distributions.Categorical"
                             f" (got {type(mixture_distribution).__name__})")
        if not isinstance(component_distribution, Distribution):
            raise ValueError("The Component distribution needs to be an instance of torch.distributions.Distribution"
                             f" (got {type(component_distribution).__name__})")
        mdbs, cdbs = tuple(mixture_distribution.batch_shape), tuple(component_distribution.batch_shape[:-1])
        for a, b in zip(reversed(mdbs), reversed(cdbs)):
            if a != 1 and b != 1 and a != b:
                raise ValueError(f"`mixture_distribution.batch_shape` ({Size(mdbs)}) is not compatible with "
                                 f"`component_distribution.batch_shape`({Size(cdbs)})")
        km, kc = mixture_distribution.logits.shape[-1], component_distribution.batch_shape[-1]
        if km != kc:
            raise ValueError(f"`mixture_distribution component` ({km}) does not equal "
                             f"`component_distribution.batch_shape[-1]` ({kc})")
        self._mixture_distribution, self._component_distribution = mixture_distribution, component_distribution
        self._num_component = km
        self._event_ndims = len(component_distribution.event_shape)
        super().__init__(cdbs, component_distribution.event_shape, validate_args=validate_args)

    mixture_distribution = property(lambda self: self._mixture_distribution)
    component_distribution = property(lambda self: self._component_distribution)

    @property
    def support(self):
        return _MixtureSupport(self._component_distribution.support)

    def expand(self, batch_shape, _instance=None):
        batch_shape = tuple(batch_shape)
        new = MixtureSameFamily(self._mixture_distribution.expand(batch_shape),
                                self._component_distribution.expand(batch_shape + (self._num_component,)),
                                validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _pad(self, x):
        return x.unsqueeze(-1 - self._event_ndims)

    def _pad_mix(self, p):
        nb, cb = len(self.batch_shape), len(self._mixture_distribution.batch_shape)
        pad = 0 if cb == 1 else nb - cb
        s = tuple(p.shape)
        return p.reshape(s[:-1] + (1,) * pad + s[-1:] + (1,) * self._event_ndims)

    @property
    def mean(self):
        p = self._pad_mix(self._mixture_distribution.probs)
        return (p * self._component_distribution.mean).sum(-1 - self._event_ndims)

    @property
    def variance(self):
        p = self._pad_mix(self._mixture_distribution.probs)
        c = self._component_distribution
        d = -1 - self._event_ndims
        return (p * c.variance).sum(d) + (p * (c.mean - self._pad(self.mean)) ** 2).sum(d)

    def cdf(self, x):
        return (self._component_distribution.cdf(self._pad(x)) * self._mixture_distribution.probs).sum(-1)

    def log_prob(self, x):
        if self._validate_args:
            self._validate_sample(x)
        lp = self._component_distribution.log_prob(self._pad(x))
        return _vl.logsumexp(lp + _vl.log_softmax(self._mixture_distribution.logits, -1), -1)

    def _sample(self, sample_shape, generator):
        sample_shape = tuple(sample_shape)
        k = self._mixture_distribution.sample(sample_shape, generator)._data  # sample + batch
        comp = self._component_distribution.sample(sample_shape, generator)._data  # sample + batch + (K,) + event
        gather = len(sample_shape) + len(self.batch_shape)
        idx = xp.broadcast_to(k.reshape(k.shape + (1,) * (1 + self._event_ndims)),
                              comp.shape[:gather] + (1,) + comp.shape[gather + 1:])
        return Tensor._make(xp.take_along_axis(comp, idx, axis=gather).squeeze(gather))

    def __repr__(self):
        return f"MixtureSameFamily(\n  {self._mixture_distribution},\n  {self._component_distribution})"

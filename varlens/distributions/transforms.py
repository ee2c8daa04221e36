"""Bijective transforms and TransformedDistribution (the common part of torch.distributions.transforms).

A Transform maps x -> y = t(x), inverts with ``t.inv(y)`` and gives ``log_abs_det_jacobian(x, y)``
= log|dy/dx| (elementwise unless ``event_dim`` says otherwise).  TransformedDistribution(base,
transforms) has log_prob(y) = base.log_prob(x) - sum_t log|dt/dx| (change of variables)."""
from __future__ import annotations

import math

import varlens as _vl
from varlens.core.array import xp
from varlens.distributions import constraints
from varlens.distributions.distribution import Distribution, sum_rightmost
from varlens.core.tensor import Size, Tensor

__all__ = ["AbsTransform", "AffineTransform", "ComposeTransform", "ExpTransform", "IndependentTransform",
           "LowerCholeskyTransform", "PowerTransform", "SigmoidTransform", "SoftmaxTransform", "SoftplusTransform",
           "StickBreakingTransform", "TanhTransform", "Transform", "identity_transform", "TransformedDistribution"]


class Transform:
    bijective = False
    domain = constraints.real
    codomain = constraints.real
    sign = 1

    def __init__(self, cache_size=0):
        if cache_size not in (0, 1):
            raise ValueError(f"cache_size must be 0 or 1, got {cache_size}")
        self._cache_size = cache_size
        self._cached = None

    @property
    def event_dim(self):
        return self.domain.event_dim

    @property
    def inv(self):
        return _InverseTransform(self)

    def __call__(self, x):
        y = self._call(x)
        if self._cache_size:
            self._cached = (x, y)
        return y

    def _inv_call(self, y):
        if self._cache_size and self._cached is not None and self._cached[1] is y:
            return self._cached[0]
        return self._inverse(y)

    def log_abs_det_jacobian(self, x, y):
        raise NotImplementedError

    def forward_shape(self, shape):
        return shape

    def __eq__(self, other):  # parameter-free transforms are equal by type (as torch's)
        return self is other or (type(self) is type(other) and not vars(self).keys() - {"_cache_size", "_cached"})

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = object.__hash__

    def inverse_shape(self, shape):
        return shape

    def __repr__(self):
        return type(self).__name__ + "()"


class _InverseTransform(Transform):
    def __init__(self, transform):
        super().__init__()
        self._inv = transform

    domain = property(lambda self: self._inv.codomain)
    codomain = property(lambda self: self._inv.domain)
    bijective = property(lambda self: self._inv.bijective)
    sign = property(lambda self: self._inv.sign)
    inv = property(lambda self: self._inv)

    def __call__(self, x):
        return self._inv._inv_call(x)

    def _inverse(self, y):
        return self._inv(y)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)

    def __repr__(self):
        return f"_InverseTransform({self._inv!r})"


class ComposeTransform(Transform):
    """parts[-1](...parts[1](parts[0](x))); event dims tracked through the chain as torch does."""

    def __init__(self, parts, cache_size=0):
        super().__init__(cache_size)
        self.parts = list(parts)

    def __eq__(self, other):
        return isinstance(other, ComposeTransform) and self.parts == other.parts

    __hash__ = object.__hash__

    bijective = property(lambda self: all(p.bijective for p in self.parts))

    @property
    def domain(self):
        if not self.parts:
            return constraints.real
        dom = self.parts[0].domain
        ed = self.parts[-1].codomain.event_dim
        for p in reversed(self.parts):
            ed = max(ed + p.domain.event_dim - p.codomain.event_dim, p.domain.event_dim)
        return constraints.independent(dom, ed - dom.event_dim) if ed > dom.event_dim else dom

    @property
    def codomain(self):
        if not self.parts:
            return constraints.real
        cod = self.parts[-1].codomain
        ed = self.parts[0].domain.event_dim
        for p in self.parts:
            ed = max(ed + p.codomain.event_dim - p.domain.event_dim, p.codomain.event_dim)
        return constraints.independent(cod, ed - cod.event_dim) if ed > cod.event_dim else cod

    @property
    def sign(self):
        s = 1
        for p in self.parts:
            s = s * p.sign
        return s

    @property
    def event_dim(self):
        return self.domain.event_dim

    def _call(self, x):
        for p in self.parts:
            x = p(x)
        return x

    def _inverse(self, y):
        for p in reversed(self.parts):
            y = p.inv(y)
        return y

    def forward_shape(self, shape):
        for p in self.parts:
            shape = p.forward_shape(shape)
        return shape

    def inverse_shape(self, shape):
        for p in reversed(self.parts):
            shape = p.inverse_shape(shape)
        return shape

    def log_abs_det_jacobian(self, x, y):
        if not self.parts:
            return _vl.zeros_like(x)
        total, ed = 0.0, self.domain.event_dim
        for p in self.parts:
            yy = p(x)
            total = total + sum_rightmost(p.log_abs_det_jacobian(x, yy), ed - p.domain.event_dim)
            x = yy
            ed += p.codomain.event_dim - p.domain.event_dim
        return total

    def __repr__(self):
        return "ComposeTransform(\n    " + ",\n    ".join(repr(p) for p in self.parts) + "\n)"


class IndependentTransform(Transform):
    """base_transform with its rightmost reinterpreted_batch_ndims dims read as one event."""

    def __init__(self, base_transform, reinterpreted_batch_ndims, cache_size=0):
        super().__init__(cache_size)
        self.base_transform, self.reinterpreted_batch_ndims = base_transform, reinterpreted_batch_ndims

    domain = property(lambda self: constraints.independent(self.base_transform.domain, self.reinterpreted_batch_ndims))
    codomain = property(lambda self: constraints.independent(self.base_transform.codomain,
                                                             self.reinterpreted_batch_ndims))
    bijective = property(lambda self: self.base_transform.bijective)
    sign = property(lambda self: self.base_transform.sign)

    def _call(self, x):
        return self.base_transform(x)

    def _inverse(self, y):
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x, y):
        return sum_rightmost(self.base_transform.log_abs_det_jacobian(x, y), self.reinterpreted_batch_ndims)

    def forward_shape(self, shape):
        return self.base_transform.forward_shape(shape)

    def inverse_shape(self, shape):
        return self.base_transform.inverse_shape(shape)

    def __repr__(self):
        return f"IndependentTransform({self.base_transform!r}, {self.reinterpreted_batch_ndims})"


identity_transform = ComposeTransform([])


class ExpTransform(Transform):
    """y = exp(x); log|dy/dx| = x."""

    bijective = True
    codomain = constraints.positive

    def _call(self, x):
        return _vl.exp(x)

    def _inverse(self, y):
        return _vl.log(y)

    def log_abs_det_jacobian(self, x, y):
        return x


class SigmoidTransform(Transform):
    """y = sigmoid(x); log|dy/dx| = -softplus(-x) - softplus(x)."""

    bijective = True
    codomain = constraints.unit_interval

    def _call(self, x):
        eps = float(_vl.finfo(x.dtype).eps)
        return _vl.clamp(_vl.sigmoid(x), eps, 1 - eps)

    def _inverse(self, y):
        eps = float(_vl.finfo(y.dtype).eps)
        y = _vl.clamp(y, eps, 1 - eps)
        return _vl.log(y) - _vl.log1p(-y)

    def log_abs_det_jacobian(self, x, y):
        import varlens.nn.functional as F
        return -F.softplus(-x) - F.softplus(x)


class TanhTransform(Transform):
    """y = tanh(x); log|dy/dx| = log(1 - tanh^2 x) = 2 (log 2 - x - softplus(-2x)) (stable form)."""

    bijective = True
    codomain = constraints.interval(-1.0, 1.0)

    def _call(self, x):
        return _vl.tanh(x)

    def _inverse(self, y):
        return _vl.atanh(y)

    def log_abs_det_jacobian(self, x, y):
        import varlens.nn.functional as F
        return 2.0 * (math.log(2.0) - x - F.softplus(-2.0 * x))


class AbsTransform(Transform):
    codomain = constraints.positive

    def _call(self, x):
        return _vl.abs(x)

    def _inverse(self, y):
        return y


class AffineTransform(Transform):
    """y = loc + scale * x; log|dy/dx| = log|scale| (summed over event_dim trailing dims)."""

    bijective = True

    def __init__(self, loc, scale, event_dim=0, cache_size=0):
        super().__init__(cache_size)
        self.loc, self.scale, self._event_dim = loc, scale, event_dim

    @property
    def event_dim(self):
        return self._event_dim

    domain = property(lambda self: constraints.real if self._event_dim == 0 else
                      constraints.independent(constraints.real, self._event_dim))
    codomain = domain

    @property
    def sign(self):
        s = self.scale
        return (1 if s > 0 else -1 if s < 0 else 0) if isinstance(s, (int, float)) else _vl.sign(s)

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        s = self.scale
        r = _vl.full(tuple(x.shape), math.log(abs(s)), dtype=x.dtype) if isinstance(s, (int, float)) else \
            _vl.abs(s).log() + 0 * x
        return sum_rightmost(r, self._event_dim)


class PowerTransform(Transform):
    """y = x^exponent on x > 0; log|dy/dx| = log|exponent y / x|."""

    bijective = True
    domain = constraints.positive
    codomain = constraints.positive

    def __init__(self, exponent, cache_size=0):
        super().__init__(cache_size)
        self.exponent = exponent

    @property
    def sign(self):
        e = self.exponent
        return (1 if e > 0 else -1 if e < 0 else 0) if isinstance(e, (int, float)) else _vl.sign(e)

    def _call(self, x):
        return x ** self.exponent

    def _inverse(self, y):
        return y ** (1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        return _vl.log(_vl.abs(self.exponent * y / x))


class SoftplusTransform(Transform):
    """y = log(1 + e^x); log|dy/dx| = log sigmoid(x) = -softplus(-x)."""

    bijective = True
    codomain = constraints.positive

    def _call(self, x):
        import varlens.nn.functional as F
        return F.softplus(x)

    def _inverse(self, y):
        return _vl.log(-_vl.expm1(-y)) + y

    def log_abs_det_jacobian(self, x, y):
        import varlens.nn.functional as F
        return -F.softplus(-x)


class SoftmaxTransform(Transform):
    """y = softmax(x) over the last dim (not bijective: no Jacobian, as torch)."""

    domain = constraints.real_vector
    codomain = constraints.simplex

    def _call(self, x):
        return _vl.softmax(x, -1)

    def _inverse(self, y):
        return _vl.log(y)


class StickBreakingTransform(Transform):
    """R^(K-1) -> the K-simplex by stick breaking: z_i = sigmoid(x_i - log(K - 1 - i)),
    y_i = z_i prod_(j<i) (1 - z_j), y_K = prod (1 - z_j)."""

    domain = constraints.real_vector
    codomain = constraints.simplex
    bijective = True

    def _offset(self, n, like):
        return _vl.log(_vl.tensor((n - xp.arange(n)).astype(like._data.dtype)))

    def _call(self, x):
        n = x.shape[-1]
        eps = float(_vl.finfo(x.dtype).eps)
        z = _vl.clamp(_vl.sigmoid(x - self._offset(n, x)), eps, 1 - eps)
        rest = _vl.cumprod(1 - z, -1)
        ones = _vl.ones(tuple(x.shape[:-1]) + (1,), dtype=x.dtype)
        return _vl.cat([z, ones], -1) * _vl.cat([ones, rest], -1)

    def _inverse(self, y):
        crop = y[..., :-1]
        n = crop.shape[-1]
        sf = _vl.clamp(1 - _vl.cumsum(crop, -1), min=float(_vl.finfo(y.dtype).tiny))
        return _vl.log(crop) - _vl.log(sf) + self._offset(n, y)

    def log_abs_det_jacobian(self, x, y):
        import varlens.nn.functional as F
        x = x - self._offset(x.shape[-1], x)
        return (-x + F.logsigmoid(x) + _vl.log(y[..., :-1])).sum(-1)

    def forward_shape(self, shape):
        return tuple(shape[:-1]) + (shape[-1] + 1,)

    def inverse_shape(self, shape):
        return tuple(shape[:-1]) + (shape[-1] - 1,)


class LowerCholeskyTransform(Transform):
    """Unconstrained square matrix -> lower-triangular with a positive diagonal (exp of the diagonal)."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky

    def _call(self, x):
        return _vl.tril(x, -1) + _vl.diag_embed(_vl.exp(_vl.diagonal(x, 0, -2, -1)))

    def _inverse(self, y):
        return _vl.tril(y, -1) + _vl.diag_embed(_vl.log(_vl.diagonal(y, 0, -2, -1)))


class TransformedDistribution(Distribution):
    """base_distribution pushed through ``transforms`` (a Transform or a list, applied in order)."""

    arg_constraints = {}

    def __init__(self, base_distribution, transforms, validate_args=None):
        if isinstance(transforms, Transform):
            transforms = [transforms]
        elif not isinstance(transforms, (list, tuple)) or not all(isinstance(t, Transform) for t in transforms):
            raise ValueError(f"transforms must be a Transform or a list of Transforms, but was {transforms!r}")
        self.transforms = list(transforms)
        t = ComposeTransform(self.transforms)
        base_shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        base_event_dim = len(base_distribution.event_shape)
        if len(base_shape) < t.domain.event_dim:
            raise ValueError(f"base_distribution needs to have shape with size at least {t.domain.event_dim}, "
                             f"but got {base_shape}.")
        shape = tuple(t.forward_shape(base_shape))
        reinterpreted = t.domain.event_dim - base_event_dim
        if reinterpreted > 0:
            from varlens.distributions.multivariate import Independent
            base_distribution = Independent(base_distribution, reinterpreted)
        self.base_dist = base_distribution
        event_dim = max(t.codomain.event_dim, base_event_dim + t.codomain.event_dim - t.domain.event_dim)
        cut = len(shape) - event_dim
        super().__init__(shape[:cut], shape[cut:], validate_args=validate_args)

    @property
    def support(self):
        if not self.transforms:
            return self.base_dist.support
        s = self.transforms[-1].codomain
        extra = len(self.event_shape) - s.event_dim
        return constraints.independent(s, extra) if extra > 0 else s

    has_rsample = property(lambda self: self.base_dist.has_rsample)

    def expand(self, batch_shape, _instance=None):
        shape = tuple(batch_shape) + tuple(self.event_shape)
        for t in reversed(self.transforms):
            shape = tuple(t.inverse_shape(shape))
        base = self.base_dist.expand(shape[:len(shape) - len(self.base_dist.event_shape)])
        return TransformedDistribution(base, self.transforms, validate_args=False)

    def sample(self, sample_shape=Size(), generator=None):
        with _vl.no_grad():
            x = self.base_dist.sample(sample_shape, generator)
            for t in self.transforms:
                x = t(x)
            return x

    def rsample(self, sample_shape=Size(), generator=None):
        x = self.base_dist.rsample(sample_shape, generator)
        for t in self.transforms:
            x = t(x)
        return x

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        event_dim = len(self.event_shape)
        lp = 0.0
        y = value
        for t in reversed(self.transforms):
            x = t.inv(y)
            event_dim += t.domain.event_dim - t.codomain.event_dim
            lp = lp - sum_rightmost(t.log_abs_det_jacobian(x, y), event_dim - t.domain.event_dim)
            y = x
        return lp + sum_rightmost(self.base_dist.log_prob(y), event_dim - len(self.base_dist.event_shape))

    def _monotone_sign(self):
        s = 1
        for t in self.transforms:
            s = s * t.sign
        if isinstance(s, Tensor):
            s = s._data
            if not ((s == 1).all() or (s == -1).all()):
                raise NotImplementedError("cdf of a transform with mixed signs")
            s = int(s.reshape(-1)[0])
        return s

    def cdf(self, value):
        for t in reversed(self.transforms):
            value = t.inv(value)
        if self._validate_args:
            self.base_dist._validate_sample(value)
        v = self.base_dist.cdf(value)
        return v if self._monotone_sign() == 1 else 1 - v

    def icdf(self, value):
        value = value if self._monotone_sign() == 1 else 1 - value
        value = self.base_dist.icdf(value)
        for t in self.transforms:
            value = t(value)
        return value


class ConstraintRegistry:
    """constraint -> a Transform from unconstrained space onto it (``biject_to``: bijective;
    ``transform_to``: any transform, e.g. softmax onto the simplex)."""

    def __init__(self):
        self._registry = {}

    def register(self, constraint, factory=None):
        if factory is None:
            return lambda f: self.register(constraint, f)
        key = constraint if isinstance(constraint, type) else constraint
        self._registry[key] = factory
        return factory

    def __call__(self, constraint):
        fn = self._registry.get(constraint) if not isinstance(constraint, type) else None
        if fn is None:
            fn = next((f for k, f in self._registry.items() if isinstance(k, type) and isinstance(constraint, k)), None)
        if fn is None:
            raise NotImplementedError(f"Cannot transform {type(constraint).__name__} constraints")
        return fn(constraint)


biject_to = ConstraintRegistry()
transform_to = ConstraintRegistry()
_C = constraints


def _to_real(c):
    return identity_transform


def _to_independent(c, registry):
    return IndependentTransform(registry(c.base_constraint), c.reinterpreted_batch_ndims)


def _to_positive(c):
    return ExpTransform()


def _to_greater_than(c):
    return ComposeTransform([ExpTransform(), AffineTransform(c.lower_bound, 1)])


def _to_less_than(c):
    return ComposeTransform([ExpTransform(), AffineTransform(c.upper_bound, -1)])


def _to_interval(c):
    lb, ub = c.lower_bound, c.upper_bound
    if isinstance(lb, (int, float)) and isinstance(ub, (int, float)) and lb == 0 and ub == 1:
        return SigmoidTransform()
    return ComposeTransform([SigmoidTransform(), AffineTransform(lb, ub - lb)])


for _r in (biject_to, transform_to):
    _r.register(_C.real, _to_real)
    _r.register(type(_C.real_vector), lambda c, r=_r: _to_independent(c, r))
    _r.register(_C.positive, _to_positive)
    _r.register(_C.nonnegative, _to_positive)
    _r.register(type(_C.positive), _to_greater_than)
    _r.register(type(_C.nonnegative), _to_greater_than)
    _r.register(_C.less_than, _to_less_than)
    _r.register(type(_C.unit_interval), _to_interval)
    _r.register(_C.half_open_interval, _to_interval)
biject_to.register(_C.simplex, lambda c: StickBreakingTransform())
transform_to.register(_C.lower_cholesky, lambda c: LowerCholeskyTransform())  # not a bijection: torch's too
transform_to.register(_C.simplex, lambda c: SoftmaxTransform())

"""varlens.distributions.constraints: the sets parameters and samples live in, as torch's.

Each constraint has ``check(value) -> bool Tensor`` (reduced over its ``event_dim`` rightmost
dims) and a repr equal to torch's (``GreaterThan(lower_bound=0.0)``), which the ValueError of a
failed ``validate_args`` check names.
"""
from __future__ import annotations

from varlens.core.array import xp
from varlens.core.tensor import Tensor

__all__ = ["Constraint", "boolean", "dependent", "dependent_property", "greater_than", "greater_than_eq",
           "half_open_interval", "independent", "integer_interval", "interval", "is_dependent", "less_than",
           "lower_cholesky", "multinomial", "nonnegative", "nonnegative_integer", "one_hot", "positive",
           "positive_definite", "positive_integer", "real", "real_vector", "simplex", "unit_interval"]


def _a(v):
    return v._data if isinstance(v, Tensor) else xp.asarray(v)


class Constraint:
    is_discrete = False
    event_dim = 0

    def check(self, value):
        return Tensor._make(xp.asarray(self._check(_a(value))))

    def __repr__(self):
        return type(self).__name__[1:] + "()"


class _Dependent(Constraint):
    """A constraint that depends on other parameters (not checked)."""

    def __init__(self, *, is_discrete=False, event_dim=0):
        self.is_discrete, self.event_dim = is_discrete, event_dim

    def __call__(self, *, is_discrete=False, event_dim=0):
        return _Dependent(is_discrete=is_discrete, event_dim=event_dim)

    def check(self, x):
        raise ValueError("Cannot determine validity of dependent constraint")


def is_dependent(constraint):
    return isinstance(constraint, _Dependent)


class dependent_property(property):
    def __init__(self, fn=None, *, is_discrete=False, event_dim=0):
        super().__init__(fn)
        self.is_discrete, self.event_dim = is_discrete, event_dim


class _Real(Constraint):
    def _check(self, v):
        return v == v  # not NaN


class _Boolean(Constraint):
    is_discrete = True

    def _check(self, v):
        return (v == 0) | (v == 1)


class _OneHot(Constraint):
    is_discrete = True
    event_dim = 1

    def _check(self, v):
        return ((v == 0) | (v == 1)).all(-1) & (v.sum(-1) == 1)


class _IntegerInterval(Constraint):
    is_discrete = True

    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def _check(self, v):
        return (v % 1 == 0) & (_a(self.lower_bound) <= v) & (v <= _a(self.upper_bound))

    def __repr__(self):
        return f"IntegerInterval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _IntegerGreaterThan(Constraint):
    is_discrete = True

    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def _check(self, v):
        return (v % 1 == 0) & (v >= self.lower_bound)

    def __repr__(self):
        return f"IntegerGreaterThan(lower_bound={self.lower_bound})"


class _GreaterThan(Constraint):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def _check(self, v):
        return _a(self.lower_bound) < v

    def __repr__(self):
        return f"GreaterThan(lower_bound={self.lower_bound})"


class _GreaterThanEq(_GreaterThan):
    def _check(self, v):
        return _a(self.lower_bound) <= v

    def __repr__(self):
        return f"GreaterThanEq(lower_bound={self.lower_bound})"


class _LessThan(Constraint):
    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def _check(self, v):
        return v < _a(self.upper_bound)

    def __repr__(self):
        return f"LessThan(upper_bound={self.upper_bound})"


class _Interval(Constraint):
    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def _check(self, v):
        return (_a(self.lower_bound) <= v) & (v <= _a(self.upper_bound))

    def __repr__(self):
        return f"Interval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _HalfOpenInterval(_Interval):
    def _check(self, v):
        return (_a(self.lower_bound) <= v) & (v < _a(self.upper_bound))

    def __repr__(self):
        return f"HalfOpenInterval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _Simplex(Constraint):
    event_dim = 1

    def _check(self, v):
        return (v >= 0).all(-1) & (xp.abs(v.sum(-1) - 1) < 1e-6)


class _Multinomial(Constraint):
    is_discrete = True
    event_dim = 1

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def _check(self, v):
        return (v >= 0).all(-1) & (v.sum(-1) <= self.upper_bound)

    def __repr__(self):
        return "Multinomial()"


class _LowerCholesky(Constraint):
    event_dim = 2

    def _check(self, v):
        lower = (xp.tril(v) == v).all((-2, -1))
        return lower & (xp.diagonal(v, axis1=-2, axis2=-1) > 0).all(-1)


class _PositiveDefinite(Constraint):
    event_dim = 2

    def _check(self, v):
        sym = xp.all(xp.abs(v - xp.swapaxes(v, -1, -2)) <= 1e-6 * (1 + xp.abs(v)), axis=(-2, -1))
        ev = xp.linalg.eigvalsh((v + xp.swapaxes(v, -1, -2)) / 2)
        return sym & (ev > 0).all(-1)


class _IndependentConstraint(Constraint):
    def __init__(self, base_constraint, reinterpreted_batch_ndims):
        self.base_constraint, self.reinterpreted_batch_ndims = base_constraint, reinterpreted_batch_ndims
        self.event_dim = base_constraint.event_dim + reinterpreted_batch_ndims
        self.is_discrete = base_constraint.is_discrete

    def _check(self, v):
        r = xp.asarray(self.base_constraint._check(v))
        n = self.reinterpreted_batch_ndims
        return r.all(tuple(range(-n, 0))) if n else r

    def __repr__(self):
        return f"IndependentConstraint({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


dependent = _Dependent()
boolean = _Boolean()
one_hot = _OneHot()
real = _Real()
real_vector = _IndependentConstraint(real, 1)
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
unit_interval = _Interval(0.0, 1.0)
simplex = _Simplex()
lower_cholesky = _LowerCholesky()
positive_definite = _PositiveDefinite()
nonnegative_integer = _IntegerGreaterThan(0)
positive_integer = _IntegerGreaterThan(1)
greater_than = _GreaterThan
greater_than_eq = _GreaterThanEq
less_than = _LessThan
interval = _Interval
half_open_interval = _HalfOpenInterval
integer_interval = _IntegerInterval
independent = _IndependentConstraint
multinomial = _Multinomial

"""Parameter: a leaf tensor that a Module registers as learnable."""
from __future__ import annotations

from varlens.core import array as B
from varlens.core import dtypes as DT
from varlens.core.tensor import Tensor


class Parameter(Tensor):
    """A Tensor that requires grad by default and is registered when assigned to a Module."""

    def __init__(self, data=None, requires_grad=True):
        if data is None:
            data = B.xp.empty((0,), dtype=DT.get_default_dtype())
        arr = data._data if isinstance(data, Tensor) else B.as_array(data)
        self._data = arr
        self.grad = None
        self._node = None
        self._version = [0]
        self.hooks_ = None
        self._rg = False
        if requires_grad:
            self.requires_grad_(True)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, proto):
        return (Parameter, (Tensor._make(self._data.copy()), self._rg))

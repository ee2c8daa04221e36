"""torch.return_types: the named tuples that sort, topk, max/min along a dim, median, mode,
kthvalue, cummax/cummin and aminmax return, printed the way PyTorch prints them
(``varlens.return_types.sort(\\nvalues=...,\\nindices=...)``)."""
from __future__ import annotations

from collections import namedtuple


def _make(name, fields):
    base = namedtuple(name, fields)

    def __repr__(self):
        body = ",\n".join(f"{f}={v!r}" for f, v in zip(self._fields, self))
        return f"varlens.return_types.{name}(\n{body})"

    return type(name, (base,), {"__slots__": (), "__repr__": __repr__, "__module__": __name__})


sort = _make("sort", ["values", "indices"])
topk = _make("topk", ["values", "indices"])
max = _make("max", ["values", "indices"])  # noqa: A001
min = _make("min", ["values", "indices"])  # noqa: A001
median = _make("median", ["values", "indices"])
nanmedian = _make("nanmedian", ["values", "indices"])
mode = _make("mode", ["values", "indices"])
kthvalue = _make("kthvalue", ["values", "indices"])
cummax = _make("cummax", ["values", "indices"])
cummin = _make("cummin", ["values", "indices"])
aminmax = _make("aminmax", ["min", "max"])

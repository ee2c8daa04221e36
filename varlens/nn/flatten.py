"""Shape layers: Flatten and Unflatten.
"""
from __future__ import annotations

from varlens.nn.module import Module
from varlens.ops import shape as _shape


class Flatten(Module):
    """Flattens dims start_dim..end_dim (default: everything but the batch dim)."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):
        return _shape.flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Expands dim ``dim`` into ``unflattened_size``."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, input):
        sizes = list(self.unflattened_size)
        nd = input.ndim
        if not -max(nd, 1) <= self.dim < max(nd, 1):
            raise IndexError(f"Dimension out of range (expected to be in range of [{-max(nd, 1)}, {max(nd, 1) - 1}], "
                             f"but got {self.dim}) (Unflatten: dim={self.dim} for an input of shape "
                             f"{tuple(input.shape)})")
        n = input.shape[self.dim]
        if -1 in sizes:
            known = 1
            for s in sizes:
                if s != -1:
                    known *= s
            sizes[sizes.index(-1)] = n // known
        prod = 1
        for s in sizes:
            prod *= s
        if prod != n:
            raise RuntimeError(f"Unflatten: unflattened_size {self.unflattened_size} does not multiply to the size "
                               f"{n} of dim {self.dim} (input shape {tuple(input.shape)})")
        return _shape.unflatten(input, self.dim, tuple(sizes))

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"

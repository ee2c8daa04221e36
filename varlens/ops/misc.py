"""Smaller tensor functions PyTorch users reach for: triangles, diagonals, rolls, grids,
repeat_interleave, nonzero/unique.  Differentiable ones are built from existing ops
(masks, gathers, concatenation), so their gradients come from those ops' backward."""
from __future__ import annotations




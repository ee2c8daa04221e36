"""einsum with a differentiable backward.

For out = einsum("ab,bc->ac", A, B) the gradient for each operand is itself an
einsum: contract the output cotangent with the other operands back onto that
operand's subscripts (dL/dA = einsum("ac,bc->ab", g, B)).  Subscripts repeated
inside one operand (diagonals) are not supported.
"""
from __future__ import annotations

from varlens.autograd.function import Function
from varlens.backend import xp


def _parse(eq, n):
    eq = eq.replace(" ", "")
    if "->" in eq:
        lhs, rhs = eq.split("->")
    else:
        lhs = eq
        letters = lhs.replace(",", "")
        rhs = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    ins = lhs.split(",")
    if len(ins) != n:
        raise ValueError(f"einsum: equation {eq!r} names {len(ins)} operands but {n} were given")
    if "." in eq:
        raise ValueError("einsum: ellipsis ('...') is not supported; spell out the dimensions")
    for s in ins:
        if len(set(s)) != len(s):
            raise ValueError(f"einsum: repeated subscript inside operand {s!r} is not supported")
    return ins, rhs


class Einsum(Function):
    """out = einsum(eq, *xs);  dL/dx_i = einsum(g and the other operands -> subscripts of x_i)."""

    def forward(self, *xs, eq=""):
        self.ins, self.rhs = _parse(eq, len(xs))
        self.save_for_backward(*xs)
        return xp.einsum(f"{','.join(self.ins)}->{self.rhs}", *xs, optimize=True)

    def backward(self, g):
        xs = self.saved
        out = []
        for i, p in enumerate(self.next):
            if p is None:
                out.append(None)
                continue
            others = [s for j, s in enumerate(self.ins) if j != i]
            ops_ = [x for j, x in enumerate(xs) if j != i]
            target = self.ins[i]
            # letters of x_i that appear nowhere else were summed out: broadcast back with ones
            present = set(self.rhs) | set("".join(others))
            missing = [c for c in target if c not in present]
            eq = ",".join([self.rhs] + others)
            if missing:
                shape = [xs[i].shape[target.index(c)] for c in missing]
                eq += "," + "".join(missing)
                ops_ = ops_ + [xp.ones(shape, dtype=g.dtype) if not hasattr(g, "_data") else _ones(shape, g)]
            eq += "->" + target
            out.append(einsum(eq, g, *ops_) if hasattr(g, "_data") else
                       xp.einsum(eq, g, *ops_, optimize=True))
        return tuple(out)


def _ones(shape, like):
    from varlens.tensor import Tensor
    return Tensor._make(xp.ones(shape, dtype=like.dtype))


def einsum(equation, *operands):
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    return Einsum.apply(*operands, eq=equation)

"""einsum with a differentiable backward.

For out = einsum("ab,bc->ac", A, B) the gradient for each operand is itself an
einsum: contract the output cotangent with the other operands back onto that
operand's subscripts (dL/dA = einsum("ac,bc->ab", g, B)).

Two extensions, both reduced to that rule before the Function runs:
- ellipsis ('...ij,...jk->...ik'): '...' is spelled out with fresh letters, and
  operands whose '...' covers fewer (or size-1) dims are expanded first, so the
  broadcast sums happen in Expand's backward;
- a subscript repeated inside one operand ('ii' trace, 'ii->i' diagonal): the
  forward reads the diagonal; the gradient lands only on that diagonal, i.e. it
  is the gradient over the distinct letters times an identity matrix per extra
  occurrence (d x[i,i] / d x[j,k] = delta_ij delta_ik).
"""
from __future__ import annotations

import string

from varlens.core.function import Function
from varlens.core import array as B
from varlens.core.tensor import Tensor
from varlens.ops.pointwise import torch_dtype_name as _tn
from varlens.ops.shape import expand, reshape

_LETTERS = string.ascii_letters


def _check_letters(s, eq):
    for c in s:
        if c not in _LETTERS:
            raise RuntimeError(f"einsum: invalid subscript {c!r} in equation {eq!r}; subscripts must be "
                             "letters a-z or A-Z (and '...')")


def _normalise(eq, shapes):
    """Return (operand subscripts, output subscripts, broadcast shape of the '...' dims or None)
    with every '...' replaced by explicit letters."""
    eq0 = eq
    eq = eq.replace(" ", "")
    if "->" in eq:
        lhs, rhs = eq.split("->", 1)
        explicit = True
    else:
        lhs, rhs, explicit = eq, "", False
    ins = lhs.split(",")
    if len(ins) != len(shapes):
        raise RuntimeError(f"einsum: equation {eq0!r} names {len(ins)} operands but {len(shapes)} were given")
    used = set(c for c in eq if c in _LETTERS)
    ell_nd = 0
    for s, shp in zip(ins, shapes):
        if "." in s:
            if s.count("...") != 1 or s.replace("...", "").count("."):
                raise RuntimeError(f"einsum: operand subscripts {s!r} must contain '...' at most once")
            n = len(shp) - (len(s) - 3)
            if n < 0:
                raise RuntimeError(f"einsum: operand subscripts {s!r} need at least {len(s) - 3} dims, "
                                 f"got a tensor of shape {tuple(shp)}")
            ell_nd = max(ell_nd, n)
        elif len(s) != len(shp):
            raise RuntimeError(f"einsum: operand subscripts {s!r} name {len(s)} dims but the operand has "
                             f"shape {tuple(shp)} ({len(shp)} dims)")
    fresh = [c for c in _LETTERS if c not in used][:ell_nd]
    if len(fresh) < ell_nd:
        raise RuntimeError(f"einsum: equation {eq0!r} uses too many letters to spell out '...'")
    ell_shape = None
    new_ins = []
    if any("." in s for s in ins):
        dims = [1] * ell_nd
        for s, shp in zip(ins, shapes):
            if "." in s:
                pre = s.index("...")
                n = len(shp) - (len(s) - 3)
                part = shp[pre:pre + n]
                for k, d in enumerate(part):
                    j = ell_nd - n + k
                    if d != 1:
                        if dims[j] not in (1, d):
                            raise RuntimeError(f"einsum: the '...' dims of the operands do not broadcast "
                                               f"(got sizes {dims[j]} and {d})")
                        dims[j] = d
        ell_shape = tuple(dims)
        for s, shp in zip(ins, shapes):
            if "." in s:
                n = len(shp) - (len(s) - 3)
                s = s.replace("...", "".join(fresh[ell_nd - n:]))
            new_ins.append(s)
    else:
        new_ins = list(ins)
    for s in new_ins:
        _check_letters(s, eq0)
    if explicit:
        if "." in rhs:
            if rhs.count("...") != 1:
                raise RuntimeError(f"einsum: output subscripts {rhs!r} must contain '...' at most once")
            rhs = rhs.replace("...", "".join(fresh))
        elif ell_nd and any("." in s for s in ins):
            pass  # '...' dims not named in the output are summed over
        _check_letters(rhs, eq0)
        if len(set(rhs)) != len(rhs):
            raise RuntimeError(f"einsum: output subscript repeated in {rhs!r}")
        letters = set("".join(new_ins))
        for c in rhs:
            if c not in letters:
                raise RuntimeError(f"einsum: output subscript {c!r} does not appear in any operand of {eq0!r}")
    else:
        letters = "".join(ins).replace(".", "")
        rhs = "".join(fresh) + "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    # sizes of each letter must agree
    size = {}
    for s, shp in zip(new_ins, shapes):
        n_ell = len(shp) - len(s)  # 0 after spelling out
        for c, d in zip(s, shp[n_ell:] if n_ell > 0 else shp):
            if c in fresh:
                continue
            if size.setdefault(c, d) != d:
                raise RuntimeError(f"einsum: subscript {c!r} has size {size[c]} in one place and {d} in "
                                   f"another in {eq0!r}")
    return new_ins, rhs, fresh, ell_shape


def _diag_expand(eq_in, target, shape, like, make_eye):
    """Adjust a gradient einsum whose result subscripts ``target`` repeat a letter:
    rename extra occurrences and add one identity per extra occurrence."""
    if len(set(target)) == len(target):
        return eq_in, target, []
    used = set(eq_in) | set(target)
    pool = [c for c in _LETTERS if c not in used]
    out, seen, eyes = [], set(), []
    for c, d in zip(target, shape):
        if c in seen:
            n = pool.pop(0)
            out.append(n)
            eyes.append((c + n, make_eye(d, like)))
        else:
            seen.add(c)
            out.append(c)
    return eq_in, "".join(out), eyes


def _np_eye(n, like):
    return B.namespace(like).eye(n, dtype=like.dtype)


def _t_eye(n, like):
    return Tensor._make(B.namespace(like._data).eye(n, dtype=like.dtype))


class Einsum(Function):
    """out = einsum(eq, *xs) (no '...' left);  dL/dx_i = einsum(g and the other operands ->
    subscripts of x_i), placed on the diagonal where x_i repeats a subscript."""

    def forward(self, *xs, ins=(), rhs=""):
        self.ins, self.rhs = ins, rhs
        self.save_for_backward(*xs)
        return self.xp.einsum(f"{','.join(ins)}->{rhs}", *xs, optimize=len(xs) > 2)

    def backward(self, g):
        xp = self.xp
        xs = self.saved
        is_t = hasattr(g, "_data")
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
            missing = []
            for c in target:
                if c not in present and c not in missing:
                    missing.append(c)
            terms = [self.rhs] + others
            if missing:
                shape = [xs[i].shape[target.index(c)] for c in missing]
                terms.append("".join(missing))
                ops_ = ops_ + [_ones(shape, g) if is_t else xp.ones(shape, dtype=g.dtype)]
            _, tgt, eyes = _diag_expand(",".join(terms), target, xs[i].shape, g, _t_eye if is_t else _np_eye)
            for sub, e in eyes:
                terms.append(sub)
                ops_.append(e)
            eq = ",".join(terms) + "->" + tgt
            out.append(einsum(eq, g, *ops_) if is_t else xp.einsum(eq, g, *ops_, optimize=len(ops_) > 1))
        return tuple(out)


def _ones(shape, like):
    return Tensor._make(B.namespace(like._data).ones(shape, dtype=like.dtype))


def einsum(equation, *operands):
    """torch.einsum: sums of products over named subscripts, with '...' and repeated
    subscripts (traces / diagonals); differentiable in every operand."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not isinstance(equation, str):
        raise TypeError(f"einsum: equation must be a str, got {type(equation).__name__}")
    for k, o in enumerate(operands):
        if not isinstance(o, Tensor):
            raise TypeError(f"einsum: operand {k} must be a Tensor, got {type(o).__name__}")
    if len(operands) > 1:
        dt0 = operands[0]._data.dtype
        for k, o in enumerate(operands):
            if o._data.dtype != dt0:
                raise RuntimeError(f"einsum: expected scalar type {_tn(dt0)} but found {_tn(o._data.dtype)} "
                                   f"(operand 0 is {dt0}, operand {k} is {o._data.dtype}; torch does not "
                                   f"promote in einsum: convert with .to(dtype))")
    ins, rhs, fresh, ell_shape = _normalise(equation, [tuple(o.shape) for o in operands])
    if ell_shape is not None:
        ops2 = []
        for s, o in zip(ins, operands):
            # operands whose '...' is shorter or has size-1 dims are broadcast explicitly
            want = tuple(ell_shape[fresh.index(c)] if c in fresh else d
                         for c, d in zip(s, [1] * (len(s) - o.ndim) + list(o.shape)))
            if len(s) != o.ndim or want != tuple(o.shape):
                o = expand(reshape(o, (1,) * (len(s) - o.ndim) + tuple(o.shape)), want) \
                    if len(s) != o.ndim else expand(o, want)
            ops2.append(o)
        operands = tuple(ops2)
    return Einsum.apply(*operands, ins=tuple(ins), rhs=rhs)

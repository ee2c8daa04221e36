"""Every differentiable core op, table-driven: one row per op, three checks per row.

* ``test_gradcheck``: backward agrees with central differences (float64,
  ``varlens.autograd.gradcheck``) over Hypothesis-drawn shapes, broadcasting included.
* ``test_torch_parity``: values and gradients equal PyTorch's (float64, tight tolerance).
* ``test_gradgradcheck``: the recorded backward (create_graph=True) is itself right,
  i.e. second derivatives agree with finite differences of the first.

A row is ``Op(name, varlens fn, torch fn, generator)``; the generator turns a drawn
shape and seed into the inputs (float64 arrays require grad; int/bool arrays are
indices and masks) and keyword arguments given to both functions.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import varlens as vl
from conftest import assert_close

# ---------------------------------------------------------------- input generators


def _vals(rng, shape, domain):
    x = rng.standard_normal(shape)
    if domain == "pos":
        return np.abs(x) + 0.5
    if domain == "away0":  # keep clear of kinks at 0 (abs, relu) and of poles (1/x)
        return np.where(x >= 0, 1.0, -1.0) * (np.abs(x) + 0.2)
    if domain == "unit":
        return rng.uniform(-0.9, 0.9, shape)
    if domain == "distinct":  # well-separated values: no ties for max/min/sort-like ops
        n = int(np.prod(shape)) if shape else 1
        return (rng.permutation(n).reshape(shape) * 0.37 + rng.uniform(-0.05, 0.05, shape)).astype(float)
    return x


def _bshape(rng, shape):
    """A shape that broadcasts against ``shape``: drop some leading dims, set some to 1."""
    nd = len(shape)
    drop = int(rng.integers(0, nd + 1)) if nd else 0
    out = [s if rng.random() < 0.6 else 1 for s in shape[drop:]]
    return tuple(out)


def unary(domain=None):
    def g(shape, rng):
        return [_vals(rng, shape, domain)], {}
    return g


def binary(da=None, db=None):
    def g(shape, rng):
        other = _bshape(rng, shape)
        sa, sb = (shape, other) if rng.random() < 0.5 else (other, shape)
        return [_vals(rng, sa, da), _vals(rng, sb, db)], {}
    return g


def _dim_kw(rng, nd, allow_tuple=True, allow_none=True):
    r = rng.random()
    if allow_none and r < 0.2:
        dim = None
    elif allow_tuple and r < 0.45 and nd >= 2:
        dim = tuple(int(d) for d in rng.choice(nd, size=2, replace=False))
    else:
        dim = int(rng.integers(-nd, nd))
    return {"dim": dim, "keepdim": bool(rng.random() < 0.5)}


def reduction(domain=None, allow_tuple=True, allow_none=True):
    def g(shape, rng):
        return [_vals(rng, shape, domain)], _dim_kw(rng, len(shape), allow_tuple, allow_none)
    return g


def one_dim(domain=None):
    def g(shape, rng):
        return [_vals(rng, shape, domain)], {"dim": int(rng.integers(-len(shape), len(shape)))}
    return g


def where_gen(shape, rng):
    c = rng.random(_bshape(rng, shape)) < 0.5
    return [c, _vals(rng, shape, None), _vals(rng, _bshape(rng, shape), None)], {}


def cat_gen(shape, rng):
    d = int(rng.integers(0, len(shape)))
    xs = []
    for _ in range(int(rng.integers(1, 4))):
        s = list(shape)
        s[d] = int(rng.integers(1, 4))
        xs.append(rng.standard_normal(s))
    return xs, {"dim": d}


def stack_gen(shape, rng):
    n = int(rng.integers(1, 4))
    return [rng.standard_normal(shape) for _ in range(n)], {"dim": int(rng.integers(0, len(shape) + 1))}


def split_gen(shape, rng):
    d = int(rng.integers(0, len(shape)))
    return [rng.standard_normal(shape)], {"size": int(rng.integers(1, shape[d] + 1)), "dim": d}


def chunk_gen(shape, rng):
    d = int(rng.integers(0, len(shape)))
    return [rng.standard_normal(shape)], {"chunks": int(rng.integers(1, 4)), "dim": d}


def adv_index_gen(shape, rng):
    idx = rng.integers(0, shape[0], size=int(rng.integers(1, 7)))  # repeats are likely
    return [rng.standard_normal(shape), idx.astype(np.int64)], {}


def mask_index_gen(shape, rng):
    return [rng.standard_normal(shape), rng.random(shape) < 0.5], {}


def gather_gen(shape, rng):
    d = int(rng.integers(0, len(shape)))
    ishape = [int(rng.integers(1, s + 1)) for s in shape]  # may be smaller than x off dim
    ishape[d] = int(rng.integers(1, 5))
    idx = rng.integers(0, shape[d], size=ishape).astype(np.int64)
    return [rng.standard_normal(shape), idx], {"dim": d}


def scatter_add_gen(shape, rng):
    d = int(rng.integers(0, len(shape)))
    ishape = [int(rng.integers(1, s + 1)) for s in shape]
    ishape[d] = int(rng.integers(1, 5))
    idx = rng.integers(0, shape[d], size=ishape).astype(np.int64)
    return [rng.standard_normal(shape), idx, rng.standard_normal(ishape)], {"dim": d}


def _unique_scatter(shape, rng):
    """scatter with distinct targets along dim (repeated targets are order-dependent)."""
    d = int(rng.integers(0, len(shape)))
    ishape = [int(rng.integers(1, s + 1)) for s in shape]
    ishape[d] = int(rng.integers(1, shape[d] + 1))
    perm = np.argsort(rng.random(tuple(ishape[:d]) + (shape[d],) + tuple(ishape[d + 1:])), axis=d)
    idx = np.take(perm, np.arange(ishape[d]), axis=d).astype(np.int64)
    return [rng.standard_normal(shape), idx, rng.standard_normal(ishape)], {"dim": d}


def masked_fill_gen(shape, rng):
    return [rng.standard_normal(shape), rng.random(_bshape(rng, shape)) < 0.5], {}


def matmul_gen(shape, rng):
    m, k, n, b = (int(v) for v in rng.integers(1, 5, size=4))
    case = int(rng.integers(0, 7))
    sa, sb = [((m, k), (k, n)), ((b, m, k), (k, n)), ((k,), (k, n)), ((m, k), (k,)), ((k,), (k,)),
              ((b, 1, m, k), (3, k, n)), ((k,), (b, k, n))][case]
    return [rng.standard_normal(sa), rng.standard_normal(sb)], {}


def einsum_gen(shape, rng):
    i, j, k, b = (int(v) for v in rng.integers(1, 5, size=4))
    eq, shapes = [("ij,jk->ik", [(i, j), (j, k)]), ("bij,bjk->bik", [(b, i, j), (b, j, k)]),
                  ("i,i->", [(i,), (i,)]), ("ij->j", [(i, j)]), ("ij,kj->ik", [(i, j), (k, j)])][
        int(rng.integers(0, 5))]
    return [rng.standard_normal(s) for s in shapes], {"eq": eq}


def expand_gen(shape, rng):
    src = tuple(1 if rng.random() < 0.5 else s for s in shape)
    return [rng.standard_normal(src)], {"shape": (2,) + tuple(shape)}


def perm_gen(shape, rng):
    return [rng.standard_normal(shape)], {"dims": tuple(int(d) for d in rng.permutation(len(shape)))}


def transpose_gen(shape, rng):
    nd = len(shape)
    return [rng.standard_normal(shape)], {"d0": int(rng.integers(-nd, nd)), "d1": int(rng.integers(-nd, nd))}


def squeeze_gen(shape, rng):
    s = list(shape)
    s.insert(int(rng.integers(0, len(s) + 1)), 1)
    return [rng.standard_normal(s)], {"dim": int(rng.integers(-len(s), len(s)))}


def unsqueeze_gen(shape, rng):
    nd = len(shape) + 1
    return [rng.standard_normal(shape)], {"dim": int(rng.integers(-nd, nd))}


def flatten_gen(shape, rng):
    nd = len(shape)
    a = int(rng.integers(0, nd))
    b = int(rng.integers(a, nd))
    return [rng.standard_normal(shape)], {"start_dim": a, "end_dim": b}


def pow_tensor_gen(shape, rng):
    other = _bshape(rng, shape)
    return [_vals(rng, shape, "pos"), rng.uniform(-2, 2, other)], {}


# ---------------------------------------------------------------- the table


@dataclass
class Op:
    name: str
    vfn: Callable
    tfn: Callable
    gen: Callable
    min_nd: int = 0
    gradgrad: bool = True
    atol: float = 1e-9
    extra: dict = field(default_factory=dict)


def _sum_tuple(parts):
    return parts


OPS = [
    # elementwise, unary
    Op("neg", lambda x: -x, lambda x: -x, unary()),
    Op("exp", vl.exp, torch.exp, unary()),
    Op("log", vl.log, torch.log, unary("pos")),
    Op("sqrt", vl.sqrt, torch.sqrt, unary("pos")),
    Op("rsqrt", vl.rsqrt, torch.rsqrt, unary("pos")),
    Op("abs", vl.abs, torch.abs, unary("away0")),
    Op("sin", vl.sin, torch.sin, unary()),
    Op("cos", vl.cos, torch.cos, unary()),
    Op("tanh", vl.tanh, torch.tanh, unary()),
    Op("sigmoid", vl.sigmoid, torch.sigmoid, unary()),
    Op("erf", vl.erf, torch.erf, unary()),
    Op("relu", vl.relu, torch.relu, unary("away0")),
    Op("leaky_relu", lambda x: vl.leaky_relu(x, 0.1), lambda x: TF.leaky_relu(x, 0.1), unary("away0")),
    Op("elu", lambda x: vl.elu(x, 0.7), lambda x: TF.elu(x, 0.7), unary("away0")),
    Op("gelu", vl.gelu, TF.gelu, unary()),
    Op("gelu_tanh", lambda x: vl.gelu(x, approximate="tanh"), lambda x: TF.gelu(x, approximate="tanh"),
       unary()),
    Op("silu", vl.silu, TF.silu, unary()),
    Op("softplus", lambda x: vl.softplus(x, beta=2.0), lambda x: TF.softplus(x, beta=2.0), unary()),
    Op("clamp", lambda x: vl.clamp(x, -0.5, 0.7), lambda x: torch.clamp(x, -0.5, 0.7), unary("away0")),
    Op("clamp_min", lambda x: x.clamp(min=0.3), lambda x: x.clamp(min=0.3), unary("away0")),
    Op("pow_2", lambda x: x ** 2, lambda x: x ** 2, unary()),
    Op("pow_3_int", lambda x: vl.pow(x, 3), lambda x: torch.pow(x, 3), unary()),
    Op("pow_half", lambda x: x ** 0.5, lambda x: x ** 0.5, unary("pos")),
    Op("pow_neg", lambda x: x ** -1.5, lambda x: x ** -1.5, unary("pos")),
    Op("rpow", lambda x: 2.0 ** x, lambda x: 2.0 ** x, unary()),
    Op("square", vl.square, torch.square, unary()),
    Op("reciprocal", vl.reciprocal, torch.reciprocal, unary("away0")),
    Op("rdiv", lambda x: 3.0 / x, lambda x: 3.0 / x, unary("away0")),
    Op("rsub", lambda x: 1.5 - x, lambda x: 1.5 - x, unary()),
    Op("scalar_ops", lambda x: (x * 2.0 + 1.0) / 4.0 - 0.5, lambda x: (x * 2.0 + 1.0) / 4.0 - 0.5, unary()),
    Op("log1p", vl.log1p, torch.log1p, unary("pos")),
    Op("expm1", vl.expm1, torch.expm1, unary()),
    Op("floor", vl.floor, torch.floor, unary()),
    Op("round", vl.round, torch.round, unary()),
    Op("sign", vl.sign, torch.sign, unary("away0")),
    # elementwise, binary with broadcasting
    Op("add", lambda a, b: a + b, lambda a, b: a + b, binary()),
    Op("sub", lambda a, b: a - b, lambda a, b: a - b, binary()),
    Op("mul", lambda a, b: a * b, lambda a, b: a * b, binary()),
    Op("div", lambda a, b: a / b, lambda a, b: a / b, binary(None, "away0")),
    Op("pow_tensor", lambda a, b: a ** b, lambda a, b: a ** b, pow_tensor_gen),
    Op("maximum", vl.maximum, torch.maximum, binary()),
    Op("minimum", vl.minimum, torch.minimum, binary()),
    Op("where", lambda c, a, b: vl.where(c, a, b), lambda c, a, b: torch.where(c, a, b), where_gen),
    # reductions
    Op("sum", lambda x, dim, keepdim: x.sum(dim, keepdim), lambda x, dim, keepdim: x.sum(dim, keepdim),
       reduction(), 1),
    Op("mean", lambda x, dim, keepdim: x.mean(dim, keepdim), lambda x, dim, keepdim: x.mean(dim, keepdim),
       reduction(), 1),
    Op("var", lambda x, dim, keepdim: x.var(dim, keepdim=keepdim),
       lambda x, dim, keepdim: x.var(dim, keepdim=keepdim), reduction(), 1,
       extra={"need_n": 2}),
    Op("var_biased", lambda x, dim, keepdim: vl.var(x, dim, keepdim=keepdim, correction=0),
       lambda x, dim, keepdim: torch.var(x, dim, keepdim=keepdim, correction=0), reduction(), 1),
    Op("std", lambda x, dim, keepdim: x.std(dim, keepdim=keepdim),
       lambda x, dim, keepdim: x.std(dim, keepdim=keepdim), reduction(), 1, extra={"need_n": 2}),
    Op("amax", lambda x, dim, keepdim: vl.amax(x, dim, keepdim),
       lambda x, dim, keepdim: torch.amax(x, () if dim is None else dim, keepdim), reduction("distinct"), 1),
    Op("amin", lambda x, dim, keepdim: vl.amin(x, dim, keepdim),
       lambda x, dim, keepdim: torch.amin(x, () if dim is None else dim, keepdim), reduction("distinct"), 1),
    Op("max_all", lambda x: x.max(), lambda x: x.max(), unary("distinct"), 1),
    Op("max_dim", lambda x, dim, keepdim: x.max(dim, keepdim).values,
       lambda x, dim, keepdim: x.max(dim, keepdim).values, reduction("distinct", False, False), 1),
    Op("min_dim", lambda x, dim, keepdim: vl.min(x, dim, keepdim)[0],
       lambda x, dim, keepdim: torch.min(x, dim, keepdim)[0], reduction("distinct", False, False), 1),
    Op("logsumexp", lambda x, dim, keepdim: vl.logsumexp(x, dim, keepdim),
       lambda x, dim, keepdim: torch.logsumexp(x, dim, keepdim), reduction(None, True, False), 1),
    Op("softmax", lambda x, dim: vl.softmax(x, dim), lambda x, dim: torch.softmax(x, dim), one_dim(), 1),
    Op("log_softmax", lambda x, dim: vl.log_softmax(x, dim), lambda x, dim: torch.log_softmax(x, dim),
       one_dim(), 1),
    Op("cumsum", lambda x, dim: vl.cumsum(x, dim), lambda x, dim: torch.cumsum(x, dim), one_dim(), 1),
    Op("prod", lambda x, dim, keepdim: vl.prod(x, dim, keepdim) if dim is None or isinstance(dim, int)
       else vl.prod(x, dim, keepdim),
       lambda x, dim, keepdim: (torch.prod(x, dim, keepdim) if dim is not None else
                                torch.prod(x).reshape([1] * x.ndim) if keepdim else torch.prod(x)),
       reduction("pos", False, True), 1),
    Op("norm", lambda x: vl.norm(x), lambda x: torch.linalg.vector_norm(x), unary(), 1),
    # shapes
    Op("reshape", lambda x: x.reshape(-1), lambda x: x.reshape(-1), unary()),
    Op("view", lambda x: x.view(x.shape[0], -1), lambda x: x.view(x.shape[0], -1), unary(), 1),
    Op("transpose", lambda x, d0, d1: x.transpose(d0, d1), lambda x, d0, d1: x.transpose(d0, d1),
       transpose_gen, 1),
    Op("permute", lambda x, dims: x.permute(*dims), lambda x, dims: x.permute(*dims), perm_gen, 1),
    Op("squeeze", lambda x, dim: x.squeeze(dim), lambda x, dim: x.squeeze(dim), squeeze_gen),
    Op("squeeze_all", lambda x: x.squeeze(), lambda x: x.squeeze(), unary()),
    Op("unsqueeze", lambda x, dim: x.unsqueeze(dim), lambda x, dim: x.unsqueeze(dim), unsqueeze_gen),
    Op("expand", lambda x, shape: x.expand(*shape), lambda x, shape: x.expand(*shape), expand_gen),
    Op("flatten", lambda x, start_dim, end_dim: x.flatten(start_dim, end_dim),
       lambda x, start_dim, end_dim: x.flatten(start_dim, end_dim), flatten_gen, 1),
    Op("cat", lambda *xs, dim: vl.cat(xs, dim), lambda *xs, dim: torch.cat(xs, dim), cat_gen, 1),
    Op("stack", lambda *xs, dim: vl.stack(xs, dim), lambda *xs, dim: torch.stack(xs, dim), stack_gen),
    Op("split", lambda x, size, dim: vl.split(x, size, dim), lambda x, size, dim: torch.split(x, size, dim),
       split_gen, 1),
    Op("chunk", lambda x, chunks, dim: vl.chunk(x, chunks, dim),
       lambda x, chunks, dim: torch.chunk(x, chunks, dim), chunk_gen, 1),
    Op("flip", lambda x: vl.flip(x, (0,)), lambda x: torch.flip(x, (0,)), unary(), 1),
    Op("repeat", lambda x: x.repeat(2, 1, 3), lambda x: x.repeat(2, 1, 3), unary(), 0,
       extra={"max_nd": 3}),
    # indexing
    Op("slice_basic", lambda x: x[::2, ..., 1:], lambda x: x[::2, ..., 1:], unary(), 2),
    Op("int_and_none", lambda x: x[0, None], lambda x: x[0, None], unary(), 1),
    Op("adv_repeated", lambda x, i: x[i], lambda x, i: x[i], adv_index_gen, 1),
    Op("adv_mixed", lambda x, i: x[:, i] if x.ndim > 1 else x[i], lambda x, i: x[:, i] if x.ndim > 1 else x[i],
       lambda s, r: ([r.standard_normal(s), r.integers(0, s[-1 if len(s) == 1 else 1], 5).astype(np.int64)],
                     {}), 1),
    Op("bool_mask", lambda x, m: x[m], lambda x, m: x[m], mask_index_gen, 1),
    Op("index_select", lambda x, i: vl.index_select(x, 0, i), lambda x, i: torch.index_select(x, 0, i),
       adv_index_gen, 1),
    Op("gather", lambda x, i, dim: vl.gather(x, dim, i), lambda x, i, dim: torch.gather(x, dim, i),
       gather_gen, 1),
    Op("scatter_add", lambda x, i, s, dim: vl.scatter_add(x, dim, i, s),
       lambda x, i, s, dim: torch.scatter_add(x, dim, i, s), scatter_add_gen, 1),
    Op("scatter", lambda x, i, s, dim: vl.scatter(x, dim, i, s),
       lambda x, i, s, dim: torch.scatter(x, dim, i, s), lambda s, r: _unique_scatter(s, r), 1),
    Op("masked_fill", lambda x, m: x.masked_fill(m, 0.25), lambda x, m: x.masked_fill(m, 0.25),
       masked_fill_gen),
    # products
    Op("matmul", lambda a, b: a @ b, lambda a, b: a @ b, matmul_gen),
    Op("einsum", lambda *xs, eq: vl.einsum(eq, *xs), lambda *xs, eq: torch.einsum(eq, *xs), einsum_gen),
]
OPS_BY_NAME = {o.name: o for o in OPS}
assert len(OPS_BY_NAME) == len(OPS)


@st.composite
def cases(draw, op):
    max_nd = op.extra.get("max_nd", 3)
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=op.min_nd, max_size=max_nd)))
    need = op.extra.get("need_n")
    if need and shape:
        shape = tuple(max(s, need) for s in shape)
    return shape, draw(st.integers(0, 2 ** 31 - 1))


def _inputs(op, shape, seed):
    rng = np.random.default_rng(seed)
    arrays, kw = op.gen(shape, rng)
    return arrays, kw


def _vl_inputs(arrays):
    return [vl.tensor(a, requires_grad=a.dtype == np.float64) for a in arrays]


def _torch_inputs(arrays):
    return [torch.tensor(a, requires_grad=a.dtype == np.float64) for a in arrays]


def _outs(o):
    return tuple(o) if isinstance(o, (tuple, list)) else (o,)


SETTINGS = settings(max_examples=10, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("name", list(OPS_BY_NAME))
def test_gradcheck(name):
    op = OPS_BY_NAME[name]

    @SETTINGS
    @given(cases(op))
    def run(case):
        arrays, kw = _inputs(op, *case)
        ts = _vl_inputs(arrays)
        if not any(t.requires_grad for t in ts):
            return
        rep = vl.autograd.gradcheck(lambda *xs: op.vfn(*xs, **kw), ts, raise_exception=False, return_report=True)
        assert rep.ok, f"{name} {case}: {rep}"
    run()


@pytest.mark.parametrize("name", list(OPS_BY_NAME))
def test_torch_parity(name):
    op = OPS_BY_NAME[name]

    @SETTINGS
    @given(cases(op))
    def run(case):
        arrays, kw = _inputs(op, *case)
        vs, ts = _vl_inputs(arrays), _torch_inputs(arrays)
        vo, to = _outs(op.vfn(*vs, **kw)), _outs(op.tfn(*ts, **kw))
        assert len(vo) == len(to), f"{name}: {len(vo)} outputs vs torch {len(to)}"
        rng = np.random.default_rng(1)
        vloss, tloss = 0.0, 0.0
        for a, b in zip(vo, to):
            assert a.dtype == np.dtype(str(b.dtype).replace("torch.", "")), f"{name}: dtype {a.dtype} vs {b.dtype}"
            assert_close(a, b, what=f"{name} value {case}")
            w = rng.standard_normal(tuple(b.shape))
            vloss = vloss + (a * vl.tensor(w)).sum()
            tloss = tloss + (b * torch.tensor(w)).sum()
        vloss.backward()
        tloss.backward()
        for i, (v, t) in enumerate(zip(vs, ts)):
            if t.requires_grad:
                tg = t.grad if t.grad is not None else torch.zeros_like(t)
                assert v.grad is not None, f"{name}: input {i} got no gradient"
                assert_close(v.grad, tg, atol=op.atol, what=f"{name} grad of input {i} {case}")
    run()


GRADGRAD = [o.name for o in OPS if o.gradgrad]


@pytest.mark.parametrize("name", GRADGRAD)
def test_gradgradcheck(name):
    op = OPS_BY_NAME[name]

    @settings(max_examples=4, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(cases(op))
    def run(case):
        arrays, kw = _inputs(op, *case)
        ts = _vl_inputs(arrays)
        if not any(t.requires_grad for t in ts):
            return
        rep = vl.autograd.gradgradcheck(lambda *xs: op.vfn(*xs, **kw), ts, raise_exception=False, return_report=True)
        assert rep.ok, f"{name} {case}: {rep}"
    run()

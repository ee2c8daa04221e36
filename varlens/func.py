"""torch.func (functorch's function transforms), built on varlens's tape autograd.

- ``grad(f, argnums=0, has_aux=False)`` / ``grad_and_value``: the gradient of a scalar-valued ``f``
  by ``autograd.grad``; when an input already requires grad (an outer transform's input) the
  gradient keeps its graph (``create_graph``), so transforms nest (``grad(grad(f))``); otherwise
  the results carry no graph, as PyTorch's.
- ``vmap(f, in_dims=0, out_dims=0, randomness=...)``: ``f`` applied to each slice along the mapped
  dimension and the results stacked.  The same numbers as PyTorch's batching rules, at the speed of
  a Python loop (PyTorch runs one batched kernel); ``randomness`` is accepted, every slice draws from
  the one generator (PyTorch's 'different').
- ``jacrev`` / ``jacfwd`` / ``hessian`` / ``vjp`` / ``jvp``: autograd.functional's Jacobian, Hessian and
  products (jacfwd is computed in reverse mode, the same values).
- ``functional_call``: nn.utils.stateless's (a module run with the given parameters and buffers).

The per-sample-gradient idiom ``vmap(grad(loss_of_params), in_dims=(None, 0, 0))(params, x, y)``
runs as in the tutorial.  See docs/conventions.md ("torch.func").
"""
from __future__ import annotations

import functools

import varlens as _vl
from varlens.autograd import functional as _AF
from varlens.nn.utils.stateless import functional_call  # noqa: F401

__all__ = ["grad", "grad_and_value", "vmap", "jacrev", "jacfwd", "hessian", "vjp", "jvp", "functional_call"]


def _tree_map(fn, tree):
    if isinstance(tree, (tuple, list)):
        return type(tree)(_tree_map(fn, t) for t in tree)
    if isinstance(tree, dict):
        return {k: _tree_map(fn, v) for k, v in tree.items()}
    return fn(tree)


def _leaves(tree):
    if isinstance(tree, (tuple, list)):
        return [x for t in tree for x in _leaves(t)]
    if isinstance(tree, dict):
        return [x for v in tree.values() for x in _leaves(v)]
    return [tree]


def _rebuild(tree, it):
    if isinstance(tree, (tuple, list)):
        return type(tree)(_rebuild(t, it) for t in tree)
    if isinstance(tree, dict):
        return {k: _rebuild(v, it) for k, v in tree.items()}
    return next(it)


def grad_and_value(func, argnums=0, has_aux=False):
    """``(gradient, value)`` of a scalar-valued ``func`` with respect to the arguments ``argnums``
    (an int or a tuple of ints; each may be a tensor or a tuple/list/dict of tensors)."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
        args = list(args)
        # the gradient is itself differentiable when an input already is (an outer transform's
        # input, or a tensor the caller differentiates): grad(grad(f)) nests; otherwise, as
        # PyTorch, the results carry no graph
        nested = any(isinstance(t, _vl.Tensor) and t.requires_grad for i in nums for t in _leaves(args[i]))
        for i in nums:
            args[i] = _tree_map(lambda t: t.detach().requires_grad_(True) if isinstance(t, _vl.Tensor) and
                                not t.requires_grad else t, args[i])
        with _vl.enable_grad():
            out = func(*args, **kwargs)
            value, aux = out if has_aux else (out, None)
            if not isinstance(value, _vl.Tensor) or value.numel() != 1:
                raise RuntimeError(f"grad: func must return a tensor with a single element, got "
                                   f"{type(value).__name__}{'' if not isinstance(value, _vl.Tensor) else tuple(value.shape)}")
            inputs = [x for i in nums for x in _leaves(args[i])]
            gs = _vl.autograd.grad(value, inputs, create_graph=nested, allow_unused=True)
        gs = [_vl.zeros_like(x) if g is None else g for x, g in zip(inputs, gs)]
        if not nested:
            value = value.detach()
        it = iter(gs)
        per_arg = tuple(_rebuild(args[i], it) for i in nums)
        g = per_arg[0] if isinstance(argnums, int) else per_arg
        return (g, (value, aux)) if has_aux else (g, value)
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """The gradient of a scalar-valued ``func`` (see grad_and_value); with ``has_aux``, (grad, aux)."""
    gv = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, value = gv(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return wrapper


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """``func`` mapped over dimension ``in_dims`` of its inputs (None: not mapped; a tuple: one per
    argument, nested like the argument), results stacked along ``out_dims``."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"vmap: randomness must be 'error', 'different' or 'same', got {randomness!r}")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        dims = in_dims if isinstance(in_dims, (tuple, list)) else (in_dims,) * len(args)
        if len(dims) != len(args):
            raise ValueError(f"vmap: in_dims has {len(dims)} entries for {len(args)} positional arguments")
        sizes = set()

        def spec(arg, d):
            if isinstance(arg, (tuple, list, dict)) and not isinstance(d, (tuple, list, dict)):
                return _tree_map(lambda t: d if isinstance(t, _vl.Tensor) else None, arg)
            return d
        dims = [spec(a, d) for a, d in zip(args, dims)]
        for a, d in zip(args, dims):
            for t, dd in zip(_leaves(a), _leaves(d) if isinstance(d, (tuple, list, dict)) else [d] * len(_leaves(a))):
                if dd is not None and isinstance(t, _vl.Tensor):
                    sizes.add(t.shape[dd])
        if len(sizes) != 1:
            raise ValueError(f"vmap: expected the mapped dimensions to have one size, got sizes {sorted(sizes)}")
        n = sizes.pop()

        def take(arg, d, i):
            if isinstance(arg, (tuple, list, dict)):
                if isinstance(d, (tuple, list)):
                    return type(arg)(take(a, dd, i) for a, dd in zip(arg, d))
                if isinstance(d, dict):
                    return {k: take(arg[k], d[k], i) for k in arg}
                return _tree_map(lambda t: take(t, d, i), arg)
            if d is None or not isinstance(arg, _vl.Tensor):
                return arg
            return arg.select(d, i)
        outs = [func(*[take(a, d, i) for a, d in zip(args, dims)], **kwargs) for i in range(n)]
        first = outs[0]
        if isinstance(first, (tuple, list)):
            od = out_dims if isinstance(out_dims, (tuple, list)) else (out_dims,) * len(first)
            return type(first)(_vl.stack([o[j] for o in outs], od[j]) for j in range(len(first)))
        if isinstance(first, dict):
            return {k: _vl.stack([o[k] for o in outs], out_dims) for k in first}
        return _vl.stack(outs, out_dims)
    return wrapper


def jacrev(func, argnums=0, *, has_aux=False):
    """The Jacobian of ``func`` with respect to argument ``argnums`` (reverse mode)."""
    if has_aux:
        raise NotImplementedError("jacrev: has_aux is not supported in varlens")

    def wrapper(*args):
        nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)

        def f(*xs):
            full = list(args)
            for i, x in zip(nums, xs):
                full[i] = x
            return func(*full)
        xs = tuple(args[i] for i in nums)
        nested = any(x.requires_grad for x in xs)     # inside an outer transform: keep the graph
        jac = _AF.jacobian(f, xs, create_graph=nested)
        return jac[0] if isinstance(argnums, int) else jac
    return wrapper


jacfwd = jacrev      # the same Jacobian (varlens has reverse mode only)


def hessian(func, argnums=0):
    """The Hessian of a scalar-valued ``func`` with respect to argument ``argnums``."""
    return jacrev(jacrev(func, argnums), argnums)


def vjp(func, *primals, has_aux=False):
    """``(func(*primals), vjp_fn)``: vjp_fn(cotangent) gives the vector-Jacobian products."""
    if has_aux:
        raise NotImplementedError("vjp: has_aux is not supported in varlens")
    xs = [p.detach().requires_grad_(True) for p in primals]
    with _vl.enable_grad():
        out = func(*xs)

    def vjp_fn(cotangent):
        return tuple(g if g is not None else _vl.zeros_like(x) for x, g in
                     zip(xs, _vl.autograd.grad(out, xs, cotangent, retain_graph=True, create_graph=True,
                                               allow_unused=True)))
    return out, vjp_fn


def jvp(func, primals, tangents):
    """``(func(*primals), J @ tangents)`` (autograd.functional.jvp's double-backward trick)."""
    return _AF.jvp(func, tuple(primals), tuple(tangents))

"""torch.autograd.functional: Jacobians, Hessians and their products with vectors.

Every function here is built from reverse-mode ``grad`` calls:
- jacobian: one backward per output element (row i of J is d out_i / d x);
- vjp: one backward with the cotangent v (v^T J);
- jvp: the double-backward trick, J u = d/dw <v^T J(w)..., u>: take g(w) = w^T J with
  create_graph, then differentiate <g(w), u> with respect to w;
- hessian: the Jacobian of the gradient (gradient with create_graph=True);
- vhp / hvp: gradient of <grad f, v>; for a twice-differentiable f the Hessian is
  symmetric, so v^T H and H v coincide (torch computes hvp by double backward, too).

``vectorize`` and ``strategy`` are accepted for torch compatibility; varlens always
loops (no vmap).  Results are detached unless ``create_graph=True``.
"""
from __future__ import annotations

from varlens.core.engine import grad as _grad
from varlens.core.grad_mode import enable_grad
from varlens import ops
from varlens.core.array import xp
from varlens.core.tensor import Tensor


def _as_tuple(x, what, fn_name):
    if isinstance(x, Tensor):
        return True, (x,)
    if isinstance(x, (tuple, list)) and all(isinstance(t, Tensor) for t in x):
        return False, tuple(x)
    raise TypeError(f"{fn_name}: {what} must be a Tensor or a tuple of Tensors, got {type(x).__name__}")


def _prep_inputs(inputs, create_graph):
    out = []
    for x in inputs:
        if create_graph and x.requires_grad:
            out.append(x)  # keep the link to x for higher orders
        else:
            if x.dtype.kind not in "fc":
                raise RuntimeError(f"autograd.functional: inputs must be floating-point, got dtype {x.dtype}")
            out.append(x.detach().requires_grad_(True))
    return tuple(out)


def _zeros_like(x):
    return Tensor._make(xp.zeros(x.shape, dtype=x.dtype))


def _grads(outputs, inputs, grad_outputs, create_graph, strict, fn_name):
    """d(<outputs, grad_outputs>)/d(inputs); unused inputs get zeros (strict=True raises)."""
    outs = [o for o in outputs if o.requires_grad]
    gos = [g for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if outs:
        gs = _grad(outs, list(inputs), gos, retain_graph=True, create_graph=create_graph, allow_unused=True)
    else:
        gs = [None] * len(inputs)
    res = []
    for i, (g, x) in enumerate(zip(gs, inputs)):
        if g is None:
            if strict:
                raise RuntimeError(f"{fn_name}: the output of the function is independent of input {i}; "
                                   "this is not allowed in strict mode")
            g = _zeros_like(x)
        res.append(g)
    return res


def _finish(x, create_graph):
    if isinstance(x, tuple):
        return tuple(_finish(y, create_graph) for y in x)
    return x if create_graph else x.detach()


def _inner(gs, vs):
    """sum_i <g_i, v_i> over the gradients that depend on the inputs (None if none does): the
    scalar whose gradient gives J v (jvp) or H v (hvp/vhp)."""
    total = None
    for gi, vi in zip(gs, vs):
        if gi.requires_grad:
            term = (gi * vi).sum()
            total = term if total is None else total + term
    return total


def _v_or_ones(v, ref, fn_name, which):
    """The vectors v checked against ``ref`` (one per tensor), or ones when v is None, which
    torch allows only when ``ref`` is a single one-element tensor."""
    if v is not None:
        return _check_v(v, ref, "v", fn_name)
    if len(ref) != 1 or ref[0].numel() != 1:
        raise RuntimeError(f"{fn_name}: the vector v can only be None if {which} a single Tensor with a "
                           "single element")
    return (Tensor._make(xp.ones(ref[0].shape, dtype=ref[0].dtype)),)


def _check_v(v, ref, what, fn_name):
    single, vs = _as_tuple(v, what, fn_name)
    if len(vs) != len(ref):
        raise RuntimeError(f"{fn_name}: {what} has {len(vs)} tensors but {len(ref)} were expected")
    for i, (a, b) in enumerate(zip(vs, ref)):
        if not isinstance(a, Tensor) or tuple(a.shape) != tuple(b.shape):
            raise RuntimeError(f"{fn_name}: {what}[{i}] has shape {tuple(a.shape)}, expected {tuple(b.shape)}")
    return vs


def _call(func, inputs, fn_name):
    out = func(*inputs)
    single, outs = _as_tuple(out, "the output of func", fn_name)
    return single, outs


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: for a tensor input x and tensor output y, a tensor
    of shape y.shape + x.shape; tuples of inputs/outputs give (nested) tuples, as torch."""
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError(f"jacobian: strategy must be 'reverse-mode' or 'forward-mode', got {strategy!r}")
    in_single, inputs = _as_tuple(inputs, "inputs", "jacobian")
    with enable_grad():
        xs = _prep_inputs(inputs, create_graph)
        out_single, outs = _call(func, xs, "jacobian")
        result = []
        for o in outs:
            rows = []  # rows[k] = grads of output element k w.r.t. each input
            flat_n = o.numel()
            for k in range(flat_n):
                e = xp.zeros(flat_n, dtype=o.dtype)
                e[k] = 1
                rows.append(_grads([o], xs, [Tensor._make(e.reshape(o.shape))], create_graph, strict, "jacobian"))
            per_in = []
            for j, x in enumerate(xs):
                if flat_n == 0:
                    J = Tensor._make(xp.zeros(tuple(o.shape) + tuple(x.shape), dtype=x.dtype))
                else:
                    J = ops.reshape(ops.stack([r[j] for r in rows]), tuple(o.shape) + tuple(x.shape))
                per_in.append(_finish(J, create_graph))
            result.append(per_in[0] if in_single else tuple(per_in))
    return result[0] if out_single else tuple(result)


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a scalar ``func`` at ``inputs``: shape x.shape + x.shape for one input,
    a tuple of tuples (block (i, j) = d^2 f / dx_i dx_j) for several."""
    in_single, inputs = _as_tuple(inputs, "inputs", "hessian")

    def grad_fn(*xs):
        out = func(*xs)
        if not isinstance(out, Tensor) or out.numel() != 1:
            raise RuntimeError("hessian: the function given must return a single-element Tensor, got "
                               f"{'a Tensor of shape ' + str(tuple(out.shape)) if isinstance(out, Tensor) else type(out).__name__}")
        out = out.reshape(())
        g = _grads([out], xs, [None], True, strict, "hessian")
        return tuple(g)

    H = jacobian(grad_fn, inputs, create_graph=create_graph, strict=strict)
    if in_single:
        return H[0][0]
    return H


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J).  ``v`` may be omitted only when the output has one element."""
    in_single, inputs = _as_tuple(inputs, "inputs", "vjp")
    with enable_grad():
        xs = _prep_inputs(inputs, create_graph)
        out_single, outs = _call(func, xs, "vjp")
        vs = _v_or_ones(v, outs, "vjp", "the user-provided function returns")
        g = _grads(outs, xs, list(vs), create_graph, strict, "vjp")
    out = _finish(outs[0] if out_single else tuple(outs), create_graph)
    res = tuple(_finish(x, create_graph) for x in g)
    return out, (res[0] if in_single else res)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v), by the double-backward trick (two reverse passes)."""
    in_single, inputs = _as_tuple(inputs, "inputs", "jvp")
    vs = _v_or_ones(v, inputs, "jvp", "the input to the user-provided function is")
    with enable_grad():
        xs = _prep_inputs(inputs, create_graph)
        out_single, outs = _call(func, xs, "jvp")
        # w: a dummy cotangent; g(w) = w^T J is linear in w, and d<g(w), v>/dw = J v
        ws = [Tensor._make(xp.zeros(o.shape, dtype=o.dtype)).requires_grad_(True) for o in outs]
        total = _inner(_grads(outs, xs, ws, True, strict, "jvp"), vs)
        if total is None:
            res = [_zeros_like(o) for o in outs]
        else:
            res = _grads([total], ws, [None], create_graph, False, "jvp")
    out = _finish(outs[0] if out_single else tuple(outs), create_graph)
    res = tuple(_finish(x, create_graph) for x in res)
    return out, (res[0] if out_single else res)


def _vhp(func, inputs, v, create_graph, strict, fn_name):
    in_single, inputs = _as_tuple(inputs, "inputs", fn_name)
    vs = _v_or_ones(v, inputs, fn_name, "the input to the user-provided function is")
    with enable_grad():
        xs = _prep_inputs(inputs, create_graph)
        out_single, outs = _call(func, xs, fn_name)
        if len(outs) != 1 or outs[0].numel() != 1:
            raise RuntimeError(f"{fn_name}: the function given must return a single-element Tensor, got "
                               f"shape {tuple(outs[0].shape)}")
        out = outs[0]
        total = _inner(_grads([out.reshape(())], xs, [None], True, strict, fn_name), vs)
        if total is None:
            if strict:
                raise RuntimeError(f"{fn_name}: the gradient is independent of the inputs (zero Hessian); "
                                   "not allowed in strict mode")
            res = [_zeros_like(x) for x in xs]
        else:
            res = _grads([total], xs, [None], create_graph, strict, fn_name)
    res = tuple(_finish(x, create_graph) for x in res)
    return _finish(out, create_graph), (res[0] if in_single else res)


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H) for a scalar func."""
    return _vhp(func, inputs, v, create_graph, strict, "vhp")


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v) for a scalar func (equal to v^T H: H is symmetric)."""
    return _vhp(func, inputs, v, create_graph, strict, "hvp")

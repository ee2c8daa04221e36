"""The backward engine: reverse-mode accumulation over the recorded graph.

The graph is walked in a topological order found iteratively (an explicit
stack, never recursion), so chains of any length work.  Each node's incoming
cotangent is the sum of what its consumers sent it; leaves accumulate into
``.grad`` (or into the result of ``autograd.grad``).  Gradients are summed
back to each input's shape here, in one place, which is how broadcasting in a
forward op is undone.
"""
from __future__ import annotations

from varlens.autograd import grad_mode as _gm
from varlens.autograd.function import Function, _check_finite
from varlens.backend import sum_to, xp

Tensor = None  # bound by varlens.tensor


def _toposort(roots):
    """Nodes reachable from ``roots``, consumers before producers (iterative DFS)."""
    order, seen = [], set()
    stack = [(n, False) for n in roots]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for p in node.next:
            if p is not None and isinstance(p, Function) and id(p) not in seen:
                stack.append((p, False))
    order.reverse()
    return order


def _sum_to(g, shape):
    if isinstance(g, Tensor):
        from varlens.ops.dual import sum_to as dual_sum_to
        return dual_sum_to(g, shape)
    return sum_to(g, shape)


def run_backward(roots, root_grads, retain_graph=False, create_graph=False, capture=None):
    """Propagate ``root_grads`` from ``roots`` (Tensors) back to the leaves.

    ``capture``: None to accumulate into leaves' ``.grad``; else a dict mapping
    id(tensor or node) -> slot index, filled into the returned list (autograd.grad).
    """
    T = Tensor
    grads = {}
    results = {} if capture is not None else None
    root_nodes = []
    for t, g in zip(roots, root_grads):
        if t._node is None:  # backward on a leaf itself
            _deliver_leaf(t, g, None, results, capture, create_graph)
            continue
        key = id(t._node)
        grads[key] = grads[key] + g if key in grads else g
        root_nodes.append(t._node)
    anomaly = _gm._anomaly[0]
    with _gm.set_grad_enabled(create_graph):
        for node in _toposort(root_nodes):
            g = grads.pop(id(node), None)
            if g is None:
                continue
            if capture is not None and id(node) in capture:
                results[id(node)] = g
            if node.hooks:
                for h in node.hooks:
                    r = h(g if create_graph else T._make(g))
                    if r is not None:
                        g = r if create_graph else r._data
            if node.saved is None:
                raise RuntimeError(
                    f"Trying to backward through the graph a second time (at {type(node).__name__}): "
                    "its saved values were freed after the first backward. Pass retain_graph=True "
                    "to the first backward() if you need to call it again.")
            if node._vs is not None:
                node._check_versions()
            if create_graph:
                gin = node._backward_graph(g)
            else:
                gin = node.backward(g)
            if not isinstance(gin, tuple):
                gin = (gin,)
            if not retain_graph:
                node.saved = None
                node._args = None
            for p, gi in zip(node.next, gin):
                if p is None or gi is None:
                    continue
                if isinstance(p, Function):
                    shape, dtype = p._oshape, p._odtype
                else:
                    shape, dtype = p._data.shape, p._data.dtype
                if gi.shape != shape:
                    gi = _sum_to(gi, shape)
                if gi.dtype != dtype:
                    gi = gi.to(dtype) if create_graph else gi.astype(dtype)
                if anomaly:
                    _check_finite(gi._data if create_graph else gi, f"{type(node).__name__} (backward)")
                if isinstance(p, Function):
                    k = id(p)
                    grads[k] = grads[k] + gi if k in grads else gi
                else:
                    _deliver_leaf(p, gi, g, results, capture, create_graph)
    if capture is not None:
        return results
    return None


def _deliver_leaf(t, gi, g_in, results, capture, create_graph):
    T = Tensor
    if capture is not None:
        k = id(t)
        if k in capture:
            results[k] = results[k] + gi if k in results else gi
        return
    if t.hooks_:
        for h in t.hooks_:
            r = h(gi if create_graph else T._make(gi))
            if r is not None:
                gi = r if create_graph else r._data
    if create_graph:
        t.grad = gi if t.grad is None else t.grad + gi
        return
    if t.grad is None:
        if gi is g_in or not gi.flags.owndata:
            gi = gi.copy()  # never let two leaves (or a leaf and the graph) share a buffer
        t.grad = T._make(gi)
    else:
        t.grad._data = t.grad._data + gi


def _as_grad_array(t, g, what):
    """Check/convert a user-supplied output gradient."""
    if g is None:
        if t._data.size != 1:
            raise RuntimeError(
                f"{what}: grad can be implicitly created only for scalar outputs, but the output has "
                f"shape {tuple(t.shape)}; pass gradient= a tensor of that shape (e.g. ones_like(out)) "
                "or reduce the output first (out.sum())")
        return xp.ones_like(t._data)
    ga = g._data if isinstance(g, Tensor) else xp.asarray(g, dtype=t._data.dtype)
    if ga.shape != t._data.shape:
        raise RuntimeError(f"{what}: gradient has shape {tuple(ga.shape)} but the output has shape "
                           f"{tuple(t._data.shape)}; they must match")
    return ga


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate d(tensors)/d(leaf) into every leaf's ``.grad`` (torch.autograd.backward)."""
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    if grad_tensors is None or isinstance(grad_tensors, Tensor):
        grad_tensors = [grad_tensors] * len(tensors) if grad_tensors is None else [grad_tensors]
    if retain_graph is None:
        retain_graph = create_graph
    for t in tensors:
        if not t._rg:
            raise RuntimeError(
                "element 0 of tensors does not require grad and does not have a grad_fn: nothing in "
                "its history requires grad (did you forget requires_grad=True, or run under no_grad()?)")
    gs = [_as_grad_array(t, g, "backward") for t, g in zip(tensors, grad_tensors)]
    if create_graph:
        gs = [g if isinstance(g, Tensor) and g._rg else Tensor._make(a)
              for g, a in zip(grad_tensors, gs)]
    if inputs is not None:
        inputs = [inputs] if isinstance(inputs, Tensor) else list(inputs)
        res = grad(tensors, inputs, grad_tensors, retain_graph=retain_graph,
                   create_graph=create_graph, allow_unused=True)
        for t, r in zip(inputs, res):
            if r is not None:
                t.grad = r if t.grad is None else t.grad + r
        return
    run_backward(list(tensors), gs, retain_graph, create_graph)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=None, materialize_grads=False):
    """Return d(outputs)/d(inputs) without touching ``.grad`` (torch.autograd.grad).

    With ``create_graph=True`` the returned gradients are differentiable, so
    Hessian-vector products are ``grad(grad(f, x, create_graph=True)[0] @ v, x)``.
    """
    single = isinstance(outputs, Tensor)
    outputs = [outputs] if single else list(outputs)
    inputs_single = isinstance(inputs, Tensor)
    inputs = [inputs] if inputs_single else list(inputs)
    if grad_outputs is None or isinstance(grad_outputs, Tensor):
        grad_outputs = [grad_outputs] * len(outputs) if grad_outputs is None else [grad_outputs]
    if retain_graph is None:
        retain_graph = create_graph
    for i, t in enumerate(inputs):
        if not isinstance(t, Tensor):
            raise TypeError(f"grad: inputs[{i}] must be a Tensor, got {type(t).__name__}")
        if not t._rg:
            raise RuntimeError(f"grad: inputs[{i}] does not require grad; call requires_grad_() on it")
    for i, t in enumerate(outputs):
        if not t._rg:
            raise RuntimeError(f"grad: outputs[{i}] does not require grad and has no grad_fn")
    gs = [_as_grad_array(t, g, "grad") for t, g in zip(outputs, grad_outputs)]
    if create_graph:
        gs = [g if isinstance(g, Tensor) else Tensor._make(a) for g, a in zip(grad_outputs, gs)]
    capture = {}
    for t in inputs:
        capture[id(t._node) if t._node is not None else id(t)] = True
    results = run_backward(outputs, gs, retain_graph, create_graph, capture)
    out = []
    for i, t in enumerate(inputs):
        k = id(t._node) if t._node is not None else id(t)
        r = results.get(k)
        if r is None:
            if materialize_grads:
                out.append(Tensor._make(xp.zeros_like(t._data)))
                continue
            if not allow_unused:
                raise RuntimeError(
                    f"grad: inputs[{i}] was not used in computing the outputs; pass allow_unused=True "
                    "to get None for it")
            out.append(None)
            continue
        out.append(r if isinstance(r, Tensor) else Tensor._make(r))
    return tuple(out)

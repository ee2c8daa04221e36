"""The backward engine: reverse-mode accumulation over the recorded graph.

The graph is walked in a topological order found iteratively (an explicit
stack, never recursion), so chains of any length work.  Each node's incoming
cotangent is the sum of what its consumers sent it; leaves accumulate into
``.grad`` (or into the result of ``autograd.grad``).  Gradients are summed
back to each input's shape here, in one place, which is how broadcasting in a
forward op is undone.
"""
from __future__ import annotations

from sys import getrefcount as _refcount

from varlens.core import grad_mode as _gm
from varlens.core.anomaly import check_backward as _check_backward
from varlens.core.function import Function
from varlens.core.array import _NS, namespace, ones_cached, sum_to, xp
from varlens.core.primitives import Clone
from varlens.core.primitives import sum_to as _sum_to_graph
from varlens.core.tensor import Tensor

ndarray = xp.ndarray


def _toposort(roots):
    """Nodes reachable from ``roots``, consumers before producers.

    An iterative depth-first post-order (an explicit stack of edge iterators,
    never recursion), so graphs of any depth work; each node is visited once.
    """
    F = Function
    order = []
    seen = set()
    add = seen.add
    for r in roots:
        if r in seen:
            continue
        add(r)
        stack = [(r, iter(r.next))]
        while stack:
            node, it = stack[-1]
            for p in it:
                if p is not None and isinstance(p, F) and p not in seen:
                    add(p)
                    stack.append((p, iter(p.next)))
                    break
            else:
                stack.pop()
                order.append(node)
    order.reverse()
    return order


def _needed(order, capture):
    """The nodes of ``order`` (consumers first) with a wanted input (a key of ``capture``) among
    their producers, as PyTorch's autograd.grad executes only those: the backward of anything
    beyond the inputs is neither run nor freed (an input made from an earlier, already
    differentiated graph, as an inner loop's ``p - lr * g``, must not be backpropagated into)."""
    F = Function
    need = set()
    for node in reversed(order):
        for p in node.next:
            if p is not None and (id(p) in capture or (p in need if isinstance(p, F) else False)):
                need.add(node)
                break
    return need


def _sum_to(g, shape):
    if isinstance(g, Tensor):
        return _sum_to_graph(g, shape)
    return sum_to(g, shape)


def run_backward(roots, root_grads, retain_graph=False, create_graph=False, capture=None):
    """Propagate ``root_grads`` from ``roots`` (Tensors) back to the leaves.

    ``capture``: None to accumulate into leaves' ``.grad``; else a dict whose keys
    are id(leaf tensor) or id(node) of the wanted inputs; their gradients are
    returned in a dict with the same keys (autograd.grad).
    """
    T = Tensor
    F = Function
    grads = {}  # node -> incoming cotangent (summed over its consumers)
    results = {} if capture is not None else None
    root_nodes = []
    for t, g in zip(roots, root_grads):
        node = t._node
        if node is None:  # backward on a leaf itself
            _deliver_leaf(t, g, True, results, capture, create_graph)
            continue
        if node in grads:
            grads[node] = grads[node] + g
        else:
            grads[node] = g
            root_nodes.append(node)
    if not root_nodes:
        return results
    anomaly = _gm._anomaly[0]
    if capture is None and not create_graph and not anomaly:
        _run_arrays(_toposort(root_nodes), grads, retain_graph)
        return results
    sent = set()  # ids of arrays already handed on: a leaf must not share one (see _deliver_leaf)
    owned = set()  # ids of accumulated sums the engine created itself (safe to add into in place)
    enabled = _gm._enabled
    prev = enabled[0]
    enabled[0] = create_graph
    order = _toposort(root_nodes)
    need = _needed(order, capture) if capture is not None else None
    try:
        for node in order:
            g = grads.pop(node, None)
            if g is None:
                continue
            owned.discard(id(g))  # ids in `owned` always name live sums still in `grads`
            if capture is not None and id(node) in capture:
                results[id(node)] = g
            if need is not None and node not in need:
                continue   # autograd.grad runs only the nodes between the outputs and the inputs
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
            gin = (node.backward(g) if not create_graph else _composite_backward(node, g)
                   if _uses_composite(node) else node._backward_graph(g))
            if type(gin) is not tuple:
                gin = (gin,)
            if not retain_graph:
                node.saved = None
                node._args = None
            sent.add(id(g))
            for p, gi in zip(node.next, gin):
                if p is None or gi is None:
                    continue
                if isinstance(p, F):
                    if gi.shape != p._oshape:
                        gi = _sum_to(gi, p._oshape)
                    if gi.dtype != p._odtype:
                        gi = gi.to(p._odtype) if create_graph else gi.astype(p._odtype)
                    if anomaly:
                        _check_backward(gi, node)
                    if p in grads:
                        cur = grads[p]
                        if id(cur) in owned:
                            cur += gi  # a sum this loop made: nobody else holds it
                        else:
                            cur = grads[p] = cur + gi
                            if cur.__class__ is ndarray:  # (NumPy scalars cannot add in place)
                                owned.add(id(cur))
                    else:
                        grads[p] = gi
                        sent.add(id(gi))
                else:
                    d = p._data
                    if gi.shape != d.shape:
                        gi = _sum_to(gi, d.shape)
                    if gi.dtype != d.dtype:
                        gi = gi.to(d.dtype) if create_graph else gi.astype(d.dtype)
                    if anomaly:
                        _check_backward(gi, node)
                    k = id(gi)
                    shared = k in sent
                    if not shared and len(gin) > 1:  # the same array returned for two inputs?
                        n = 0
                        for x in gin:
                            if x is gi:
                                n += 1
                        shared = n > 1
                    _deliver_leaf(p, gi, shared, results, capture, create_graph)
                    sent.add(k)
    finally:
        enabled[0] = prev
    return results


def _run_arrays(order, grads, retain_graph):
    """run_backward's loop for the common case, first-order ``.backward()`` on arrays (no
    create_graph, no autograd.grad capture, no anomaly mode): the same steps with the
    leaf delivery and version checks written inline, since this loop is most of the
    framework's own cost in a small model's training step."""
    F = Function
    nd = ndarray
    T = Tensor
    # A leaf keeps the array it is handed unless that array is also held elsewhere.  Only
    # ids of arrays known to be alive are tracked (an id of a freed array can be reused by
    # a new one, which would force needless copies): arrays waiting in `grads`, and arrays
    # handed to a leaf without a copy (the leaf keeps them alive).
    waiting = set()
    given = set()
    owned = set()  # ids of sums this loop created itself (safe to add into in place)
    # Gradients of basic slices (a node with ``slice_key``: x[2:5], the pieces of split/chunk/
    # unbind) wait here, per input, and are written into ONE buffer of the input's shape when
    # that input's turn comes (nodes) or at the end (leaves), instead of each slice's backward
    # making a zero array of the full shape for the engine to add up.
    slices = {}       # node -> [(key, g), ...]
    leaf_slices = {}  # id(leaf) -> (leaf, [(key, g), ...])
    enabled = _gm._enabled
    prev = enabled[0]
    enabled[0] = False
    try:
        for node in order:
            g = grads.pop(node, None)
            if slices:
                pend = slices.pop(node, None)
                if pend is not None:
                    for _k, s in pend:
                        waiting.discard(id(s))
                    g = _slice_sum(pend, g, node._oshape, node._odtype, g is not None and id(g) in owned)
            if g is None:
                continue
            kg = id(g)
            waiting.discard(kg)
            if owned:
                owned.discard(kg)
            if node.hooks:
                for h in node.hooks:
                    r = h(T._make(g))
                    if r is not None:
                        g = r._data
            if node.saved is None:
                raise RuntimeError(
                    f"Trying to backward through the graph a second time (at {type(node).__name__}): "
                    "its saved values were freed after the first backward. Pass retain_graph=True "
                    "to the first backward() if you need to call it again.")
            vs = node._vs
            if vs is not None:
                for ver, v in vs:
                    if ver[0] != v:
                        node._check_versions()
            sk = node.slice_key
            if sk is not None:
                p = node.next[0]
                if isinstance(p, F):
                    if g.__class__ in _NS:
                        if not retain_graph:
                            node.saved = None
                        lst = slices.get(p)
                        if lst is None:
                            slices[p] = [(sk, g)]
                        else:
                            lst.append((sk, g))
                        waiting.add(kg)  # held until written: a leaf must not take it without a copy
                        continue
                elif p is not None and p.hooks_ is None and g.__class__ is p._data.__class__:
                    if not retain_graph:
                        node.saved = None
                    ent = leaf_slices.get(id(p))
                    if ent is None:
                        leaf_slices[id(p)] = (p, [(sk, g)])
                    else:
                        ent[1].append((sk, g))
                    continue
            gin = node.backward(g)
            if not retain_graph:
                node.saved = None
                node._args = None
            if type(gin) is not tuple:
                gin = (gin,)
            multi = len(gin) > 1
            for p, gi in zip(node.next, gin):
                if p is None or gi is None:
                    continue
                if isinstance(p, F):
                    if gi.shape != p._oshape:
                        gi = sum_to(gi, p._oshape)
                    if gi.dtype != p._odtype:
                        gi = gi.astype(p._odtype)
                    cur = grads.get(p)
                    if cur is None:
                        grads[p] = gi
                        waiting.add(id(gi))
                    elif id(cur) in owned:
                        cur += gi  # a sum this loop made: nobody else holds it
                    else:
                        cur = grads[p] = cur + gi
                        if cur.__class__ is nd:  # (NumPy scalars cannot add in place)
                            owned.add(id(cur))
                            waiting.add(id(cur))
                    continue
                d = p._data
                if gi.shape != d.shape:
                    gi = sum_to(gi, d.shape)
                if gi.dtype != d.dtype:
                    gi = gi.astype(d.dtype)
                k = id(gi)
                shared = gi is g or k in waiting or k in given
                if multi and not shared:  # the same array returned for two inputs?
                    n = 0
                    for x in gin:
                        if x is gi:
                            n += 1
                    shared = n > 1
                if p.hooks_ is not None:  # (an empty list: post-accumulate hooks only)
                    _deliver_leaf(p, gi, shared, None, None, False)
                    given.add(k)
                    continue
                gr = p.grad
                if gr is None:
                    if gi.__class__ is not nd and gi.__class__ not in _NS:
                        gi = xp.asarray(gi)  # a NumPy scalar from 0-d math: give the leaf a real array
                    elif shared or not (gi.flags.owndata or _sole_view(gi)):
                        gi = gi.copy()  # never let two leaves (or a leaf and the graph) share a buffer
                    else:
                        given.add(k)
                    p.grad = T._make(gi)
                else:
                    old = gr._data
                    if getattr(old.flags, "writeable", True) and old.shape == gi.shape and not gr._rg:
                        old += gi
                    else:
                        gr._data = old + gi
        for p, pend in leaf_slices.values():
            d = p._data
            gr = p.grad
            if gr is None:
                p.grad = T._make(_slice_sum(pend, None, d.shape, d.dtype, True))
                continue
            old = gr._data
            if getattr(old.flags, "writeable", True) and old.shape == d.shape and not gr._rg:
                for key, s in pend:
                    old[key] += s
            else:
                gr._data = old + _slice_sum(pend, None, d.shape, d.dtype, True)
    finally:
        enabled[0] = prev


def _base_refs(a):
    b = a.base
    return _refcount(b)


# references to the base of a view that nothing else holds, as _base_refs counts them in this
# interpreter (a.base, the local name, getrefcount's argument: 3 in CPython 3.11)
_SOLE_BASE_REFS = _base_refs(xp.empty(2).reshape(1, 2))


def _sole_view(a):
    """True when ``a`` views the whole of an array that nothing else refers to (a backward's
    fresh result reshaped): a leaf may keep it as safely as an array owning its data."""
    b = a.base
    if b.__class__ is not ndarray or b.base is not None or b.size != a.size:
        return False
    del b   # (not counted)
    return _base_refs(a) == _SOLE_BASE_REFS


def _slice_sum(pend, g, shape, dtype, own):
    """The gradient of an array of ``shape`` whose basic slices were read: ``g`` (the rest of its
    gradient, or None) plus each waiting slice gradient ``s`` added at its ``key`` (dL/dx of
    x[key] is g at key and zero elsewhere; several reads add up).  ``own``: g is the engine's
    own sum and may be written in place.  Slices of one axis that do not overlap are copied in
    (no zero fill where they cover the whole axis: split's pieces), others accumulate."""
    if g is not None:
        if g.__class__ not in _NS:   # a NumPy scalar (0-d math): an array to write into
            g, own = namespace(pend[0][1]).asarray(g, dtype=dtype), True
        buf = g if own else g.copy()
        for key, s in pend:
            buf[key] += s
        return buf
    xpn = namespace(pend[0][1])
    cover = _tiling(pend, shape)
    if cover is None:
        buf = xpn.zeros(shape, dtype)
        for key, s in pend:
            buf[key] += s
        return buf
    buf = xpn.empty(shape, dtype) if cover else xpn.zeros(shape, dtype)
    for key, s in pend:
        buf[key] = s
    return buf


def _tiling(pend, shape):
    """For slice keys that are all ``(:, ..., :, a:b)`` on the same axis with step 1: True when
    the ranges tile that axis exactly, False when they only do not overlap; None otherwise
    (overlapping, or any other kind of key)."""
    axis = None
    spans = []
    for key, _s in pend:
        if key.__class__ is not tuple or len(key) > len(shape):
            return None
        ax = None
        for i, k in enumerate(key):
            if k.__class__ is int:   # one position (unbind's pieces)
                if ax is not None or not -shape[i] <= k < shape[i]:
                    return None
                ax = i
                continue
            if k.__class__ is not slice:
                return None
            if k.start is None and k.stop is None and k.step is None:
                continue
            if ax is not None:
                return None
            ax = i
        if ax is None or (axis is not None and ax != axis):
            return None
        axis = ax
        k = key[ax]
        if k.__class__ is int:
            a = k % shape[ax]
            b = a + 1
        else:
            a, b, st = k.indices(shape[ax])
            if st != 1:
                return None
        spans.append((a, b))
    spans.sort()
    end = 0
    for a, b in spans:
        if a < end:
            return None
        if b < a:
            return None
        end = b
    covered = spans[0][0] == 0 and spans[-1][1] == shape[axis]
    if covered:
        for (a0, b0), (a1, _b1) in zip(spans, spans[1:]):
            if a1 != b0:
                return False
    return covered


def _deliver_leaf(t, gi, shared, results, capture, create_graph):
    """Add ``gi`` into leaf ``t``'s gradient.  ``shared``: the array may also be held
    elsewhere (the incoming cotangent, another input's gradient), so it is copied
    before the leaf keeps it; the leaf's own buffer is then accumulated in place."""
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
                shared = True
    if create_graph:
        t.grad = gi if t.grad is None else t.grad + gi
    elif t.grad is None:
        if gi.__class__ is not ndarray and gi.__class__ not in _NS:
            gi = xp.asarray(gi)  # a NumPy scalar from 0-d math: give the leaf a real array
        elif shared or not gi.flags.owndata:
            gi = gi.copy()  # never let two leaves (or a leaf and the graph) share a buffer
        t.grad = T._make(gi)
    else:
        old = t.grad._data
        if getattr(old.flags, "writeable", True) and old.shape == gi.shape and not t.grad._rg:
            old += gi  # the engine owns this buffer: accumulate without a new allocation
        else:
            t.grad._data = old + gi
    post = t.__dict__.get("_post_accumulate_grad_hooks")
    if post:  # Tensor.register_post_accumulate_grad_hook: called with the leaf after each delivery
        for h in post:
            h(t)


def _uses_composite(node):
    """True for a fused op whose backward is array code only (differentiable_backward = False):
    its second derivative comes from differentiating its ``composite``."""
    t = type(node)
    return not t.differentiable_backward and t._backward_graph is Function._backward_graph


def _composite_backward(node, g):
    """create_graph=True through a fused op: rebuild the op from differentiable ops (its
    ``composite``) on graph Tensors and take the gradient of that, so the result is itself
    differentiable.  The derivative is the op's own; only the route is the composite's."""
    comp = getattr(node, "composite", None)
    if comp is None:
        raise NotImplementedError(
            f"{type(node).__name__}: second derivatives are not implemented for this op")
    ins = [node._input_tensor(i, a) for i, a in enumerate(node._args)]
    # each graph input enters the composite through its own copy node, so the gradient
    # taken there is the partial derivative for that argument only (an input computed
    # from another input, lstsq(a, 2 * a) say, would otherwise collect both paths)
    alias = {}
    for i, p in enumerate(node.next):
        if p is not None:
            if id(p) not in alias:
                alias[id(p)] = Clone.apply(ins[i])
            ins[i] = alias[id(p)]
    # one target per distinct graph position: the same tensor passed twice (an LSTM's
    # h0 and c0, say) gets its total gradient once, not once per occurrence
    keys = [(id(p) if p is not None else None) for p in node.next]
    targets, first = [], {}
    for t, k in zip(ins, keys):
        if k is not None and k not in first:
            first[k] = len(targets)
            targets.append(t)
    out = comp(*ins, **node._kw)
    gs = grad([out], targets, [g], create_graph=True, allow_unused=True)
    res, done = [], set()
    for k in keys:
        res.append(gs[first[k]] if k is not None and k not in done else None)
        if k is not None:
            done.add(k)
    return tuple(res)


def _as_grad_array(t, g, what):
    """Check/convert a user-supplied output gradient."""
    if g is None:
        if t._data.size != 1:
            raise RuntimeError(
                f"{what}: grad can be implicitly created only for scalar outputs, but the output has "
                f"shape {tuple(t.shape)}; pass gradient= a tensor of that shape (e.g. ones_like(out)) "
                "or reduce the output first (out.sum())")
        # cached read-only: a backward never writes into its incoming gradient (it may be
        # shared), so one array serves every call, and one that tried would fail loudly
        if t._data.__class__ is not ndarray:   # on a device: ones made there
            return namespace(t._data).ones(t._data.shape, t._data.dtype)
        return ones_cached(t._data.shape, t._data.dtype)
    ga = g._data if isinstance(g, Tensor) else xp.asarray(g, dtype=t._data.dtype)
    namespace(ga, t._data)   # raises when the gradient and the output are on two devices
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
        _run_callbacks()
        return
    try:
        run_backward(list(tensors), gs, retain_graph, create_graph)
    except BaseException:
        _callbacks.clear()
        raise
    _run_callbacks()


# Callbacks run once when the current ``backward()`` has finished (torch's
# Variable._execution_engine.queue_callback); DistributedDataParallel waits for its gradient
# allreduces here.  A failed backward drops them.
_callbacks = []


def queue_callback(fn):
    """Call ``fn()`` when the backward that is running now finishes."""
    _callbacks.append(fn)


def _run_callbacks():
    while _callbacks:
        _callbacks.pop(0)()


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """Return d(outputs)/d(inputs) without touching ``.grad`` (torch.autograd.grad).

    With ``create_graph=True`` the returned gradients are differentiable, so
    Hessian-vector products are ``grad(grad(f, x, create_graph=True)[0] @ v, x)``.
    """
    if is_grads_batched:
        raise NotImplementedError("grad: is_grads_batched=True is not supported (call grad once per vector)")
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
                out.append(Tensor._make(namespace(t._data).zeros_like(t._data)))
                continue
            if not allow_unused:
                raise RuntimeError(
                    f"grad: inputs[{i}] was not used in computing the outputs; pass allow_unused=True "
                    "to get None for it")
            out.append(None)
            continue
        out.append(r if isinstance(r, Tensor) else Tensor._make(r))
    return tuple(out)

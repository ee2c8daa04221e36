"""Function: one differentiable op, forward and backward side by side.

A subclass writes

* ``forward(self, *arrays, **params) -> array``: plain array math through the
  backend; ``self`` is the node that will sit on the tape, so forward stores
  what backward needs with ``self.save_for_backward(...)`` or as attributes.
* ``backward(self, grad) -> grad or tuple of grads``: one cotangent per
  positional input (``None`` where an input needs none).  Broadcasting is NOT
  undone here: the engine sums every gradient back to its input's shape in one
  place (``backend.sum_to``).

Backward is written once for two modes.  For first-order training it receives
arrays and does plain array math (no Tensor objects, nothing recorded).  With
``create_graph=True`` the engine calls the same code with Tensors (the grad and
``self.saved``), so the backward itself is recorded and can be differentiated
again.  For that to be right, a backward must use operators and the helpers in
``varlens.core.primitives`` (which dispatch on arrays or Tensors), and may save only
its inputs and its output with ``save_for_backward``; other cached values
(masks, indices, shapes) are stored as attributes and are constants.

A fused op that caches intermediates (batch norm's mean and rstd, say) sets
``differentiable_backward = False`` and provides ``composite(*tensors, **params)``,
the same function built from small ops; second derivatives then go through it.

Every op has a single output tensor.  Ops with several results (split, max with
indices) are built from several single-output ops.
"""
from __future__ import annotations

import math

from varlens.core import graph_nodes as _graph_nodes
from varlens.core.anomaly import forward_site as _forward_site
from varlens.core import grad_mode as _gm
from varlens.core.array import _NS
from varlens.core.array import namespace as _namespace
from varlens.core.array import xp as _np
from varlens.core.tensor import Tensor

_enabled = _gm._enabled
_new = object.__new__
_ndarray = _np.ndarray


def _asarray(x):
    """An array as it is (host or device); anything else (a NumPy scalar, a list) as a host array."""
    return x if x.__class__ in _NS else _np.asarray(x)

_anomaly = _gm._anomaly

# The one observation slot of the core: None, or a callable ``op_hook(cls, args, kwargs, result)``
# called after every Function.apply with the Function class, its positional arguments (Tensors or
# arrays, as passed), its keyword parameters and the output Tensor.  The variance lens
# (varlens.lens.probes) sets it while it records a forward pass and puts None back afterwards;
# with None the cost is one global read per apply.  Nothing else in the core reads or sets it.
op_hook = None


class Function:
    differentiable = True           # False: the output never requires grad (argmax, comparisons)
    differentiable_backward = True  # False: double backward goes through composite()
    output_saved_by_torch = True    # False: PyTorch's op keeps no copy of its output (SiLU), so
                                    # changing the output in place must not make backward refuse
    cross_saved = False             # True: saved inputs 0 and 1 are read only for each other's
                                    # gradient (a * b): one is version-checked only when the
                                    # other needs a gradient, as PyTorch saves it only then
    hooks = None                    # gradient hooks on this node's output (Tensor.register_hook)
    _vs = None                      # [(version counter, version at forward)] of saved arrays
    _args = None                    # forward arrays/params, kept only for composite()
    _kw = None
    saved = ()                      # what backward reads (save_for_backward); None once freed
    slice_key = None                # a basic index (ints, slices): this node reads input[slice_key]
                                    # and its backward is "zeros with g written there" (GetItem),
                                    # which the engine does by writing g into one shared buffer
    xp = _np                        # the array library of the inputs: NumPy, or the device's
                                    # (set by apply when an input lives on "cuda"); forward and
                                    # backward compute with ``self.xp``

    def save_for_backward(self, *values):
        self.saved = values

    @property
    def saved_tensors(self):
        return self.saved

    @property
    def needs_input_grad(self):
        return tuple(p is not None for p in self.next)

    @property
    def next_functions(self):
        """PyTorch's ((node, index), ...) pairs: a leaf shows as its AccumulateGrad node
        (``.variable`` is the leaf), an input without grad as (None, 0) (core/graph_nodes.py)."""
        nt = getattr(self, "_nontensor", ())
        return _graph_nodes.next_function_pairs([n for i, n in enumerate(self.next) if i not in nt])

    def name(self) -> str:
        """PyTorch's name of this node (``AddmmBackward0``), as torch's ``grad_fn.name()``."""
        return _graph_nodes.node_name(self)

    def __repr__(self):
        return f"<{_graph_nodes.node_name(self)} object at {hex(id(self))}>"

    def forward(self, *args, **kwargs):  # pragma: no cover - abstract
        raise NotImplementedError

    def backward(self, grad):  # pragma: no cover - abstract
        raise NotImplementedError(f"{type(self).__name__} has no backward")

    # ------------------------------------------------------------------ PyTorch-style subclasses
    # A subclass written for torch.autograd.Function (``@staticmethod forward(ctx, *tensors)``
    # and ``@staticmethod backward(ctx, *grads)``, Tensors in and out) works too: forward runs
    # on the Tensors under no_grad, backward gets and returns Tensors (recorded when
    # create_graph=True, so second derivatives work when backward is built from varlens ops).
    _ctx_style = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        import inspect
        fwd = inspect.getattr_static(cls, "forward", None)
        if isinstance(fwd, staticmethod) and "forward" in cls.__dict__:
            bwd = inspect.getattr_static(cls, "backward", None)
            if not isinstance(bwd, staticmethod):
                raise TypeError(f"{cls.__name__}: a Function with a @staticmethod forward(ctx, ...) "
                                "needs a @staticmethod backward(ctx, *grads) as well")
            cls._ctx_style = True
            cls._user_forward = fwd
            cls._user_backward = bwd
            cls.backward = Function._ctx_backward
            cls._backward_graph = Function._ctx_backward

    def mark_non_differentiable(self, *tensors):
        """Outputs that get no gradient (PyTorch's ctx method): they come back not requiring grad,
        and backward receives zeros for them."""
        self.__dict__.setdefault("_nondiff", set()).update(id(t) for t in tensors)

    def mark_dirty(self, *tensors):
        """Accepted for PyTorch compatibility."""

    def set_materialize_grads(self, value):
        """Accepted for PyTorch compatibility (gradients reaching backward are always arrays)."""

    @classmethod
    def _apply_ctx(cls, args, kwargs):
        T = Tensor
        ctx = _new(cls)
        nxt = []
        need = False
        for a in args:
            if isinstance(a, T) and a._rg:
                need = True
                nxt.append(a._node or a)
            else:
                nxt.append(None)
        ctx.next = nxt
        prev = _enabled[0]
        _enabled[0] = False
        try:
            out = cls._user_forward(ctx, *args, **kwargs)
        finally:
            _enabled[0] = prev
        if isinstance(out, (tuple, list)):
            return ctx._multi_outputs(list(out), need and prev)
        data = out._data if isinstance(out, T) else _asarray(out)
        if need and prev:
            ctx._oshape = data.shape
            ctx._odtype = data.dtype
            # saved copies of the output: under create_graph they stand for the recorded output
            ctx._src = [i for i, t in enumerate(ctx.saved) if isinstance(t, T) and t._data is data]
            return T._make(data, ctx)
        return out if isinstance(out, T) else T._make(data)

    def _multi_outputs(self, outs, record):
        """Several outputs from a PyTorch-style forward.  varlens nodes have one output, so the
        differentiable outputs (floating point, not marked non-differentiable) are packed, flat,
        into this node's one output and handed back as reshaped slices of it (slicing is
        differentiable); backward splits the packed gradient again (see _ctx_backward)."""
        T = Tensor
        datas = [o._data if isinstance(o, T) else _asarray(o) for o in outs]
        xp = _namespace(*datas)
        nondiff = self.__dict__.get("_nondiff", ())
        diff = [i for i, (o, d) in enumerate(zip(outs, datas))
                if d.dtype.kind in "fc" and id(o) not in nondiff]
        if not record or not diff:
            return tuple(o if isinstance(o, T) else T._make(d) for o, d in zip(outs, datas))
        dt = _np.result_type(*[datas[i].dtype for i in diff])
        packed = xp.concatenate([datas[i].reshape(-1).astype(dt) for i in diff])
        layout, off = [], 0
        for i in range(len(outs)):
            d = datas[i]
            layout.append((i in diff, off, d.shape, d.dtype))
            if i in diff:
                off += d.size
        self._multi = layout
        self._oshape, self._odtype, self._src = packed.shape, packed.dtype, []
        node_out = T._make(packed, self)
        res = []
        for (is_diff, o, shape, odt), d in zip(layout, datas):
            if not is_diff:
                res.append(T._make(d))
                continue
            piece = node_out[o:o + d.size].reshape(shape)
            res.append(piece if odt == dt else piece.to(odt))
        return tuple(res)

    def _ctx_backward(self, g):
        """Backward of a PyTorch-style subclass: the user's backward on Tensors, its results
        turned back into what the engine passes on (arrays, or Tensors under create_graph).
        With several outputs the packed gradient is split back into one per output (zeros for
        the non-differentiable ones, as PyTorch materialises them)."""
        T = Tensor
        arrays = g.__class__ is _ndarray or not isinstance(g, T)
        saved = self.saved
        if not arrays and saved and self._src:
            conv = list(saved)
            for i in self._src:
                conv[i] = T._make(saved[i]._data, self)  # the output, wired to this node
            self.saved = tuple(conv)
        layout = self.__dict__.get("_multi")
        if layout is None:
            grads = (T._make(_asarray(g)) if arrays else g,)
        else:
            gt = T._make(_asarray(g)) if arrays else g
            grads = tuple((gt[o:o + math.prod(shape)].reshape(shape) if is_diff
                           else T._make(_namespace(gt._data).zeros(shape, odt if odt.kind in "fc" else self._odtype)))
                          for is_diff, o, shape, odt in layout)
        try:
            res = type(self)._user_backward(self, *grads)
        finally:
            self.saved = saved
        if not isinstance(res, tuple):
            res = (res,)
        n = len(self.next)
        if len(res) < n or any(r is not None for r in res[n:]):
            raise RuntimeError(f"{type(self).__name__}.backward returned {len(res)} gradients but forward "
                               f"took {n} inputs; return one per input (None where there is none)")
        out = []
        for r, p in zip(res[:n], self.next):
            if r is None or p is None:
                out.append(None)
            elif arrays:
                out.append(r._data if isinstance(r, T) else _asarray(r))
            else:
                out.append(r if isinstance(r, T) else T._make(_asarray(r)))
        return tuple(out)

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run forward on the inputs' arrays and, if any input needs grad, record a node."""
        if cls._ctx_style:
            return cls._apply_ctx(args, kwargs)
        T = Tensor
        ctx = _new(cls)
        datas = []
        dev = False  # an input array that is not a NumPy ndarray (a device array, or a scalar)
        plain = not _enabled[0] and op_hook is None and not _anomaly[0]
        if plain:
            # no_grad (inference, sampling): nothing is recorded, so no edges, no node, no
            # version bookkeeping; only the arrays and their device are read
            for a in args:
                if a.__class__ is T or isinstance(a, T):
                    a = a._data
                    if a.__class__ is not _ndarray:
                        dev = True
                elif a.__class__ is not _ndarray and a.__class__ in _NS:
                    dev = True
                datas.append(a)
        else:
            nxt = []
            need = False
            nt = None   # positions of non-Tensor arguments (left out of next_functions, as PyTorch)
            for a in args:  # one plain loop: measurably cheaper than two comprehensions
                if isinstance(a, T):
                    d = a._data
                    datas.append(d)
                    if d.__class__ is not _ndarray:
                        dev = True
                    if a._rg:
                        need = True
                        nxt.append(a._node or a)
                    else:
                        nxt.append(None)
                else:
                    if nt is None:
                        nt = []
                    nt.append(len(nxt))
                    datas.append(a)
                    nxt.append(None)
                    if a.__class__ in _NS and a.__class__ is not _ndarray:
                        dev = True
        if dev:
            xp = _namespace(*datas)   # raises for inputs on two devices
            if xp is not _np:
                ctx.xp = xp
        try:
            out = ctx.forward(*datas, **kwargs)
        except ValueError as e:
            err = _shape_error(cls, datas, e)
            if err is None:
                raise
            raise err from None
        raw = out
        if out.__class__ is not _ndarray and out.__class__ not in _NS:
            out = _asarray(out)  # NumPy returns scalars from full reductions; keep 0-d arrays
        res = _new(T)   # Tensor._make, inlined: one call less on every op
        res._data = out
        res.grad = None
        res._version = [0]
        res.hooks_ = None
        if plain:
            res._node = None
            res._rg = False
            return res
        if need and _enabled[0] and cls.differentiable:
            ctx.next = nxt
            if nt is not None:
                ctx._nontensor = nt
            ctx._oshape = out.shape
            ctx._odtype = out.dtype
            res._node = ctx
            res._rg = True
            saved = ctx.saved
            if saved:
                ctx._track(args, raw, res, saved)
            if not cls.differentiable_backward:
                ctx._args = datas
                ctx._kw = kwargs
        else:
            res._node = None
            res._rg = False
        if _anomaly[0] and need:   # note where the op ran; backward reports it if it returns NaN
            ctx._anomaly_site = _forward_site(cls.__name__)
        if op_hook is not None:
            op_hook(cls, args, kwargs, res)
        return res

    def _track(self, args, out, res, saved):
        """For each saved value note where it came from (the output, input i, or neither),
        which create_graph needs to rewire it, and remember the version of every tensor
        whose array backward will read, so an in-place change made after this point is
        caught instead of silently corrupting the gradient."""
        if len(saved) == 1 and saved[0] is out:  # fast path: the output alone (exp, tanh, ...)
            self._src = (-1,)
            self._vs = ((res._version, 0),)
            return
        if len(saved) == 2 and len(args) >= 2:  # fast path: the first two inputs (linear, mul, ...)
            a0, a1 = args[0], args[1]
            s0, s1 = saved
            T = Tensor
            if a0.__class__ is T or isinstance(a0, T):
                if a0._data is s0 and (a1.__class__ is T or isinstance(a1, T)) and a1._data is s1:
                    self._src = (0, 1)
                    v0, v1 = a0._version, a1._version
                    if self.cross_saved:   # (a * b: a is read only for b's gradient, and back)
                        n = self.next
                        self._vs = (((v0, v0[0]),) if n[1] is not None else ()) + \
                                   (((v1, v1[0]),) if n[0] is not None else ())
                    else:
                        self._vs = ((v0, v0[0]), (v1, v1[0]))
                    return
        T = Tensor
        src = []
        vs = []
        for s in saved:
            if s is out:
                src.append(-1)
                if self.output_saved_by_torch:
                    vs.append((res._version, 0))
                continue
            i = 0
            for a in args:
                if a is s or (isinstance(a, T) and a._data is s):
                    src.append(i)
                    if a is not s and not (self.cross_saved and i < 2 and self.next[1 - i] is None):
                        vs.append((a._version, a._version[0]))
                    break
                i += 1
            else:
                src.append(None)
        self._src = src
        if vs:
            self._vs = vs

    # ------------------------------------------------------------------ engine side
    def _input_tensor(self, i, value):
        """The i-th input as a Tensor wired to the graph (for create_graph)."""
        p = self.next[i]
        T = Tensor
        if p is None:
            return T._make(value) if hasattr(value, "shape") else value
        if isinstance(p, T):
            return p
        return T._make(value, p)

    def _check_versions(self):
        for ver, v in self._vs:
            if ver[0] != v:
                raise RuntimeError(
                    f"one of the tensors needed for the gradient of {type(self).__name__} was "
                    f"modified by an in-place operation after it was used (its version went from "
                    f"{v} to {ver[0]}); clone() it before changing it in place")

    def _backward_graph(self, g):
        """Backward with Tensors so the result is itself differentiable (create_graph=True): the
        saved arrays are re-wired as graph Tensors and backward runs on them.  A fused op whose
        backward is not written in differentiable ops (differentiable_backward = False) is
        differentiated through its ``composite`` instead, by the engine
        (varlens/core/engine.py, _composite_backward)."""
        T = Tensor
        saved = self.saved
        if saved:
            conv = []
            for s, k in zip(saved, self._src):
                if k == -1:
                    conv.append(T._make(s, self))         # the output, wired to this node
                elif k is not None:
                    conv.append(self._input_tensor(k, s))  # an input, wired to its producer
                elif hasattr(s, "shape"):
                    conv.append(T._make(s))                # anything else is a constant
                else:
                    conv.append(s)
            self.saved = tuple(conv)
            try:
                return self.backward(g)
            finally:
                self.saved = saved
        return self.backward(g)


def _shape_error(cls, datas, err):
    """Turn NumPy's broadcasting ValueError into one that names the op and the shapes."""
    msg = str(err)
    shapes = [tuple(d.shape) for d in datas if hasattr(d, "shape")]
    if "broadcast" in msg and len(shapes) >= 2:
        shown = " and ".join(str(s) for s in shapes)
        return RuntimeError(f"{cls.__name__.lower()}: shapes {shown} cannot be broadcast together")
    return None




def once_differentiable(fn):
    """torch.autograd.function.once_differentiable, for custom Functions' backward: returned as
    it is (a varlens backward that is not differentiable already raises a clear error when a
    second derivative is asked for)."""
    return fn

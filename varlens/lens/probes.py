"""Measure: streaming statistics of every module's output, every op's output, and their gradients.

``Lens(model)`` attaches forward pre-hooks and hooks to every module (no change to the model)
and, while the model's forward runs, the core's one observation slot
(``varlens.core.function.op_hook``), so every Function applied inside the forward is seen
too.  Each module call and each op is one *record* (format: :mod:`varlens.lens.records`):
modules are keyed by their qualified name (``name#k`` for the k-th extra use in one pass),
ops by the innermost running module plus the op (``blocks.3.attn:softmax``,
``blocks.3:add``).  On a sampled step the hooks

* update the output's statistics (count, mean, M2 merged by Chan's formula in float64;
  second moment, max |x|, exact zeros, NaN/Inf counts, saturation for tanh/sigmoid and
  softmax-like outputs; a per-row second-moment accumulator for confidence intervals),
* remember each input's moments and producer (for the local propagation rules), the
  measured cross term E[a*b] of an addition's two inputs, and per-unit second moments of
  Linear/conv outputs (on detail steps, to calibrate the local ratio over units),
* put a gradient hook on the output tensor, so the cotangent dL/d(output) gets the same
  statistics during backward, and
* note the first record that held a NaN/Inf, forward and backward (``first_nonfinite``).

``lens.step()`` ends a training step: on one sampled step in ``weight_every`` (a *detail*
step, the first sampled step included) it records weight and weight-gradient statistics,
float16/bfloat16 headroom counts and per-unit moments; then it arms the hooks for the next
step if that is to be sampled (every ``every`` steps).  ``lens.detach()`` removes every hook.

A model on the CUDA device is measured there: the statistics above, and the extras the rules
need (normalisation groups' variances, per-channel and per-feature means, softmax row variances,
pooling correlations), are reduced on the device and a few scalars (or per-channel vectors) per
tensor come back.  Only a fused attention's internals (logits and probabilities) are computed on
a host copy of q and k.
"""
from __future__ import annotations

import math
import re
import sys
from weakref import ref as _weakref

import numpy as np

from varlens.core import array as B
from varlens.core.array import ones_cached
from varlens.lens.kernels import col_sums
from varlens.lens.records import (_FAST, SAT_LEVEL, InputMoments, Record, Stats,  # noqa: F401
                                  _summarize_general, moments, summarize)

# module kinds, by class name (so this layer does not import the nn layer classes)
LINEAR_LIKE = {"Linear", "Conv1d", "Conv2d", "Conv3d", "Bilinear", "LazyLinear"}
ACT_NAMES = {"ReLU": "relu", "Tanh": "tanh", "Sigmoid": "sigmoid", "GELU": "gelu", "SiLU": "silu",
             "ELU": "elu", "Softplus": "softplus", "Identity": "identity", "LeakyReLU": "leaky_relu"}
SATURATING = {"Tanh": "tanh", "Sigmoid": "sigmoid", "Hardtanh": "tanh", "Softsign": "tanh"}
SOFTMAX_LIKE = {"Softmax", "Softmin"}
NORM_LIKE = {"BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm", "GroupNorm", "RMSNorm",
             "InstanceNorm1d", "InstanceNorm2d"}
DROPOUT_LIKE = {"Dropout", "Dropout1d", "Dropout2d", "Dropout3d"}
POOL_LIKE = {"AvgPool1d", "AvgPool2d", "MaxPool1d", "MaxPool2d", "AdaptiveAvgPool2d", "AdaptiveAvgPool1d"}

_KNOWN = LINEAR_LIKE | set(ACT_NAMES) | set(SATURATING) | SOFTMAX_LIKE | NORM_LIKE | DROPOUT_LIKE | POOL_LIKE | {
    "Flatten", "Unflatten", "Sequential", "Embedding"}

# Function class name -> op name (others: the class name in snake case, without a trailing Fn)
OP_NAMES = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Neg": "neg", "MatMul": "matmul",
            "Linear": "linear", "ReLU": "relu", "Tanh": "tanh", "Sigmoid": "sigmoid", "GELU": "gelu",
            "SiLU": "silu", "ELU": "elu", "Softplus": "softplus", "LeakyReLU": "leaky_relu",
            "Softmax": "softmax", "LogSoftmax": "log_softmax", "MaskMul": "dropout", "Conv2dFn": "conv",
            "ConvTranspose2dFn": "conv_transpose", "MaxPool2dFn": "max_pool", "AvgPool2dFn": "avg_pool",
            "SDPA": "sdpa", "BatchNorm": "batch_norm", "LayerNorm": "layer_norm", "RMSNorm": "rms_norm",
            "Embedding": "embedding", "GetItem": "getitem", "ConstantPad": "pad"}
# which positional arguments of an op are its parameters (read at compare time, never summarised)
OP_PARAM_NAMES = {"linear": (None, "weight", "bias"), "conv": (None, "weight", "bias"),
                  "layer_norm": (None, "weight", "bias"), "batch_norm": (None, "weight", "bias"),
                  "rms_norm": (None, "weight"), "embedding": ("weight",)}
OP_SATURATING = {"tanh": "tanh", "sigmoid": "sigmoid", "softmax": "softmax"}
CROSS_OPS = {"add", "sub", "mul"}
_PARAMS_EVERY_CALL = frozenset(("dropout", "softmax", "log_softmax", "sdpa", "batch_norm", "avg_pool"))
MIXING_KINDS = LINEAR_LIKE | {"linear", "conv"}


def module_kind(module):
    """The nearest known class name in the module's MRO (a subclass of Linear is a 'Linear')."""
    for cls in type(module).__mro__:
        if cls.__name__ in _KNOWN:
            return cls.__name__
    return type(module).__name__


_OPN = {}


def module_selected(modules, name, module):
    """Whether ``modules`` ('all', 'leaves' or a predicate f(name, module)) asks for a
    module-level record of ``module``."""
    if modules == "leaves":
        return not any(True for _ in module.children())
    if callable(modules):
        return bool(modules(name, module))
    return True


def op_name(cls):
    """The lens's name of a Function class (OP_NAMES, else its name in snake case)."""
    n = _OPN.get(cls)
    if n is None:
        c = cls.__name__
        n = OP_NAMES.get(c)
        if n is None:
            c = re.sub(r"(Fn|Function)$", "", c)
            n = re.sub(r"(?<!^)(?=[A-Z])", "_", c).lower().lstrip("_")
        _OPN[cls] = n
    return n


_Tensor = None       # varlens.Tensor, bound when the first Lens is made (keeps this import light)
_Parameter = None
_fn_module = None    # the core module that holds the op_hook slot


def _bind():
    global _Tensor, _Parameter, _fn_module
    if _Tensor is None:
        import varlens
        import varlens.autograd
        from varlens.nn.parameter import Parameter
        _Tensor = varlens.Tensor
        _Parameter = Parameter
        # the module that defines Function holds the slot (wherever the core keeps it)
        _fn_module = sys.modules[varlens.autograd.Function.__module__]


_RECORDING = []     # lenses whose model's forward is running now


def _dispatch(cls, args, kwargs, res):
    for lens in tuple(_RECORDING):
        lens._op(cls, args, kwargs, res)


def _install():
    """Point the core's op_hook at the recording lens (None when no forward is being recorded)."""
    fm = _fn_module
    if not _RECORDING:
        fm.op_hook = None
    elif len(_RECORDING) == 1:
        fm.op_hook = _RECORDING[0]._op
    else:
        fm.op_hook = _dispatch


def saturation_kind(module):
    t = module_kind(module)
    if t in SATURATING:
        return SATURATING[t]
    if t in SOFTMAX_LIKE:
        return "softmax"
    return None


def _first_tensor(obj):
    Tensor = _Tensor
    if isinstance(obj, Tensor):
        return obj
    if isinstance(obj, (tuple, list)):
        for o in obj:
            t = _first_tensor(o)
            if t is not None:
                return t
    if isinstance(obj, dict):
        for o in obj.values():
            t = _first_tensor(o)
            if t is not None:
                return t
    return None


def _h(a):
    """A host (NumPy) array with ``a``'s values: ``a`` itself on the CPU, a copy of a CUDA array."""
    return a if a.__class__ is np.ndarray else B.to_host(a)


def _is_param(t):
    """A leaf the model owns (a Parameter, or a leaf that requires grad): read at compare time."""
    return t._node is None and (t._rg or isinstance(t, _Parameter))


def unit_axis(a, conv):
    """Units of a Linear output are its last axis, of a conv output its channel axis 1."""
    return 1 if (conv and a.ndim >= 3) else a.ndim - 1


class Lens:
    """Attach to ``model``; sample every ``every`` steps.  Use as a context manager or call detach().

    ``modules``: which modules get module-level records: 'all' (default: every module,
    containers included), 'leaves' (modules without children) or a predicate
    ``f(name, module) -> bool``.
    ``ops``: also record every op applied inside the model's forward (default True); the
    rows of ``compare`` show module-level records unless asked for ops (``level='op'``).
    ``grads``: also record the gradient flowing back into each output.
    ``weights``: record weight and weight-gradient statistics at ``step()``, on one sampled
    step in ``weight_every`` (default 10: weights change slowly and are the largest arrays,
    so reading them every step would dominate the lens's cost; 1 = every sampled step).
    The same *detail* steps also count float16/bfloat16 headroom and per-unit moments.
    """

    def __new__(cls, model=None, *args, **kwargs):
        # a torch.nn.Module goes to the PyTorch adapter (which imports torch; varlens never does)
        from varlens.lens.torch_adapter import is_torch_module
        if cls is Lens and is_torch_module(model):
            from varlens.lens.torch_adapter import TorchLens
            return super().__new__(TorchLens)
        if not hasattr(model, "named_modules"):
            raise TypeError(f"Lens: model must be a varlens.nn.Module or a torch.nn.Module, got "
                            f"{type(model).__module__}.{type(model).__qualname__}")
        return super().__new__(cls)

    def __init__(self, model, every=1, modules="all", grads=True, weights=True, weight_every=10, ops=True):
        if not isinstance(every, int) or every < 1:
            raise ValueError(f"Lens: every must be a positive int (sample every N steps), got {every!r}")
        if not isinstance(weight_every, int) or weight_every < 1:
            raise ValueError(f"Lens: weight_every must be a positive int, got {weight_every!r}")
        if not hasattr(model, "named_modules"):
            raise TypeError(f"Lens: model must be a varlens.nn.Module, got {type(model).__name__}")
        _bind()
        self.weight_every = weight_every
        self._summ = {}            # id(array) -> (array, summary): one summary per array per step
        # id(gradient array) -> (weak reference, summary): a gradient handed to two records' hooks
        # (both inputs of an addition) is read once, and none is kept alive past its use in
        # backward (holding them costs the step more than the lens's own passes: the allocator
        # cannot reuse their memory; same-process A/B on bench_lens.py's MLP, 2026-11-26:
        # about 2 points of the overhead)
        self._gsumm = {}
        self._cols = {}            # id(array) -> (array, kernels.col_sums of it or None, k): detail steps
        self._moms = {}            # id(array) -> (array, moments) of inputs no record produced
        self.model, self.every, self.grads, self.weights, self.ops = model, every, grads, weights, bool(ops)
        self.records = {}          # key -> Record, in order of first call
        self.steps_seen = 0
        self.steps_sampled = 0
        self.first_nonfinite = {"forward": None, "backward": None}
        self._active = True
        self._detail = True        # this sampled step also takes headroom counts and unit moments
        self._handles = []
        self._calls = {}           # name -> calls in the current pass
        self._produced = {}        # id(output array) -> (array, key)   (within one pass)
        self._stack = []           # module paths running now (innermost last)
        self._hooked = False
        self._order = 0
        for name, mod in model.named_modules():
            path = name or "(model)"
            rec = module_selected(modules, name, mod)
            if self.ops:
                self._handles.append(mod.register_forward_pre_hook(self._make_pre(path, mod is model)))
            if rec or self.ops:        # (the model's own hook also ends the pass: one hook call fewer)
                self._handles.append(mod.register_forward_hook(self._make_hook(path, rec, mod is model),
                                                               always_call=True))
            elif mod is model:         # after the model's own record (none here): one forward pass is over
                self._handles.append(model.register_forward_hook(self._end_pass, always_call=True))

    def _end_pass(self, module, args, output):
        """The model's forward returned: the next call of a module is its first use again.

        Several forward passes per step (gradient accumulation, inference without step())
        therefore merge into the same records instead of creating name#k keys, and the
        per-pass bookkeeping never grows beyond one pass (and its backward).
        """
        self._unhook()
        self._stack.clear()
        self._calls.clear()
        self._produced.clear()
        self._summ.clear()
        self._cols.clear()
        self._moms.clear()
        return None

    # ------------------------------------------------------------------ hooks
    def _make_pre(self, path, root):
        stack = self._stack

        def pre(module, args):
            if self._active:
                if root and not self._hooked:
                    self._hook()
                stack.append(path)
            return None
        return pre

    def _make_hook(self, path, rec, root=False):
        """The forward hook of the module at ``path`` (``rec``: it has a module-level record;
        ``root``: it is the model, whose hook also ends the forward pass after its record).

        The usual call takes a short path: the module's first call in the pass, on an ordinary
        sampled step, returning the output of the same op inside it as when its record was
        linked to that op (``Record.via``, set by :meth:`_record`).  Its record then shares the
        op's statistics, so only the row count, the input's moments and the output's producer
        are noted; anything else goes to :meth:`_record`."""
        stack = self._stack
        ops = self.ops
        calls, records, produced = self._calls, self.records, self._produced
        T = _Tensor

        def hook(module, args, output):
            if self._active:
                if ops and stack:
                    if stack[-1] == path:
                        stack.pop()
                    elif path in stack:            # a child raised past its hook: unwind to here
                        del stack[stack.index(path):]
                if rec and output is not None:
                    r = records.get(path) if path not in calls else None
                    via = r.via if r is not None else None
                    inp = args[0] if args else None
                    if via is not None and output.__class__ is T and inp.__class__ is T and not self._detail:
                        a = output._data
                        hit = produced.get(id(a))
                        if hit is not None and hit[0] is a and hit[1] == via:
                            calls[path] = 1
                            r.rows = a.shape[0] if a.ndim else 1
                            self._note_first_input(r, inp._data, module, path)   # as _record notes it
                            produced[id(a)] = (a, path)
                        else:
                            self._record(path, module, args, output)
                    else:
                        self._record(path, module, args, output)
            if root:
                self._end_pass(module, args, output)
            return None
        return hook

    def _hook(self):
        if self not in _RECORDING:
            _RECORDING.append(self)
        _install()
        self._hooked = True

    def _unhook(self):
        if self._hooked:
            if self in _RECORDING:
                _RECORDING.remove(self)
            _install()
            self._hooked = False

    def _key(self, name):
        calls = self._calls
        k = calls.get(name, 0)
        calls[name] = k + 1
        return name if k == 0 else f"{name}#{k}"

    def _new_record(self, key, **kw):
        rec = self.records[key] = Record(key, order=self._order, **kw)
        self._order += 1
        return rec

    def _record(self, name, module, args, output):
        key = self._key(name)
        rec = self.records.get(key)
        if rec is None:
            rec = self._new_record(key, path=name, level="module", kind=module_kind(module),
                                   cls=type(module).__name__, module=module)
            rec.sat_kind = saturation_kind(module)
        out = output if type(output) is _Tensor else _first_tensor(output)
        inp = args[0] if args and type(args[0]) is _Tensor else _first_tensor(args)
        src = None
        bad = False
        if out is not None:
            a = out._data
            hit = self._produced.get(id(a))
            if hit is not None and hit[0] is a:
                s = self.records[hit[1]]
                inside = s.path == name or s.path.startswith(name + ".") or name == "(model)"
                passed = inp is not None and inp._data is a      # Identity, eval Dropout: the input itself
                if s.key != key and (inside or passed):
                    src = self.records[s.source] if (s.level == "module" and s.source) else s
            if src is not None and rec.source in (None, src.key):
                rec.source = src.key       # the op that made this output: the same tensor, shared stats
                rec.out = src.out
                rec.grad = src.grad
                if inside and key == name and (s.level != "module" or s.source is not None):
                    rec.via = s.key        # (the hook's short path: the same producer gives the same source)
            else:
                sm = self._summary(a)
                rec.out.update(a, rec.sat_kind, sm)
                bad = sm[5] or sm[6]
                if self._detail:
                    rec.out.update_numerics(a)
            rec.rows = a.shape[0] if a.ndim else 1
            if rec.params.get("training") is None:
                rec.params["training"] = bool(getattr(module, "training", True))
            if self._detail and rec.kind in LINEAR_LIKE and a.dtype.kind == "f":
                ax = unit_axis(a, rec.kind.startswith("Conv"))
                rec.add_units(a, ax, cols=self._col_sums(a, 3) if ax == a.ndim - 1 else None)
        if inp is not None:              # after the output: its summary may be this input's
            self._note_first_input(rec, inp._data, module, key)
        if bad:
            self._check_finite(rec, "forward")
        if out is None:
            return
        self._produced[id(a)] = (a, key)
        if self.grads and out._rg and src is None:
            self._attach_grad(rec, out)

    def _attach_grad(self, rec, out):
        h = rec.grad_hook
        if h is None:
            h = rec.grad_hook = self._grad_hook(rec)
        node = out._node
        if node is not None:          # what Tensor.register_hook does, without the handle
            if node.hooks is None:
                node.hooks = [h]
            else:
                node.hooks.append(h)
        else:
            out.register_hook(h)

    def _check_finite(self, rec, direction, sm=None):
        st = rec.out if direction == "forward" else rec.grad
        if direction not in rec.nonfinite:
            rec.nonfinite[direction] = self.steps_seen
            if self.first_nonfinite[direction] is None:
                ins = [i for i in rec.inputs if i.n]
                self.first_nonfinite[direction] = {
                    "key": rec.key, "path": rec.path, "op": rec.op, "level": rec.level, "step": self.steps_seen,
                    "nan": st.nan, "inf": st.inf,
                    # forward: were the inputs finite (the op made the NaN/Inf) or did it pass one on?
                    "inputs_finite": all(math.isfinite(i.sum_q) for i in ins) if direction == "forward" else None,
                    "by": None if direction == "forward" else [c for c in rec.consumers
                                                               if self.records[c].level == "op"] or list(rec.consumers)}

    def _note_first_input(self, rec, d, module, key):
        """_note_input(rec, 0, d) with its common case inline: an input that is a summarised
        output, already linked (or unlinkable), outside a detail step, for a layer that is not a
        norm: the summary's mean and second moment are added to the input's running sums."""
        if not self._detail and rec.inputs and rec.kind not in NORM_LIKE:
            ida = id(d)
            prev = self._produced.get(ida)
            if prev is None or prev[0] is not d or prev[1] == key or (0, prev[1]) in rec.linked:
                hit = self._summ.get(ida)
                if hit is not None and hit[0] is d and hit[1][0]:
                    sm = hit[1]
                    if rec.kind in _SHAPED:
                        rec.params["in_shape"] = tuple(d.shape)
                    im = rec.inputs[0]
                    im.sum_mean += sm[1]
                    im.sum_q += sm[2] / sm[0] + sm[1] * sm[1]
                    im.n += 1
                    im.shape = d.shape
                    return
        self._note_input(rec, 0, d, module)

    def _note_input(self, rec, i, a, module=None):
        ida = id(a)
        prev = self._produced.get(ida)
        ins = rec.inputs
        im = ins[i] if i < len(ins) else rec.input(i)
        if prev is not None and prev[0] is a and prev[1] != rec.key and (i, prev[1]) not in rec.linked:
            rec.linked.add((i, prev[1]))      # (linked once: what follows depends on the two keys alone)
            if im.producer is None:
                im.producer = prev[1]
                if i == 0 and rec.producer is None:
                    rec.producer = prev[1]
            prod = self.records[prev[1]]
            if i == 0 and (rec.kind in MIXING_KINDS):
                how = "conv" if (rec.kind == "conv" or rec.kind.startswith("Conv")) else "linear"
                prod.params["feeds_mixing"] = how
                if prod.source is not None:
                    self.records[prod.source].params["feeds_mixing"] = how
            if rec.key not in prod.consumers and not self._is_ancestor(rec, prod):
                prod.consumers.append(rec.key)
        hit = self._summ.get(ida)
        if hit is not None and hit[0] is a:   # summarised already (a record's output): reuse it
            sm = hit[1]
            if sm[0] == 0:
                im.add(float("nan"), float("nan"), a.shape)
                return
            m, q = sm[1], sm[2] / sm[0] + sm[1] * sm[1]
        else:  # data or a tensor made outside any record: its mean and second moment suffice
            mo = _memo(self._moms, a, moments)  # (the model and its first layer share it)
            if mo is None:
                im.add(float("nan"), float("nan"), a.shape)
                return
            m, q = mo[1], mo[2]
        if i:
            im.sum_mean += m                  # (im.add, inline)
            im.sum_q += q
            im.n += 1
            im.shape = a.shape
            return
        kind = rec.kind
        if module is not None:
            if kind in NORM_LIKE:
                rec.inp_var_group = self._group_var(module, a, rec.params)
                if kind.startswith("BatchNorm") and not module.training:
                    x = a.astype(np.float64)
                    axes = (0,) + tuple(range(2, x.ndim))
                    rec.params["channel_mean"] = _h(x.mean(axis=axes))
                    rec.params["channel_q"] = _h((x * x).mean(axis=axes))
            elif kind in _SHAPED:
                rec.params["in_shape"] = tuple(a.shape)
        if not self._detail:
            im.sum_mean += m                  # (im.add, inline)
            im.sum_q += q
            im.n += 1
            im.shape = a.shape
            return
        if kind in MIXING_KINDS:
            self._feature_means(rec, a, self._col_sums(a, 1))
        elif kind in _ACT_KINDS:
            if prev is not None and prev[0] is a:
                pr = self.records[prev[1]]
                pk = self.records[pr.source].kind if pr.source else pr.kind
                rec.params["conv_input"] = pk.startswith("Conv") or pk in ("conv", "batch_norm") or \
                    pk.startswith("BatchNorm") or a.ndim == 4
            else:
                rec.params["conv_input"] = a.ndim == 4
            channel_moments(rec, a, self._col_sums(a, 3))
        im.add(m, q, a.shape)

    @staticmethod
    def _feature_means(rec, a, cols=None):
        """Accumulate the mean of each input feature (Linear: last axis; conv: channel axis 1).
        ``cols``: :func:`kernels.col_sums` of ``a`` seen as (-1, last axis), if already made."""
        if a.dtype.kind != "f" or a.ndim < 2:
            return
        x = a if a.dtype.itemsize >= 4 else a.astype(np.float32)
        with np.errstate(invalid="ignore", over="ignore"):
            Lens._feature_means_of(rec, x, cols)

    @staticmethod
    def _feature_means_of(rec, x, cols=None):
        if rec.kind.startswith("Conv") or rec.kind == "conv":
            fm = x.mean(axis=(0,) + tuple(range(2, x.ndim)), dtype=np.float64)
            if x.__class__ is np.ndarray:
                prof = np.einsum("nc...,nc...->...", x, x, dtype=np.float64) / (x.shape[0] * x.shape[1])
            else:                            # on the device; the channel means and profile come back
                x64 = x.astype(np.float64)
                prof = B.to_host((x64 * x64).sum(axis=(0, 1))) / (x.shape[0] * x.shape[1])
                fm = B.to_host(fm)
            old = rec.params.get("in_profile_sum")
            if old is None or old.shape != prof.shape:
                rec.params["in_profile_sum"], rec.params["in_profile_n"] = prof, 1
            else:
                rec.params["in_profile_sum"] = old + prof
                rec.params["in_profile_n"] += 1
        else:
            x2 = x.reshape(-1, x.shape[-1])
            if cols is not None:             # the one-pass column sums (float64)
                fm = cols[0] / x2.shape[0]
            elif x2.__class__ is np.ndarray:
                fm = ones_cached(x2.shape[0], np.float64) @ x2.astype(np.float64) / x2.shape[0]
            else:                            # on the device; the vector of feature means comes back
                fm = B.to_host(x2.astype(np.float64).sum(axis=0)) / x2.shape[0]
        p = rec.params
        old = p.get("in_fmean_sum")
        if old is None or old.shape != fm.shape:
            p["in_fmean_sum"], p["in_fmean_n"] = fm, 1
        else:
            p["in_fmean_sum"] = old + fm
            p["in_fmean_n"] += 1

    @staticmethod
    def _is_ancestor(rec, prod):
        # a container's output is also its last child's output: the child is not its consumer
        return prod.path.startswith(rec.path + ".") or rec.path == "(model)" or (
            prod.level == "op" and prod.path == rec.path and rec.level == "module")

    @staticmethod
    def _group_var(module, a, params=None):
        x = a.astype(np.float64)
        if module_kind(module).startswith("BatchNorm"):
            axes = (0,) + tuple(range(2, x.ndim))
        else:
            shape = getattr(module, "normalized_shape", (x.shape[-1],))
            axes = tuple(range(x.ndim - len(tuple(shape)), x.ndim))
        return norm_stats(x, axes, float(getattr(module, "eps", 1e-5) or 1e-5), module_kind(module) == "RMSNorm",
                           params)

    def _summary(self, a):
        return _memo(self._summ, a, summarize)

    def _col_sums(self, a, k=3):
        """:func:`kernels.col_sums` of a host float array seen as (-1, last axis), its first ``k``
        sums (1: x, 2: and x^2, 3: and x^3), once per array per pass (a Linear's output feeds its
        op's and its module's unit moments and the next activation's channel moments: asked
        with k=3 from the first); None where it does not apply (device arrays, other dtypes,
        non-contiguous, fewer than 2 dims)."""
        hit = self._cols.get(id(a))
        if hit is not None and hit[0] is a and hit[2] >= k:
            return hit[1]
        v = _col_sums_of(a, k)
        self._cols[id(a)] = (a, v, k)
        return v

    def _grad_hook(self, rec):
        summ = self._gsumm

        def hook(g):
            a = g._data
            if not a.size:
                rec.grad.update(a, None, None)
                return
            ida = id(a)                       # (_memo and Stats.update, inline)
            hit = summ.get(ida)
            if hit is not None and hit[0]() is a:
                sm = hit[1]
            else:
                sm = summarize(a)
                summ[ida] = (_weakref(a), sm)
            st = rec.grad                     # (Stats.update without its checks)
            st.calls += 1
            st.shape = a.shape
            st.merge(sm)
            if sm[5] or sm[6]:
                self._check_finite(rec, "backward", sm)
            if self._detail:
                rec.grad.update_numerics(a)
                if rec.params.get("feeds_mixing"):
                    ax = unit_axis(a, rec.params["feeds_mixing"] == "conv")
                    rec.add_units(a, ax, grad=True, cols=self._col_sums(a, 2) if ax == a.ndim - 1 else None)
            return None
        return hook

    # ------------------------------------------------------------------ ops
    def _op(self, cls, args, kwargs, res):
        """The core's op hook: one op applied inside the model's forward."""
        stack = self._stack
        if not stack or not self._active:
            return
        a = res._data
        if a.dtype.kind != "f":
            return                       # masks, indices, comparisons: not a signal
        path = stack[-1]
        op = _OPN.get(cls) or op_name(cls)
        name = path + ":" + op
        calls = self._calls                      # (self._key, inline: this runs for every op)
        k = calls.get(name, 0)
        calls[name] = k + 1
        key = name if k == 0 else f"{name}#{k}"
        rec = self.records.get(key)
        new = rec is None
        if new:
            rec = self._new_record(key, path=path, level="op", kind=op, op=op, cls=cls.__name__)
            rec.sat_kind = OP_SATURATING.get(op)
            names = OP_PARAM_NAMES.get(op, ())
            pidx = set()
            for i, t in enumerate(args):
                if isinstance(t, _Tensor) and _is_param(t):
                    nm = names[i] if i < len(names) and names[i] else f"arg{i}"
                    rec.arrays[nm] = (lambda t=t: t)
                    pidx.add(i)
            rec.params["param_args"] = pidx
            derived = True     # computed from parameters alone (a slice of MHA's in_proj_weight, say)
            for i, t in enumerate(args):
                if isinstance(t, _Tensor) and i not in pidx:
                    hit = self._produced.get(id(t._data))
                    if hit is None or hit[0] is not t._data or not self.records[hit[1]].params.get("param_derived"):
                        derived = False
            if derived:
                rec.params["param_derived"] = True
        summ = self._summ                        # (_memo and Stats.update, inline: every op)
        ida = id(a)
        hit = summ.get(ida)
        if hit is not None and hit[0] is a:
            sm = hit[1]
        else:
            sm = summarize(a)
            summ[ida] = (a, sm)
        st = rec.out
        if rec.sat_kind is None and a.size:   # (Stats.update without its checks)
            st.calls += 1
            st.shape = a.shape
            st.merge(sm)
        else:
            st.update(a, rec.sat_kind, sm)
        rec.rows = a.shape[0] if a.ndim else 1
        if self._detail:
            st.update_numerics(a)
        T = _Tensor
        scalars = None
        pidx = rec.params["param_args"]
        produced = self._produced
        detail = self._detail
        for i, t in enumerate(args):
            if t.__class__ is T or isinstance(t, T):
                if i in pidx:                    # (a parameter: read at compare time)
                    continue
                d = t._data                      # (_note_input's common case, inline: an input that
                ida = id(d)                      # is a summarised output, already linked, no detail)
                if i or not detail:
                    prev = produced.get(ida)
                    if prev is None or prev[0] is not d or prev[1] == key or (i, prev[1]) in rec.linked:
                        hit = summ.get(ida)
                        if hit is not None and hit[0] is d and hit[1][0] and i < len(rec.inputs):
                            s = hit[1]
                            im = rec.inputs[i]
                            im.sum_mean += s[1]
                            im.sum_q += s[2] / s[0] + s[1] * s[1]
                            im.n += 1
                            im.shape = d.shape
                            continue
                self._note_input(rec, i, d)
            elif isinstance(t, (int, float)) and not isinstance(t, bool):
                if scalars is None:
                    scalars = {}
                scalars[i] = float(t)
        if scalars:
            rec.params["scalars"] = scalars
        if sm[5] or sm[6]:
            self._check_finite(rec, "forward", sm)
        if op in CROSS_OPS and len(args) >= 2 and isinstance(args[0], T) and isinstance(args[1], T):
            x, y = args[0]._data, args[1]._data
            if x.shape == y.shape and x.size:
                with np.errstate(over="ignore", invalid="ignore"):
                    c = float(B.namespace(x, y).vdot(x.reshape(-1), y.reshape(-1))) / x.size
                rec.cross += c
                rec.cross_n += 1
        if kwargs or new or op in _PARAMS_EVERY_CALL:
            self._op_params(rec, op, args, kwargs, a)
        if self._detail and op in ("linear", "conv"):
            ax = unit_axis(a, op == "conv")
            rec.add_units(a, ax, cols=self._col_sums(a, 3) if ax == a.ndim - 1 else None)
        if op == "sdpa":
            self._sdpa_internals(path, args, res)
        produced[id(a)] = (a, key)
        if res._rg and self.grads:
            h = rec.grad_hook
            node = res._node
            if h is not None and node is not None:     # (_attach_grad, inline: every op)
                if node.hooks is None:
                    node.hooks = [h]
                else:
                    node.hooks.append(h)
            else:
                self._attach_grad(rec, res)

    def _op_params(self, rec, op, args, kwargs, a):
        """Scalars an op's rule needs (its keyword parameters, dropout's p, softmax's row variance)."""
        p = rec.params
        for k, v in kwargs.items():
            if isinstance(v, (bool, int, float, str)) or (isinstance(v, tuple) and len(v) <= 8):
                p[k] = v
        if args and isinstance(args[0], _Tensor):
            p["in_shape"] = tuple(args[0]._data.shape)
        p["out_shape"] = tuple(a.shape)
        if op == "dropout" and len(args) > 1:
            m = args[1]._data if isinstance(args[1], _Tensor) else np.asarray(args[1])
            top = float(m.max()) if m.size else 0.0
            if top > 0:
                p["p"] = 1.0 - 1.0 / top
        elif op in ("softmax", "log_softmax") and isinstance(args[0], _Tensor):
            x = args[0]._data
            dim = args[1] if len(args) > 1 and isinstance(args[1], int) else kwargs.get("dim", -1)
            with np.errstate(invalid="ignore", over="ignore"):
                rv = float(x.astype(np.float64).var(axis=dim).mean())   # (on a device: one scalar back)
            p["row_var_sum"] = p.get("row_var_sum", 0.0) + rv
            p["row_var_n"] = p.get("row_var_n", 0) + 1
            p["n"] = x.shape[dim]
        elif op in ("layer_norm", "rms_norm"):
            x = args[0]._data.astype(np.float64)
            axes = tuple(range(x.ndim - int(kwargs.get("nd", 1)), x.ndim))
            rec.inp_var_group = norm_stats(x, axes, float(kwargs.get("eps") or 1e-5), op == "rms_norm", p)
        if op == "batch_norm":
            bs = kwargs.get("batch_stats", True)
            p["batch_stats"] = bool(bs)
            if bs:
                x = args[0]._data.astype(np.float64)
                rec.inp_var_group = norm_stats(x, (0,) + tuple(range(2, x.ndim)), float(kwargs.get("eps") or 1e-5),
                                                False, p)
            if not bs:
                p["running_mean"] = _h(kwargs.get("mean")).reshape(-1).astype(np.float64)
                p["running_var"] = _h(kwargs.get("var")).reshape(-1).astype(np.float64)
                x = args[0]._data.astype(np.float64)
                axes = (0,) + tuple(range(2, x.ndim))
                p["channel_mean"] = _h(x.mean(axis=axes))
                p["channel_q"] = _h((x * x).mean(axis=axes))
        elif op == "avg_pool":
            p["lag_corr"] = window_correlation(args[0]._data, kwargs.get("kernel_size", (2, 2)))

    def _sdpa_internals(self, path, args, res):
        """Attention logits and probabilities of a fused scaled_dot_product_attention: records
        ``<path>:sdpa.logits`` and ``<path>:sdpa.softmax`` (forward statistics only)."""
        q_dev, k_dev = args[0]._data, args[1]._data
        q, k = _h(q_dev), _h(k_dev)
        mask = args[3] if len(args) > 3 else None
        if mask is not None and B.is_device_array(mask):
            mask = B.to_host(mask)
        scale = float(args[5]) if len(args) > 5 else 1.0 / math.sqrt(q.shape[-1])
        s = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
        node = res._node
        p = None
        if node is not None and node.saved and len(node.saved) > 3:
            p = node.saved[3]
            p = None if p is None else _h(p)
        if p is None:
            z = s if mask is None else (np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask)
            zm = np.max(z, axis=-1, keepdims=True)
            e = np.exp(z - np.where(np.isfinite(zm), zm, 0))
            p = e / np.maximum(e.sum(axis=-1, keepdims=True), 1e-300)
        valid = None
        if mask is not None and mask.dtype == bool:
            valid = np.broadcast_to(mask, s.shape)
        for suffix, arr in (("sdpa.logits", s), ("sdpa.softmax", p)):
            key = self._key(f"{path}:{suffix}")
            rec = self.records.get(key)
            if rec is None:
                rec = self._new_record(key, path=path, level="op", kind=suffix, op=suffix, cls="SDPA")
                rec.sat_kind = "softmax" if suffix == "sdpa.softmax" else None
            if suffix == "sdpa.logits":
                vals = arr if valid is None else arr[valid].reshape(arr.shape[0], -1)
                rec.out.update(np.ascontiguousarray(vals), None)
                with np.errstate(invalid="ignore"):
                    if valid is None:
                        rv = float(np.mean(np.var(arr, axis=-1)))
                    else:
                        cnt = valid.sum(axis=-1)
                        mu = np.where(valid, arr, 0).sum(axis=-1) / np.maximum(cnt, 1)
                        rv = float(np.mean((np.where(valid, (arr - mu[..., None]) ** 2, 0)).sum(axis=-1)
                                           / np.maximum(cnt, 1)))
                rec.params["row_var_sum"] = rec.params.get("row_var_sum", 0.0) + rv
                rec.params["row_var_n"] = rec.params.get("row_var_n", 0) + 1
                rec.params["d"] = q.shape[-1]
                rec.params["scale"] = scale
                self._note_input(rec, 0, q_dev)
                self._note_input(rec, 1, k_dev)
            else:
                rec.out.update(arr, "softmax")
                n_valid = (valid.reshape(-1, valid.shape[-1]).sum(axis=1) if valid is not None
                           else np.full(1, arr.shape[-1]))
                rec.params["n_valid"] = np.unique(n_valid, return_counts=True)
                rec.params["n"] = arr.shape[-1]
            rec.rows = arr.shape[0]

    def tap(self, name, tensor, kind=None):
        """Record a tensor that no module returns (attention logits inside a forward, say).

        ``kind``: None, 'tanh', 'sigmoid' or 'softmax' (saturation and entropy of the rows).
        Returns the tensor unchanged, so ``x = lens.tap('logits', x)`` fits inside a forward.
        """
        if not self._active:
            return tensor
        key = self._key(name)
        rec = self.records.get(key)
        if rec is None:
            rec = self._new_record(key, path=name, level="tap", kind="tap", cls="tap")
        a = tensor._data
        hit = self._produced.get(id(a))
        if hit is not None and hit[0] is a and rec.source in (None, hit[1]):
            rec.source = hit[1]           # an op recorded this tensor: the tap gets its predictions
        sm = summarize(a)
        rec.out.update(a, kind, sm)
        if sm[5] or sm[6]:
            self._check_finite(rec, "forward", sm)
        if self._detail:
            rec.out.update_numerics(a)
        rec.rows = a.shape[0] if a.ndim else 1
        if self.grads and tensor.requires_grad:
            tensor.register_hook(self._grad_hook(rec))
        return tensor

    # ------------------------------------------------------------------ steps
    def step(self):
        """End a training step (call after backward): weight and weight-grad statistics, then
        decide whether the next step is sampled."""
        if self._active and self._detail:
            if self.weights:
                for rec in self.records.values():
                    if rec.level != "module" or rec.key != rec.name:   # a second use shares the first's weights
                        continue
                    w = getattr(rec.module, "weight", None)
                    if w is None or not hasattr(w, "_data"):
                        continue
                    rec.weight.update_param(w._data)
                    rec.fan_in = math.prod(w.shape[1:]) if w.ndim > 1 else None
                    if w.grad is not None:
                        rec.weight_grad.update_param(w.grad._data)
        if self._active:
            self.steps_sampled += 1
        self.steps_seen += 1
        self._calls.clear()
        self._produced.clear()
        self._summ.clear()
        self._gsumm.clear()
        self._cols.clear()
        self._moms.clear()
        self._active = (self.steps_seen % self.every) == 0
        self._detail = self._active and (self.steps_sampled % self.weight_every == 0)

    def detach(self):
        """Remove every hook; the model then runs as if the lens had never been attached."""
        self._unhook()
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self._produced.clear()
        self._summ.clear()
        self._gsumm.clear()
        self._cols.clear()
        self._moms.clear()
        self._stack.clear()
        self._active = False

    def report(self, direction=None, max_rows=None, level="module"):
        """Predicted vs measured second moments as a text table (compare + report.table)."""
        from varlens.lens.compare import compare
        from varlens.lens.report import table
        return table(compare(self, level=level), direction=direction, max_rows=max_rows)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.detach()

    # ------------------------------------------------------------------ access
    def __getitem__(self, key):
        return self.records[key]

    def ordered(self):
        return sorted(self.records.values(), key=lambda r: r.order)


def norm_stats(x, axes, eps, rms=False, params=None):
    """The mean variance (mean square for RMS norm) nu each normalisation group sees; with
    ``params``, also the mean over groups of nu/(nu + eps) ('shrink': the exact factor of the
    output's second moment, which a pooled nu/(nu + eps) misses when nu is near eps)."""
    if x.__class__ is not np.ndarray:           # a CUDA array: reduced there, two scalars come back
        xp = B.namespace(x)
        nu = (x * x).mean(axis=axes) if rms else x.var(axis=axes)
        h = B.to_host(xp.stack([xp.mean(nu / (nu + eps)), xp.mean(nu)]))
        if params is not None:
            params["shrink"] = float(h[0])
        return float(h[1])
    with np.errstate(invalid="ignore", over="ignore"):
        nu = (x * x).mean(axis=axes) if rms else x.var(axis=axes)
        if params is not None:
            params["shrink"] = float(np.mean(nu / (nu + eps)))
        return float(np.mean(nu))


def _memo(store, a, fn):
    """fn(a), computed once per array per forward pass (``store``: id -> (array, value))."""
    hit = store.get(id(a))
    if hit is not None and hit[0] is a:
        return hit[1]
    v = fn(a)
    store[id(a)] = (a, v)
    return v


def _col_sums_of(a, k=3):
    """kernels.col_sums of ``a`` as (-1, last axis) (its first ``k`` sums), or None where it does
    not apply."""
    if a.__class__ is not np.ndarray or a.ndim < 2 or a.dtype not in _FAST or not a.flags.c_contiguous or not a.size:
        return None
    return col_sums(a.reshape(-1, a.shape[-1]), k)


def channel_moments(rec, a, cols=None):
    """Accumulate an activation input's per-channel first three moments (channels: axis 1 of an
    N-d conv map, the last axis otherwise), so the rule can average over channels and correct
    for skewness.  ``cols``: :func:`kernels.col_sums` of ``a`` as (-1, last axis), if made."""
    if a.dtype.kind != "f" or a.ndim < 2:
        return
    conv = a.ndim >= 3 and rec.params.get("conv_input")
    if cols is not None and not conv:         # per last-axis feature: the one-pass column sums
        m, q, c3 = cols / (a.size // a.shape[-1])
    else:
        x = a.astype(np.float64, copy=False)
        axes = (0,) + tuple(range(2, x.ndim)) if conv else tuple(range(x.ndim - 1))
        with np.errstate(invalid="ignore", over="ignore"):
            x2 = x * x
            m, q, c3 = x.mean(axis=axes), x2.mean(axis=axes), (x2 * x).mean(axis=axes)
    if m.__class__ is not np.ndarray:       # reduced on the device: the three per-channel vectors come back
        m, q, c3 = B.to_host(B.namespace(m).stack([m, q, c3]))
    p = rec.params
    if p.get("in_cmean_sum") is None or p["in_cmean_sum"].shape != m.shape:
        p["in_cmean_sum"], p["in_cq_sum"], p["in_c3_sum"], p["in_c_n"] = m, q, c3, 1
    else:
        p["in_cmean_sum"] = p["in_cmean_sum"] + m
        p["in_cq_sum"] = p["in_cq_sum"] + q
        p["in_c3_sum"] = p["in_c3_sum"] + c3
        p["in_c_n"] += 1


ACT_OPS = {"relu", "tanh", "sigmoid", "gelu", "silu", "elu", "softplus", "leaky_relu"}
_ACT_KINDS = (ACT_OPS | set(ACT_NAMES)) - {"Identity"}   # activations whose input's channel moments are kept
_SHAPED = LINEAR_LIKE | POOL_LIKE                         # modules whose input shape the rules read


def window_correlation(x, kernel):
    """kappa = E[x_a x_b] / E[x^2] over pairs of entries a != b of one pooling window (lags inside
    the kernel, pooled over channels and positions): the measured input structure the
    average-pool rule needs."""
    if x.ndim < 3:
        return 0.0
    k = (kernel, kernel) if isinstance(kernel, int) else tuple(kernel)
    xs = x.astype(np.float64)
    kh = k[0]
    kw = k[-1]
    lags, sums = [], [(xs * xs).mean()]       # E[x^2], then E[x_a x_b] at each lag
    for dy in range(-(kh - 1), kh):
        for dx in range(-(kw - 1), kw):
            if dy == 0 and dx == 0:
                continue
            a = xs[..., max(dy, 0):xs.shape[-2] + min(dy, 0), max(dx, 0):xs.shape[-1] + min(dx, 0)]
            b = xs[..., max(-dy, 0):xs.shape[-2] + min(-dy, 0), max(-dx, 0):xs.shape[-1] + min(-dx, 0)]
            if a.size:
                lags.append((kh - abs(dy)) * (kw - abs(dx)))   # pairs at this lag inside one window
                sums.append((a * b).mean())
    h = [float(m) for m in sums] if xs.__class__ is np.ndarray else \
        B.to_host(B.namespace(xs).stack(sums)).tolist()       # (on a device: one copy of the scalars)
    v = h[0]
    if v <= 0:
        return 0.0
    tot = sum(w * m / v for w, m in zip(lags, h[1:]))
    pairs = sum(lags)
    return tot / pairs if pairs else 0.0

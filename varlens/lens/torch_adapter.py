"""The variance lens on a PyTorch model: ``varlens.lens.Lens(torch_module)`` (docs/lens.md, "The lens
on a PyTorch model").

PyTorch is not a dependency of varlens: this file imports ``torch`` only when a ``torch.nn.Module``
is handed to the lens (:func:`is_torch_module` recognises one by its class's MRO without importing
torch).  What it records goes into the same :class:`varlens.lens.records.Record` structure the
varlens recorder fills, so ``compare()``, the verdicts, the JSON document and the plots are the
same code for both frameworks.

How the torch model is seen:

* **Modules**: a forward pre-hook and a forward hook (``always_call=True``, so an exception inside
  a forward cannot leave the bookkeeping half-done) on every module keep the stack of the modules
  that are running (the innermost one names an op) and record each module call (``name``,
  ``name#k`` for the k-th extra call in one forward pass).
* **Ops**: while the model's forward runs on a sampled step, a ``torch.overrides.TorchFunctionMode``
  sees every function the code calls (``F.linear``, ``x + y``, ``torch.softmax``,
  ``F.scaled_dot_product_attention`` ...), so functional code, residual additions and attention are
  recorded, not only module outputs; view, shape and dtype functions are not rows.  The mode is
  only entered on sampled steps: on the others the model runs as it would without the lens.
  Under the mode ``has_torch_function`` is true, which turns off ``nn.MultiheadAttention``'s and
  ``nn.TransformerEncoderLayer``'s fused inference paths on sampled steps: the same maths run through
  ``F.multi_head_attention_forward`` (one op row: its internals are C++ and Python code the mode
  does not see).
* **Gradients**: ``Tensor.register_hook`` on each recorded output (not full backward module hooks,
  which fail on in-place ops); a hook registered before an in-place op receives the gradient with
  respect to the value before it, which is the value the forward statistics describe.
  Under ``torch.no_grad`` nothing requires grad: forward rows only.
* **Statistics** are read where the tensor is.  A C-contiguous float32/float64 CPU tensor is read in
  place (a zero-copy NumPy view of its memory) by the same compiled one-pass kernel the varlens
  recorder uses, so the two frameworks' numbers come from the same code.  Any other tensor (CUDA,
  float16/bfloat16, strided) is reduced by torch ops on its device, accumulating in float64, and only
  a handful of scalars per tensor are copied to the host (:func:`torch_summary`).
* ``torch.compile``: an ``OptimizedModule`` is refused with a TypeError that says to pass
  ``model._orig_mod`` (the eager module); hooks and a function mode inside compiled graphs are not
  something the lens can promise to see.
"""
from __future__ import annotations

import math

import numpy as np

from varlens.lens import records as R
from varlens.lens.probes import Lens, module_kind

_torch = None       # the torch module, bound by the first TorchLens (this file never imports it at load)
_MODE = None        # the TorchFunctionMode subclass (made once torch is imported)
_F64 = None


def is_torch_module(obj):
    """True if ``obj`` is a ``torch.nn.Module`` (found in its class's MRO; torch is not imported)."""
    for cls in type(obj).__mro__:
        if cls.__name__ == "Module" and cls.__module__ == "torch.nn.modules.module":
            return True
    return False


def is_compiled(obj):
    """True for the wrapper ``torch.compile`` returns (torch._dynamo's OptimizedModule)."""
    return any(c.__name__ == "OptimizedModule" and c.__module__.startswith("torch._dynamo")
               for c in type(obj).__mro__)


def _bind_torch():
    global _torch, _MODE, _F64
    if _torch is not None:
        return
    import torch
    from torch.overrides import TorchFunctionMode

    class _OpMode(TorchFunctionMode):
        """Sees every torch function called during a sampled forward pass and records its output."""

        def __init__(self, lens):
            super().__init__()
            self.lens = lens

        def __torch_function__(self, func, types, args=(), kwargs=None):
            if kwargs is None:
                kwargs = {}
            lens = self.lens
            op = _op_name(func)
            if op is None or not lens._active:
                return func(*args, **kwargs)
            pre = lens._pre_op(op, func, args, kwargs)
            out = func(*args, **kwargs)
            lens._record_op(op, func, args, kwargs, out, pre)
            return out

    _torch, _MODE, _F64 = torch, _OpMode, torch.float64


# ------------------------------------------------------------------ op names
# function name (after stripping underscores) -> the lens's op kind; names not here keep their own
_ALIASES = {"radd": "add", "iadd": "add", "rsub": "sub", "isub": "sub", "rmul": "mul", "imul": "mul",
            "truediv": "div", "rtruediv": "div", "itruediv": "div", "divide": "div", "multiply": "mul",
            "subtract": "sub", "rmatmul": "matmul", "bmm": "matmul", "mm": "matmul",
            "scaled_dot_product_attention": "sdpa", "relu6": "relu6", "neg": "neg"}
# functions that move, view, cast or describe a tensor: no row of their own
_SKIP = {"view", "reshape", "view_as", "reshape_as", "flatten", "unflatten", "transpose", "permute", "t",
         "contiguous", "expand", "expand_as", "squeeze", "unsqueeze", "getitem", "setitem", "narrow", "select",
         "chunk", "split", "unbind", "tensor_split", "to", "float", "double", "half", "bfloat16", "type",
         "type_as", "detach", "clone", "size", "dim", "stride", "numel", "requires_grad", "get", "set",
         "cpu", "cuda", "data_ptr", "is_contiguous", "element_size", "is_floating_point", "storage_offset",
         "len", "repr", "format", "bool", "long", "int", "item", "tolist", "numpy", "new_zeros", "new_ones",
         "new_empty", "new_full", "new_tensor", "zeros_like", "ones_like", "empty_like", "full_like",
         "randn_like", "rand_like", "zeros", "ones", "empty", "full", "arange", "tensor", "randn", "rand",
         "randint", "tril", "triu", "eq", "ne", "lt", "le", "gt", "ge", "logical_not", "logical_and",
         "isfinite", "isnan", "argmax", "argmin", "masked_fill", "register_hook", "retain_grad", "backward",
         "apply", "movedim", "swapaxes", "split_with_sizes", "as_strided", "unfold", "repeat",
         "repeat_interleave", "broadcast_to", "is_complex", "hash", "iter", "contains", "reversed", "dir",
         "setstate", "reduce_ex", "deepcopy", "storage", "untyped_storage", "share_memory", "pin_memory",
         "get_device", "nelement", "ndimension", "copy", "fill", "zero", "requires_grad_", "normal",
         "uniform", "copy_", "fill_", "zero_", "normal_", "uniform_", "detach_", "is_leaf", "grad_fn",
         "shape", "dtype", "device", "ndim", "T", "mT", "H", "mH", "data", "grad", "layout", "names"}
_NAMES = {}         # func -> op kind, or None (not recorded)


def _op_name(func):
    try:
        return _NAMES[func]
    except KeyError:
        pass
    except TypeError:           # unhashable callables: name them every time
        return _name_of(func)
    n = _NAMES[func] = _name_of(func)
    return n


def _name_of(func):
    name = getattr(func, "__name__", "") or ""
    inplace = name.endswith("_") and not name.startswith("__")
    core = name.strip("_")
    if not core or core in _SKIP or name in _SKIP or name.startswith("__get") or name.startswith("__set"):
        return None
    if inplace and core in _SKIP:
        return None
    return _ALIASES.get(core, core)


# per op kind: the names of its positional arguments; the first is the activation, tensors among
# the others are parameters (read for the rules, not recorded as inputs)
_SIGNATURES = {
    "linear": ("input", "weight", "bias"),
    "conv1d": ("input", "weight", "bias", "stride", "padding", "dilation", "groups"),
    "conv2d": ("input", "weight", "bias", "stride", "padding", "dilation", "groups"),
    "conv3d": ("input", "weight", "bias", "stride", "padding", "dilation", "groups"),
    "layer_norm": ("input", "normalized_shape", "weight", "bias", "eps"),
    "rms_norm": ("input", "normalized_shape", "weight", "eps"),
    "group_norm": ("input", "num_groups", "weight", "bias", "eps"),
    "batch_norm": ("input", "running_mean", "running_var", "weight", "bias", "training", "momentum", "eps"),
    "instance_norm": ("input", "running_mean", "running_var", "weight", "bias", "use_input_stats",
                      "momentum", "eps"),
    "embedding": ("input", "weight", "padding_idx", "max_norm", "norm_type", "scale_grad_by_freq", "sparse"),
    "dropout": ("input", "p", "training", "inplace"),
    "dropout1d": ("input", "p", "training", "inplace"),
    "dropout2d": ("input", "p", "training", "inplace"),
    "dropout3d": ("input", "p", "training", "inplace"),
    "softmax": ("input", "dim"),
    "log_softmax": ("input", "dim"),
    "leaky_relu": ("input", "negative_slope", "inplace"),
    "elu": ("input", "alpha", "inplace"),
    "gelu": ("input",),
    "max_pool1d": ("input", "kernel_size", "stride", "padding", "dilation"),
    "max_pool2d": ("input", "kernel_size", "stride", "padding", "dilation"),
    "avg_pool1d": ("input", "kernel_size", "stride", "padding"),
    "avg_pool2d": ("input", "kernel_size", "stride", "padding"),
    "sdpa": ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale"),
}
_PARAM_ARGS = {"weight", "bias", "running_mean", "running_var"}
_SCALAR_PARAMS = {"p", "training", "eps", "dim", "negative_slope", "alpha", "stride", "padding", "dilation",
                  "groups", "kernel_size", "normalized_shape", "num_groups", "momentum", "dropout_p",
                  "is_causal", "scale", "padding_idx", "use_input_stats"}
SATURATING_OPS = {"tanh": "tanh", "sigmoid": "sigmoid", "softmax": "softmax", "hardtanh": "tanh",
                  "softsign": "tanh"}


def _bind(op, args, kwargs):
    """(named arguments, activation inputs) of one op call."""
    sig = _SIGNATURES.get(op)
    if sig is None:
        named = dict(kwargs)
        ins = [a for a in args if isinstance(a, _torch.Tensor)]
        ins += [v for v in kwargs.values() if isinstance(v, _torch.Tensor)]
        return named, ins
    named = dict(zip(sig, args))
    named.update(kwargs)
    if "input" not in named and args:
        named["input"] = args[0]
    if op == "sdpa":
        ins = [named.get(k) for k in ("query", "key", "value")]
        return named, [t for t in ins if isinstance(t, _torch.Tensor)]
    x = named.get("input")
    return named, [x] if isinstance(x, _torch.Tensor) else []


def _first_tensor(obj):
    T = _torch.Tensor
    if isinstance(obj, T):
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


# ------------------------------------------------------------------ statistics of one torch tensor
def _host_view(t):
    """A zero-copy NumPy view of a C-contiguous float32/float64 CPU tensor, else None."""
    if t.device.type != "cpu" or t.dtype not in (_torch.float32, _torch.float64) or not t.is_contiguous():
        return None
    if t.is_conj() or t.is_neg():
        return None
    return t.detach().numpy()


def torch_summary(t):
    """:func:`varlens.lens.records.summarize` computed by torch ops on ``t``'s own device (float64
    accumulation), returning the same tuple; five scalars (and, where a value is not finite, the
    NaN/Inf counts) are copied to the host."""
    torch = _torch
    x = t.detach()
    if x.dim() == 0:
        x = x.reshape(1, 1)
    x = x.reshape(x.shape[0], -1)
    m, width = x.shape
    n = m * width
    if n == 0:
        return (0, 0.0, 0.0, 0.0, 0, 0, 0, (0, 0.0, 0.0), width)
    xd = x.to(_F64)
    rs = xd.sum(dim=1)
    rq = (xd * xd).sum(dim=1)
    v = torch.stack((rs.sum(), rq.sum(), rq.dot(rq), xd.abs().amax(), (xd == 0).sum().to(_F64))).tolist()
    s1, s2, ss, amax, zeros = v
    if math.isfinite(s1) and math.isfinite(s2) and math.isfinite(ss):
        ww = float(width * width)
        mean = s1 / n
        rows = (m, s2 / width / m, max(ss / ww - s2 * s2 / (ww * m), 0.0))
        return (n, mean, max(s2 - n * mean * mean, 0.0), amax, int(zeros), 0, 0, rows, width)
    fin = torch.isfinite(xd)
    nan = int(torch.isnan(xd).sum())
    nfin = int(fin.sum())
    inf = n - nfin - nan
    rqf = rq[torch.isfinite(rq)] / width
    rows = (int(rqf.numel()), 0.0, 0.0)
    if rows[0]:
        rmean = float(rqf.mean())
        rows = (rows[0], rmean, float(((rqf - rmean) ** 2).sum()))
    if nfin == 0:
        return (0, 0.0, 0.0, 0.0, 0, nan, inf, rows, width)
    xf = xd[fin]
    mean = float(xf.mean())
    m2 = float(((xf - mean) ** 2).sum())
    return (nfin, mean, m2, float(xf.abs().max()), int((xf == 0).sum()), nan, inf, rows, width)


def torch_moments(t):
    """(n, mean, E[x^2]) of a torch tensor (None if empty or not finite), for input moments."""
    a = _host_view(t)
    if a is not None:
        return R.moments(a)
    n = t.numel()
    if n == 0:
        return None
    xd = t.detach().reshape(-1).to(_F64)
    s1, s2 = _torch.stack((xd.sum(), xd.dot(xd))).tolist()
    if not (math.isfinite(s1) and math.isfinite(s2)):
        return None
    return n, s1 / n, s2 / n


def _saturation_torch(stats, t, kind):
    """Stats._saturation by torch ops (counts and entropy sums only leave the device)."""
    torch = _torch
    x = t.detach()
    lv = R.SAT_LEVEL
    if kind == "tanh":
        stats.sat += int((x.abs() > lv).sum())
        stats.sat_n += x.numel()
    elif kind == "sigmoid":
        stats.sat += int(((x > lv) | (x < 1 - lv)).sum())
        stats.sat_n += x.numel()
    elif kind == "softmax":
        p = x.reshape(-1, x.shape[-1]).to(_F64)
        stats.sat += int((p.amax(dim=1) > lv).sum())
        stats.sat_n += p.shape[0]
        ent = -(torch.where(p > 0, p * torch.log(p.clamp_min(1e-300)), torch.zeros((), dtype=_F64,
                                                                                   device=p.device))).sum(dim=1)
        ent = ent[torch.isfinite(ent)]
        stats.entropy_sum += float(ent.sum())
        stats.entropy_n += int(ent.numel())


def _numerics_torch(stats, t):
    """Stats.update_numerics by torch ops on a strided sample of the tensor."""
    flat = t.detach().reshape(-1)
    if not flat.is_floating_point() or flat.numel() == 0:
        return
    step = max(1, flat.numel() // R.NUMERICS_SAMPLE)
    s = flat[::step].abs().to(_F64)
    nz = s > 0
    c = _torch.stack(((nz & (s < R.F16_TINY)).sum(), (nz & (s < R.BF16_TINY)).sum(), (s > R.F16_MAX).sum())).tolist()
    stats.tiny16 += int(c[0])
    stats.tiny_bf16 += int(c[1])
    stats.over16 += int(c[2])
    stats.num_n += int(s.numel())


def _update_stats(stats, t, kind, summary):
    """Merge torch tensor ``t`` into ``stats`` (a records.Stats) exactly as Stats.update does for an array."""
    a = _host_view(t)
    if a is not None:
        stats.update(a, kind, summary)
        return
    stats.calls += 1
    stats.shape = tuple(t.shape)
    if t.numel() == 0:
        return
    stats.merge(summary if summary is not None else torch_summary(t))
    if kind is not None:
        _saturation_torch(stats, t, kind)


def _update_param(stats, t):
    """Stats.update_param for a torch parameter or gradient."""
    a = _host_view(t)
    if a is not None:
        stats.update_param(a)
        return
    stats.calls += 1
    stats.shape = tuple(t.shape)
    if t.numel() == 0:
        return
    sm = torch_summary(t.reshape(1, -1))
    n, mean, m2, amax = sm[0], sm[1], sm[2], sm[3]
    stats._nan += sm[5]
    stats._inf += sm[6]
    if n:
        if stats._pend:
            stats._fold()
        stats._merge_moments(n, mean, m2)
        stats._amax = max(stats._amax, amax)
        stats._width = n


def _summary_of(t):
    a = _host_view(t)
    return R.summarize(a) if a is not None else torch_summary(t)


def _unit_axis(kind):
    """The axis of an output's units for the per-unit second moments (None: not a mixing layer)."""
    if kind in ("Linear", "linear", "LayerNorm", "layer_norm", "RMSNorm", "rms_norm", "Embedding", "embedding"):
        return -1
    if kind.startswith("Conv") or kind.startswith("conv") or kind.startswith("BatchNorm") or kind in (
            "batch_norm", "GroupNorm", "group_norm"):
        return 1
    return None


def _add_units(rec, t, axis):
    """Record.add_units for a torch tensor (by torch ops off the host)."""
    a = _host_view(t)
    if a is not None:
        rec.add_units(a, axis)
        return
    if t.dim() == 0 or not t.is_floating_point():
        return
    x = t.detach().movedim(axis, -1).reshape(-1, t.shape[axis]).to(_F64)
    u = ((x * x).sum(dim=0) / x.shape[0]).cpu().numpy()
    if rec.unit_q is None or rec.unit_q.shape != u.shape:
        rec.unit_q, rec.unit_calls = u, 1
    else:
        rec.unit_q = rec.unit_q + u
        rec.unit_calls += 1


def _group_var(kind, module_or_shape, t):
    """Mean variance each normalisation group sees (BatchNorm: per channel; LayerNorm: per row)."""
    x = t.detach().to(_F64)
    if kind.startswith("BatchNorm") or kind == "batch_norm":
        axes = (0,) + tuple(range(2, x.dim()))
    else:
        shape = module_or_shape if isinstance(module_or_shape, (tuple, list)) else getattr(
            module_or_shape, "normalized_shape", (x.shape[-1],))
        k = len(tuple(shape)) if not isinstance(shape, int) else 1
        axes = tuple(range(x.dim() - k, x.dim()))
    return float(x.var(dim=axes, unbiased=False).mean())


# ------------------------------------------------------------------ the lens
class TorchLens(Lens):
    """The variance lens attached to a ``torch.nn.Module`` (same records, rows, JSON and plots).

    Made by ``varlens.lens.Lens(model)`` when ``model`` is a torch module; the arguments are
    Lens's, plus ``ops`` (default True: record every op the forward runs, not only module calls).
    """

    def __init__(self, model, every=1, modules="all", grads=True, weights=True, weight_every=10, ops=True,
                 **options):
        if is_compiled(model):
            raise TypeError("Lens: a torch.compile'd model (OptimizedModule) is not supported: the lens's "
                            "hooks and function mode are not seen inside compiled graphs. Pass the eager "
                            "module, model._orig_mod, to measure it (and train that one while the lens is on)")
        if not isinstance(every, int) or every < 1:
            raise ValueError(f"Lens: every must be a positive int (sample every N steps), got {every!r}")
        if not isinstance(weight_every, int) or weight_every < 1:
            raise ValueError(f"Lens: weight_every must be a positive int, got {weight_every!r}")
        _bind_torch()
        self.model, self.every, self.grads, self.weights = model, every, grads, weights
        self.weight_every = weight_every
        self.record_ops = ops
        self.options = options
        self.framework = "torch"
        self.records = {}
        self.steps_seen = 0
        self.steps_sampled = 0
        self._active = True
        self._handles = []
        self._calls = {}
        self._produced = {}       # id(tensor) -> (tensor, version, key)   within one pass
        self._summ = {}           # id(tensor) -> (tensor, version, summary)
        self._gsumm = {}          # id(grad) -> (grad, summary)
        self._stack = []          # paths of the modules running now (innermost last)
        self._pre = []            # input moments taken before an in-place module ran
        self._order = 0
        self._mode = None
        self._taps = 0
        self._first_bad = {}
        root = model
        for name, mod in model.named_modules():
            path = name or "(model)"
            rec_it = True
            if modules == "leaves" and any(True for _ in mod.children()):
                rec_it = False
            elif callable(modules) and not modules(name, mod):
                rec_it = False
            if mod is root:
                self._handles.append(mod.register_forward_pre_hook(self._root_pre))
                self._handles.append(mod.register_forward_hook(self._make_post(path, rec_it, root=True),
                                                               always_call=True))
            else:
                self._handles.append(mod.register_forward_pre_hook(self._make_pre(path)))
                self._handles.append(mod.register_forward_hook(self._make_post(path, rec_it), always_call=True))

    # ------------------------------------------------------------------ module hooks
    def _root_pre(self, module, args):
        self._begin_pass()
        self._stack.append("(model)")
        if self._active:
            self._pre_module(module, args)
            if self.record_ops:
                self._mode = _MODE(self)
                self._mode.__enter__()
        return None

    def _make_pre(self, path):
        def pre(module, args):
            self._stack.append(path)
            if self._active:
                self._pre_module(module, args)
            return None
        return pre

    def _pre_module(self, module, args):
        """Remember the input moments of an in-place module before it overwrites its input."""
        if getattr(module, "inplace", False):
            with _torch._C.DisableTorchFunction():
                x = _first_tensor(args)
                self._pre.append(self._input_moments(x) if x is not None else None)

    def _make_post(self, path, rec_it, root=False):
        def post(module, args, output):
            try:
                if self._active and rec_it:
                    with _torch._C.DisableTorchFunction():
                        self._record_module(path, module, args, output)
                elif self._active and getattr(module, "inplace", False) and self._pre:
                    self._pre.pop()
            finally:
                if self._stack:
                    self._stack.pop()
                if root:
                    self._end_pass()
            return None
        return post

    def _begin_pass(self):
        self._calls.clear()
        self._produced.clear()
        self._summ.clear()
        self._stack.clear()
        self._pre.clear()

    def _end_pass(self):
        """The model's forward returned (or raised): leave the function mode; the next call of a
        module is its first use again."""
        if self._mode is not None:
            mode, self._mode = self._mode, None
            mode.__exit__(None, None, None)
        self._calls.clear()
        self._produced.clear()
        self._summ.clear()
        self._stack.clear()
        self._pre.clear()

    # ------------------------------------------------------------------ records
    def _new_key(self, base):
        k = self._calls.get(base, 0)
        self._calls[base] = k + 1
        return base if k == 0 else f"{base}#{k}"

    def _get_record(self, key, path, level, kind, cls, module=None, op=None):
        rec = self.records.get(key)
        if rec is None:
            rec = self.records[key] = R.Record(key=key, path=path, level=level, kind=kind, op=op, cls=cls,
                                               order=self._order, module=module)
            self._order += 1
        return rec

    def _summary(self, t):
        """The summary of tensor ``t`` as it is now (memoised per tensor object and version)."""
        hit = self._summ.get(id(t))
        v = t._version
        if hit is not None and hit[0] is t and hit[1] == v:
            return hit[2]
        sm = _summary_of(t)
        self._summ[id(t)] = (t, v, sm)
        return sm

    def _input_moments(self, x):
        """(mean, E[x^2], producer key or None) of an input tensor as it is now."""
        hit = self._summ.get(id(x))
        if hit is not None and hit[0] is x and hit[1] == x._version:
            sm = hit[2]
            if sm[0] == 0:
                return None
            mean, q = sm[1], sm[2] / sm[0] + sm[1] * sm[1]
        else:
            mo = torch_moments(x)
            if mo is None:
                return None
            mean, q = mo[1], mo[2]
        prod = self._produced.get(id(x))
        key = prod[2] if prod is not None and prod[0] is x and prod[1] == x._version else None
        return mean, q, key

    def _note_input(self, rec, i, mom, shape):
        if mom is None:
            return
        mean, q, prod = mom
        inp = rec.input(i)
        inp.add(mean, q, tuple(shape))
        if prod is not None and prod != rec.key:
            if inp.producer is None:
                inp.producer = prod
            if i == 0 and rec.producer is None:
                rec.producer = prod
            p = self.records[prod]
            if rec.key not in p.consumers and not _is_ancestor(rec, p):
                p.consumers.append(rec.key)

    def _measure_output(self, rec, t, kind_sat):
        sm = self._summary(t)
        _update_stats(rec.out, t, kind_sat, sm)
        if sm[5] or sm[6]:
            rec.nonfinite.setdefault("forward", self.steps_seen)
        rec.rows = t.shape[0] if t.dim() else 1
        if self.grads and t.requires_grad:
            h = rec.grad_hook
            if h is None:
                h = rec.grad_hook = self._grad_hook(rec)
            t.register_hook(h)

    def _record_module(self, path, module, args, output):
        key = self._new_key(path)
        kind = module_kind(module)
        rec = self._get_record(key, path, "module", kind, type(module).__name__, module=module)
        if not rec.params:
            rec.params = _module_params(module)
        rec.params["training"] = bool(module.training)
        out = _first_tensor(output)
        inp = _first_tensor(args)
        pre = self._pre.pop() if getattr(module, "inplace", False) and self._pre else None
        if inp is not None and inp.is_floating_point():
            mom = pre if pre is not None else self._input_moments(inp)
            self._note_input(rec, 0, mom, inp.shape)
            if kind in R_NORMS:
                rec.inp_var_group = _group_var(kind, module, inp) if pre is None else rec.inp_var_group
        if out is None or not out.is_floating_point():
            return
        hit = self._produced.get(id(out))
        if hit is not None and hit[0] is out and hit[1] == out._version and self.records[hit[2]].level == "op":
            rec.source = hit[2]
        sat = _SAT_MODULES.get(kind)
        self._measure_output(rec, out, sat)
        ax = _unit_axis(kind)
        if ax is not None:
            _add_units(rec, out, ax)
        self._produced[id(out)] = (out, out._version, key)

    def _pre_op(self, op, func, args, kwargs):
        """Input moments of an in-place op, taken before it writes."""
        name = getattr(func, "__name__", "")
        if kwargs.get("inplace") or (name.endswith("_") and not name.startswith("__")) or name.startswith("__i"):
            x = args[0] if args and isinstance(args[0], _torch.Tensor) else None
            return self._input_moments(x) if x is not None else None
        return None

    def _record_op(self, op, func, args, kwargs, out, pre):
        t = _first_tensor(out)
        if t is None or not t.is_floating_point():
            return
        path = self._stack[-1] if self._stack else "(model)"
        key = self._new_key(f"{path}:{op}")
        rec = self._get_record(key, path, "op", op, getattr(func, "__name__", op).strip("_") or op, op=op)
        named, ins = _bind(op, args, kwargs)
        if not rec.arrays:
            for k in _PARAM_ARGS:
                v = named.get(k)
                if isinstance(v, _torch.Tensor):
                    rec.arrays[k] = _getter(v)
        for k in _SCALAR_PARAMS:
            if k in named and not isinstance(named[k], _torch.Tensor):
                rec.params[k] = _plain(named[k])
        if op == "dropout" or op.startswith("dropout"):
            rec.params.setdefault("training", True)
            rec.params.setdefault("p", 0.5)
        for i, x in enumerate(ins):
            if x is None or not x.is_floating_point():
                continue
            mom = pre if (i == 0 and pre is not None) else self._input_moments(x)
            self._note_input(rec, i, mom, x.shape)
        if op in ("add", "sub", "mul") and len(ins) >= 2 and ins[0].shape == ins[1].shape \
                and ins[0].is_floating_point() and ins[1].is_floating_point() and pre is None:
            c = _cross(ins[0], ins[1])
            if c is not None:
                rec.cross = (rec.cross * rec.cross_n + c) / (rec.cross_n + 1)
                rec.cross_n += 1
        if op in ("layer_norm", "batch_norm", "group_norm", "rms_norm") and ins:
            rec.inp_var_group = _group_var(op, named.get("normalized_shape", (ins[0].shape[-1],)), ins[0])
        self._measure_output(rec, t, SATURATING_OPS.get(op))
        ax = _unit_axis(op)
        if ax is not None:
            _add_units(rec, t, ax)
        self._produced[id(t)] = (t, t._version, key)
        if op == "sdpa":
            self._sdpa_internals(path, named)

    def _sdpa_internals(self, path, named):
        """Forward statistics of the attention logits and probabilities inside a fused
        scaled_dot_product_attention, recomputed under no_grad (the model's output is the fused op's)."""
        torch = _torch
        q, k = named.get("query"), named.get("key")
        if q is None or k is None:
            return
        with torch.no_grad():
            d = q.shape[-1]
            scale = named.get("scale")
            sc = 1.0 / math.sqrt(d) if scale is None else float(scale)
            kk = k
            if q.dim() == k.dim() and q.dim() >= 3 and q.shape[-3] != k.shape[-3] and named.get("enable_gqa"):
                kk = k.repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3)
            s = torch.matmul(q, kk.transpose(-2, -1)) * sc
            mask = named.get("attn_mask")
            L, S = s.shape[-2], s.shape[-1]
            if named.get("is_causal"):
                mask = torch.ones(L, S, dtype=torch.bool, device=s.device).tril()
            keep = None
            if isinstance(mask, torch.Tensor):
                if mask.dtype == torch.bool:
                    keep = mask.expand_as(s)
                    logits = s.masked_fill(~keep, float("-inf"))
                else:
                    logits = s + mask
            else:
                logits = s
            p = torch.softmax(logits, dim=-1)
            lk = self._new_key(f"{path}:sdpa.logits")
            lrec = self._get_record(lk, path, "op", "sdpa.logits", "sdpa.logits", op="sdpa.logits")
            lrec.params.update(scale=sc, d=d)
            vals = s[keep] if keep is not None else s          # the logits a query may attend to
            _update_stats(lrec.out, vals.reshape(1, -1) if keep is not None else vals, None, None)
            lrec.rows = s.shape[0]
            pk = self._new_key(f"{path}:sdpa.softmax")
            prec = self._get_record(pk, path, "op", "sdpa.softmax", "sdpa.softmax", op="sdpa.softmax")
            prec.params.update(dim=-1)
            _update_stats(prec.out, p.contiguous(), "softmax", None)
            prec.rows = p.shape[0]

    def _grad_hook(self, rec):
        def hook(g):
            hit = self._gsumm.get(id(g))
            if hit is not None and hit[0] is g:
                sm = hit[1]
            else:
                sm = _summary_of(g) if g.numel() else None
                self._gsumm[id(g)] = (g, sm)
            _update_stats(rec.grad, g, None, sm)
            if sm is not None and (sm[5] or sm[6]):
                rec.nonfinite.setdefault("backward", self.steps_seen)
            return None
        return hook

    def tap(self, name, tensor, kind=None):
        """Record a torch tensor that no module returns; returns it unchanged."""
        if not self._active:
            return tensor
        with _torch._C.DisableTorchFunction():
            key = self._new_key(name)
            rec = self._get_record(key, name, "tap", "tap", "tap")
            self._measure_output(rec, tensor, kind)
        return tensor

    # ------------------------------------------------------------------ steps
    def step(self):
        """End a training step (after backward): weight statistics, then the next step's sampling."""
        if self._active and self.weights and self.steps_sampled % self.weight_every == 0:
            with _torch._C.DisableTorchFunction():
                for rec in self.records.values():
                    if rec.level != "module" or rec.key != rec.path:
                        continue
                    w = getattr(rec.module, "weight", None)
                    if not isinstance(w, _torch.Tensor):
                        continue
                    _update_param(rec.weight, w)
                    rec.fan_in = math.prod(w.shape[1:]) if w.dim() > 1 else None
                    if w.grad is not None:
                        _update_param(rec.weight_grad, w.grad)
        if self._active:
            self.steps_sampled += 1
        self.steps_seen += 1
        self._begin_pass()
        self._gsumm.clear()
        self._active = (self.steps_seen % self.every) == 0

    def detach(self):
        """Remove every hook; the model then runs as if the lens had never been attached."""
        for h in self._handles:
            h.remove()
        self._handles.clear()
        if self._mode is not None:
            self._end_pass()
        self._begin_pass()
        self._gsumm.clear()
        self._active = False


R_NORMS = {"BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm", "GroupNorm", "RMSNorm", "InstanceNorm1d",
           "InstanceNorm2d"}
_SAT_MODULES = {"Tanh": "tanh", "Sigmoid": "sigmoid", "Hardtanh": "tanh", "Softsign": "tanh",
                "Softmax": "softmax", "Softmin": "softmax"}


def _is_ancestor(rec, prod):
    # a container's output is also its last child's output: the child is not its consumer
    return prod.path.startswith(rec.path + ".") or rec.path == "(model)"


def _getter(t):
    return lambda: t


def _plain(v):
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if isinstance(v, (tuple, list)):
        return tuple(_plain(x) for x in v)
    return str(v)


def _cross(a, b):
    """E[a*b] of two equal-shaped tensors (float64 accumulation), None if not finite."""
    va, vb = _host_view(a), _host_view(b)
    if va is not None and vb is not None:
        with np.errstate(over="ignore", invalid="ignore"):
            c = float(np.dot(va.reshape(-1).astype(np.float64, copy=False), vb.reshape(-1).astype(np.float64,
                                                                                                    copy=False)))
        c /= max(va.size, 1)
    else:
        c = float((a.detach().reshape(-1).to(_F64) * b.detach().reshape(-1).to(_F64)).mean())
    return c if math.isfinite(c) else None


_MODULE_ATTRS = ("p", "eps", "stride", "padding", "dilation", "kernel_size", "groups", "negative_slope",
                 "normalized_shape", "num_groups", "momentum", "track_running_stats", "affine", "dim",
                 "in_features", "out_features", "in_channels", "out_channels", "num_heads", "embed_dim",
                 "inplace", "alpha", "approximate")


def _module_params(module):
    """The configuration the rules read, from a torch module's attributes (the same names as varlens's)."""
    out = {}
    for a in _MODULE_ATTRS:
        v = getattr(module, a, None)
        if v is not None and not callable(v) and not isinstance(v, _torch.Tensor):
            out[a] = _plain(v)
    return out

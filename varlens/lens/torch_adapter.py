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
  ``name#k`` for the k-th extra call in one forward pass).  The hooks are registered only for
  sampled steps (``step()`` registers them before a sampled step and removes them after it), so
  between samples the model runs exactly as without the lens (a Sequential model takes the
  Sequential path below instead).
* **Ops**: while the model's forward runs on a sampled step, a ``torch.overrides.TorchFunctionMode``
  sees every function the code calls (``F.linear``, ``x + y``, ``torch.softmax``,
  ``F.scaled_dot_product_attention`` ...), so functional code, residual additions and attention are
  recorded, not only module outputs, each under the op name the varlens recorder gives the same
  maths (views, splits and casts included: ``transpose`` -> ``permute``, ``split`` -> one
  ``getitem`` per piece).  The mode is only entered on sampled steps: on the others the model runs
  as it would without the lens.
  Under the mode ``has_torch_function`` is true, which turns off ``nn.MultiheadAttention``'s and
  ``nn.TransformerEncoderLayer``'s fused inference paths on sampled steps: the same maths run through
  ``F.multi_head_attention_forward`` (one op row: its internals are C++ and Python code the mode
  does not see).
* **The Sequential path**: a model that is a tree of ``Sequential`` containers around modules whose
  forward is one torch function (``Linear``, ``ReLU``, ``Tanh``, ``Dropout``, ``Flatten`` ...:
  ``_LEAF_CALLS``) needs neither module hooks nor the function mode.  On a sampled step each
  Sequential's forward is replaced (an instance attribute, removed after the step) by
  :meth:`TorchLens._seq_forward`, which calls the children as ``Sequential.forward`` does and
  queues each call; the queue is recorded at the end of the model's forward (before an in-place
  leaf runs, which would overwrite its input), each leaf's op with the function, arguments and
  keywords the mode would have seen (the same records; tests/test_lens_torch.py checks both
  ways).  A pass that makes the same calls as the last one is recorded by :meth:`TorchLens._replay`
  from the records and links that pass made (tests/test_lens_torch.py checks it against the
  general path), so a sampled step of a plain MLP costs one read per tensor and a few stores.
* **Gradients**: a hook on each recorded output (not full backward module hooks, which fail on
  in-place ops), put in the output's hook dictionary on the autograd node that made it (what
  ``Tensor.register_hook`` installs, without its RemovableHandle; a node pre-hook where the tensor
  has hooks of its own, ``register_hook`` for a leaf); a hook registered before an in-place op
  receives the gradient with respect to the value before it, which is the value the forward
  statistics describe.  Each gradient is read when its hook is called (the backward kernel has
  just written it).  Under ``torch.no_grad`` nothing requires grad: forward rows only.
* **Statistics** are read where the tensor is.  A C-contiguous float32/float64 CPU tensor is read in
  place by the same compiled one-pass kernel the varlens recorder uses, so the two frameworks'
  numbers come from the same code: at its address, no array object made
  (:mod:`varlens.lens.torch_kernels`: the summary in one compiled call; on detail steps the
  summary, the headroom counts and the column sums behind per-unit, per-feature and per-channel
  moments in one call, once per tensor per pass, shared by the op and module records and by the
  next layer), through a zero-copy NumPy view where more is read.  Any other tensor (CUDA,
  float16/bfloat16, strided) is reduced by torch ops on its device, accumulating in float64, and only
  a handful of scalars per tensor are copied to the host (:func:`torch_summary`).  What some rules
  read about an op's input besides its moments (normalisation group variances, per-feature and
  per-channel means) comes from the varlens recorder's own NumPy functions, on the zero-copy view
  or, off the CPU, on a host copy of that input (norm layers every sampled step, the others on
  detail steps).
* ``torch.compile``: an ``OptimizedModule`` is refused with a TypeError that says to pass
  ``model._orig_mod`` (the eager module); hooks and a function mode inside compiled graphs are not
  something the lens can promise to see.
"""
from __future__ import annotations

import math
import types
from collections import OrderedDict

import numpy as np

from varlens.lens import records as R
from varlens.lens import torch_kernels as TK
from varlens.lens.kernels import col_sums, compiled, row_stats_at
from varlens.lens.probes import (ACT_NAMES, ACT_OPS, CROSS_OPS, LINEAR_LIKE, MIXING_KINDS, NORM_LIKE, OP_PARAM_NAMES,
                                 OP_SATURATING, POOL_LIKE, Lens, channel_moments, module_kind, module_selected,
                                 norm_stats, saturation_kind, unit_axis, window_correlation)

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
            pre = None
            if (_INPLACE.get(func) or kwargs.get("inplace")) and op not in _VIEWS and args and \
                    isinstance(args[0], torch.Tensor):
                pre = lens._input_moments(args[0])      # an in-place op: its input before it writes
            out = func(*args, **kwargs)
            lens._op(op, func, args, kwargs, out, pre)
            return out

    global _HOST_DTYPES
    _HOST_DTYPES = (torch.float32, torch.float64)
    if compiled():
        _NP_DTYPES.update({torch.float32: np.dtype(np.float32), torch.float64: _NP_F64})
        k = TK.kernels()
        if k:
            _SUMM.update({torch.float32: k[np.dtype(np.float32)][0], torch.float64: k[_NP_F64][0]})
    nn, F = torch.nn, torch.nn.functional
    # modules whose forward is one torch function: (function, args, kwargs) exactly as the function
    # mode would see that call (tests/test_lens_torch.py checks both ways give the same records);
    # a model made of these and Sequential containers only is recorded without the function mode
    _LEAF_CALLS.update({
        nn.Linear: lambda m, x: (F.linear, (x, m.weight, m.bias), {}),
        nn.ReLU: lambda m, x: (F.relu, (x,), {"inplace": m.inplace}),
        nn.Tanh: lambda m, x: (torch.tanh, (x,), {}),
        nn.Sigmoid: lambda m, x: (torch.sigmoid, (x,), {}),
        nn.GELU: lambda m, x: (F.gelu, (x,), {"approximate": m.approximate}),
        nn.SiLU: lambda m, x: (F.silu, (x,), {"inplace": m.inplace}),
        nn.LeakyReLU: lambda m, x: (F.leaky_relu, (x,), {"negative_slope": m.negative_slope, "inplace": m.inplace}),
        nn.Dropout: lambda m, x: (F.dropout, (x,), {"p": m.p, "training": m.training, "inplace": m.inplace}),
        nn.Flatten: lambda m, x: (torch.Tensor.flatten, (x, m.start_dim, m.end_dim), {}),
        nn.Identity: lambda m, x: None,
    })
    _CONTAINERS.add(nn.Sequential)
    global _SEQ_FORWARD
    _SEQ_FORWARD = nn.Sequential.forward
    _torch, _MODE, _F64 = torch, _OpMode, torch.float64


# ------------------------------------------------------------------ op names
# torch function name (underscores stripped) -> the op name the varlens recorder gives the same maths
_ALIASES = {"radd": "add", "iadd": "add", "rsub": "sub", "isub": "sub", "rmul": "mul", "imul": "mul",
            "truediv": "div", "rtruediv": "div", "itruediv": "div", "divide": "div", "multiply": "mul",
            "subtract": "sub", "rmatmul": "matmul", "bmm": "matmul", "mm": "matmul", "conv1d": "conv",
            "conv2d": "conv", "conv3d": "conv", "max_pool1d": "max_pool", "max_pool2d": "max_pool",
            "avg_pool1d": "avg_pool", "avg_pool2d": "avg_pool", "scaled_dot_product_attention": "sdpa",
            "dropout1d": "dropout", "dropout2d": "dropout", "dropout3d": "dropout", "pow": "pow", "rpow": "pow"}
# functions that rearrange, select or copy values, named as the varlens recorder names the Function
# doing the same (a reshape to the same shape, a contiguous() of a contiguous tensor, a cast to the
# same dtype and detach() run no Function there: here their output passes moments and producer on)
_SHAPE_AS = {"view": "reshape", "reshape": "reshape", "view_as": "reshape", "reshape_as": "reshape",
             "flatten": "reshape", "unflatten": "reshape", "squeeze": "reshape", "unsqueeze": "reshape",
             "transpose": "permute", "permute": "permute", "t": "permute", "movedim": "permute",
             "swapaxes": "permute", "swapdims": "permute", "contiguous": "clone", "clone": "clone",
             "getitem": "getitem", "narrow": "getitem", "select": "getitem", "split": "getitem",
             "chunk": "getitem", "unbind": "getitem", "tensor_split": "getitem", "split_with_sizes": "getitem",
             "expand": "expand", "expand_as": "expand", "broadcast_to": "expand", "to": "cast", "float": "cast",
             "double": "cast", "half": "cast", "bfloat16": "cast", "type": "cast", "type_as": "cast",
             "detach": "alias"}
_VIEWS = set(_SHAPE_AS.values())
# functions that describe, index, cast or create tensors: not rows
_SKIP = {"setitem", "size", "dim", "stride", "numel",
         "requires_grad", "get", "set", "cpu", "cuda", "data_ptr", "is_contiguous", "element_size",
         "is_floating_point", "storage_offset", "len", "repr", "format", "bool", "long", "int", "item",
         "tolist", "numpy", "new_zeros", "new_ones", "new_empty", "new_full", "new_tensor", "zeros_like",
         "ones_like", "empty_like", "full_like", "randn_like", "rand_like", "zeros", "ones", "empty", "full",
         "arange", "tensor", "randn", "rand", "randint", "tril", "triu", "eq", "ne", "lt", "le", "gt", "ge",
         "logical_not", "logical_and", "logical_or", "isfinite", "isnan", "isinf", "argmax", "argmin",
         "register_hook", "retain_grad", "backward", "apply", "as_strided", "unfold", "is_complex", "hash",
         "iter", "contains", "reversed", "dir",
         "setstate", "reduce_ex", "deepcopy", "storage", "untyped_storage", "share_memory", "pin_memory",
         "get_device", "nelement", "ndimension", "copy", "fill", "zero", "normal", "uniform", "is_leaf",
         "grad_fn", "shape", "dtype", "device", "ndim", "H", "mH", "data", "grad", "layout", "names",
         "has_torch_function", "is_tensor", "is_grad_enabled", "masked_fill", "where", "index_select",
         "gather", "nonzero", "sort", "topk", "any", "all"}
_NAMES = {}         # func -> op name, or None (not recorded)
_INPLACE = {}       # func -> True for an in-place function (relu_, add_, __iadd__)


def _op_name(func):
    try:
        return _NAMES[func]
    except KeyError:
        pass
    except TypeError:           # an unhashable callable: name it every time
        return _name_of(func)
    n = _NAMES[func] = _name_of(func)
    name = getattr(func, "__name__", "")
    _INPLACE[func] = (name.endswith("_") and not name.startswith("__")) or name.startswith("__i")
    return n


def _name_of(func):
    name = getattr(func, "__name__", "") or ""
    if name.startswith("__get") or name.startswith("__set"):
        return None
    core = name.strip("_")
    if not core or core in _SKIP:
        return None
    if core in _SHAPE_AS:
        return _SHAPE_AS[core]
    return _ALIASES.get(core, core)


# per op kind: the names of its positional arguments; the first is the activation, tensors among
# the others are parameters (read for the rules, not recorded as inputs)
_SIGNATURES = {
    "linear": ("input", "weight", "bias"),
    "conv": ("input", "weight", "bias", "stride", "padding", "dilation", "groups"),
    "layer_norm": ("input", "normalized_shape", "weight", "bias", "eps"),
    "rms_norm": ("input", "normalized_shape", "weight", "eps"),
    "group_norm": ("input", "num_groups", "weight", "bias", "eps"),
    "batch_norm": ("input", "running_mean", "running_var", "weight", "bias", "training", "momentum", "eps"),
    "instance_norm": ("input", "running_mean", "running_var", "weight", "bias", "use_input_stats",
                      "momentum", "eps"),
    "embedding": ("input", "weight", "padding_idx", "max_norm", "norm_type", "scale_grad_by_freq", "sparse"),
    "dropout": ("input", "p", "training", "inplace"),
    "softmax": ("input", "dim"),
    "log_softmax": ("input", "dim"),
    "leaky_relu": ("input", "negative_slope", "inplace"),
    "elu": ("input", "alpha", "inplace"),
    "gelu": ("input",),
    "max_pool": ("input", "kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices"),
    "avg_pool": ("input", "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"),
    "sdpa": ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale"),
}
_PARAM_NAMES = {"weight", "bias"}
_ACTIVATIONS = {"input", "query", "key", "value"}     # the arguments that carry the signal


def _first_tensor(obj):
    """The first tensor in a (nested) output or argument structure, or None (torch's own pytree walk)."""
    T = _torch.Tensor
    if isinstance(obj, T):
        return obj
    if obj.__class__ is tuple and obj and isinstance(obj[0], T):     # a module's positional arguments
        return obj[0]
    return next((x for x in _torch.utils._pytree.tree_leaves(obj) if isinstance(x, T)), None)


# ------------------------------------------------------------------ statistics of one torch tensor
def _host(t):
    """A host array of ``t`` for the recorder's NumPy helpers: the zero-copy view where there is
    one, else a copy (float32 for dtypes NumPy lacks)."""
    a = _host_view(t)
    if a is not None:
        return a
    x = t.detach()
    if x.dtype not in _HOST_DTYPES:
        x = x.float()
    return x.cpu().numpy()


def _host_view(t):
    """A zero-copy NumPy view of a C-contiguous float32/float64 CPU tensor, else None."""
    if not t.is_cpu or t.dtype not in _HOST_DTYPES or not t.is_contiguous():
        return None
    try:
        return t.detach().numpy()
    except RuntimeError:           # a lazy negation or conjugation view: read it by torch ops
        return None


_HOST_DTYPES = ()                   # torch.float32, torch.float64 once torch is bound
_NP_DTYPES = {}                     # torch dtype -> NumPy dtype of the tensors row_stats_at reads (with numba)
_NP_F64 = np.dtype(np.float64)
_SUMM = {}                          # torch dtype -> compiled summary at an address (torch_kernels; with numba)
_LEAF_CALLS = {}                    # module class -> f(module, input) -> (function, args, kwargs) or None
_CONTAINERS = set()                 # module classes whose forward only calls their children
_SEQ_FORWARD = None                 # nn.Sequential.forward, once torch is bound


def _summary_of_sums(s1, s2, ss, amax, zeros, m, width):
    """The summary tuple of :func:`varlens.lens.records.summarize` from a finite (m, width)
    matrix's sum, sum of squares, sum of squared row sums of squares, max |x| and zero count."""
    n = m * width
    ww = float(width * width)
    mean = s1 / n
    rows = (m, s2 / width / m, max(ss / ww - s2 * s2 / (ww * m), 0.0))    # per-row second moments
    return (n, mean, max(s2 - n * mean * mean, 0.0), amax, int(zeros), 0, 0, rows, width)


def _sums_at(t):
    """(row_stats tuple, rows, width) of a non-empty C-contiguous float32/float64 CPU tensor
    whose values are all finite, read in place at its address by
    :func:`varlens.lens.kernels.row_stats_at` (no NumPy view made); None for any other tensor."""
    dt = _NP_DTYPES.get(t.dtype)
    if dt is None or not t.is_cpu or not t.is_contiguous() or t.is_neg():
        return None
    n = t.numel()
    if not n:
        return None
    sh = t.shape
    m = sh[0] if sh else 1
    r = row_stats_at(t.data_ptr(), m, n // m, dt)
    if not r:
        return None
    # float32 data cannot overflow the float64 sums; float64 data above ~1e154 can
    if dt is _NP_F64 and not (math.isfinite(r[0]) and math.isfinite(r[1]) and math.isfinite(r[2])):
        return None
    return r, m, n // m


def _fast_summary(t):
    """The summary (:func:`varlens.lens.records.summarize`'s tuple) of a non-empty C-contiguous
    float32/float64 CPU tensor whose values are all finite, read at its address by one compiled
    call (:func:`varlens.lens.torch_kernels.summary_at`: the row pass and the arithmetic after
    it); None for any other tensor."""
    fn = _SUMM.get(t.dtype)
    if fn is None:
        got = _sums_at(t)              # without numba's entry points: the row kernel, then Python
        if got is None:
            return None
        r, m, w = got
        return _summary_of_sums(r[0], r[1], r[2], r[3], r[4], m, w)
    if not t.is_cpu or not t.is_contiguous() or t.is_neg():
        return None
    n = t.numel()
    if not n:
        return None
    sh = t.shape
    m = sh[0] if sh else 1
    r = fn(t.data_ptr(), m, n // m)
    return r if r[0] >= 0 else None


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
        return _summary_of_sums(s1, s2, ss, amax, zeros, m, width)
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
    got = _sums_at(t)
    if got is not None:
        r, m, w = got
        n = m * w
        return n, r[0] / n, r[1] / n
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


def _update_numerics(stats, t):
    """Stats.update_numerics for a torch tensor (by torch ops off the host)."""
    a = _host_view(t)
    if a is not None:
        stats.update_numerics(a)
        return
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


def _update_stats(stats, t, kind, summary, a=False):
    """Merge torch tensor ``t`` into ``stats`` (a records.Stats) exactly as Stats.update does for an
    array (``a``: its host view, or None, when the caller has it)."""
    if a is False:
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
    fn = _SUMM.get(t.dtype)
    if fn is not None and t.is_cpu and t.is_contiguous() and not t.is_neg():
        n = t.numel()
        if n:                            # read at its address, as Stats.update_param's row pass reads it
            m = t.shape[0] if t.dim() >= 2 else 1
            r = fn(t.data_ptr(), m, n // m)
            if r[0] >= 0:
                stats.calls += 1
                stats.shape = tuple(t.shape)
                if stats._pend:
                    stats._fold()
                stats._merge_moments(n, r[1], r[2])
                stats._amax = max(stats._amax, r[3])
                stats._width = n
                return
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


def _acc_params(p, names, count, values):
    """Accumulate per-feature vectors in params ``p`` as probes.Lens does (a new shape restarts
    the sums): ``names`` the sums of ``values``, ``count`` their number."""
    old = p.get(names[0])
    if old is None or old.shape != values[0].shape:
        for nm, v in zip(names, values):
            p[nm] = v
        p[count] = 1
    else:
        for nm, v in zip(names, values):
            p[nm] = p[nm] + v
        p[count] += 1


def _add_units(rec, t, axis, grad=False):
    """Record.add_units for a torch tensor that is not a host array (by torch ops)."""
    if t.dim() == 0 or not t.is_floating_point():
        return
    x = t.detach().movedim(axis, -1).reshape(-1, t.shape[axis]).to(_F64)
    rec.add_unit_q(((x * x).sum(dim=0) / x.shape[0]).cpu().numpy(), grad)


# ------------------------------------------------------------------ the lens
class TorchLens(Lens):
    """The variance lens attached to a ``torch.nn.Module`` (same records, rows, JSON and plots).

    Made by ``varlens.lens.Lens(model)`` when ``model`` is a torch module, with Lens's arguments.
    Each record is filled as :class:`varlens.lens.probes.Lens` fills it for a varlens model
    (module records share their output's statistics with the op that made it; op inputs are
    numbered by argument position; parameters are read at compare time), so the rows agree.
    """

    def __init__(self, model, every=1, modules="all", grads=True, weights=True, weight_every=10, ops=True):
        if is_compiled(model):
            raise TypeError("Lens: a torch.compile'd model (OptimizedModule) is not supported: the lens's "
                            "hooks and function mode are not seen inside compiled graphs. Pass the eager "
                            "module, model._orig_mod, to measure it (and train that one while the lens is on)")
        if not isinstance(every, int) or every < 1:
            raise ValueError(f"Lens: every must be a positive int (sample every N steps), got {every!r}")
        if not isinstance(weight_every, int) or weight_every < 1:
            raise ValueError(f"Lens: weight_every must be a positive int, got {weight_every!r}")
        _bind_torch()
        self.model, self.every, self.grads, self.weights, self.ops = model, every, grads, weights, bool(ops)
        self.weight_every = weight_every
        self.framework = "torch"
        self.records = {}
        self.steps_seen = 0
        self.steps_sampled = 0
        self.first_nonfinite = {"forward": None, "backward": None}
        self._active = True
        self._detail = True
        self._handles = []
        self._calls = {}
        self._produced = {}       # id(tensor) -> (tensor, version, key)          within one pass
        self._summ = {}           # id(tensor) -> (tensor, version, summary, host view)
        self._cols = {}           # id(tensor) -> (tensor, version, col_sums) on detail steps
        self._dc = {}             # id(tensor) -> (tensor, version, _dread's reads) on detail steps
        self._moms = {}           # id(tensor) -> (tensor, version, moments) of inputs no record produced
        self._alias = {}          # id(view) -> (view, base): views pass their base's moments and producer on
        self._gsumm = {}          # id(grad) -> (grad, summary)                    within one backward
        self._stack = []          # paths of the modules running now (innermost last)
        self._pre = []            # input moments of in-place modules, taken before they ran
        self._order = 0
        self._mode = None         # the function mode while it is entered
        self._mode_obj = None     # the lens's function mode (made on first use, entered once per sampled pass)
        self._in_pass = False     # the root module's forward is running on a sampled step
        self._detached = False
        # the function mode is only needed where a module's forward is code the lens cannot name;
        # a model made of one-function leaves (Linear, ReLU ...) in Sequential containers has each
        # leaf's op recorded from its module hook
        plain = all(type(m) in _LEAF_CALLS or type(m) in _CONTAINERS for m in model.modules())
        self._use_mode = self.ops and not plain
        # a Sequential tree of such leaves is run by the lens itself on a sampled step (no module
        # hook at all): each Sequential's forward is replaced, for that step, by _seq_forward
        self._seq = plain and type(model) in _CONTAINERS and not any("forward" in m.__dict__ for m in model.modules())
        self._hooks = []          # (module, pre hook, post hook), registered only while a step is sampled
        self._forwards = []       # (Sequential, its replacement forward) on the Sequential path
        self._info = {}           # id(module) -> (module, path, record it?, leaf call or None, container?)
        for name, mod in model.named_modules():
            path = name or "(model)"
            rec = module_selected(modules, name, mod)
            root = mod is model
            leaf = _LEAF_CALLS.get(type(mod)) if (self.ops and not self._use_mode) else None
            if self._seq:
                cont = type(mod) in _CONTAINERS
                self._info[id(mod)] = (mod, path, rec, leaf, cont)
                if cont:
                    self._forwards.append((mod, types.MethodType(self._seq_forward, mod)))
            else:
                self._hooks.append((mod, self._make_pre(path, root), self._make_post(path, rec, root, leaf)))
        self._attached = False
        self._queue = []          # (info, input, output, pre, leaf call, summary read at once): Sequential path (_flush)
        self._plans = {}          # per flush of a pass, per queued call: what _replay needs (made by a general _flush)
        self._seg = 0
        self._attach()

    def _attach(self):
        """Register the module hooks, or on the Sequential path put the lens's forward on each
        Sequential (for a sampled step; between samples the model runs bare)."""
        if self._attached or self._detached:
            return
        self._attached = True
        for mod, fwd in self._forwards:
            mod.__dict__["forward"] = fwd
        for mod, pre, post in self._hooks:
            self._handles.append(mod.register_forward_pre_hook(pre))
            self._handles.append(mod.register_forward_hook(post, always_call=True))

    def _release(self):
        if not self._attached:
            return
        self._attached = False
        for mod, fwd in self._forwards:
            if mod.__dict__.get("forward") is fwd:
                del mod.__dict__["forward"]
        for h in self._handles:
            h.remove()
        self._handles.clear()

    # ------------------------------------------------------------------ the Sequential path
    def _seq_forward(self, seq, input):
        """nn.Sequential.forward (each child called in turn through its ``__call__``, so the
        user's own hooks run) with the lens's bookkeeping: each leaf's (input, output) pair is
        queued and the queue is recorded at the end of the model's forward, in call order, as
        the module hooks and the leaves' op records would record it on the hook path (a queue
        read in one go keeps the lens's code and data warm between the layers' matrix products).
        The queue is recorded before a leaf that writes its input in place runs, so every
        tensor is read as it was made.  Bound to each Sequential with types.MethodType: a deep
        copy of the model made while it is in place binds it to the copy, which this lens does
        not know, and which then runs as plain Sequential."""
        info = self._info.get(id(seq))
        if info is None or info[0] is not seq or not self._active:
            return _SEQ_FORWARD(seq, input)
        root = seq is self.model
        q = self._queue
        if root:
            self._clear_pass()
            self._in_pass = True
        try:
            x = input
            get = self._info.get
            T = _torch.Tensor
            read = (self._read_now if self._detail else _fast_summary) if self._plans else None
            if root and read is not None and isinstance(input, T) and input.is_floating_point():
                self._input_moments(input)  # the model's input, read before the first layer reads it
            for child in seq._modules.values():
                ci = get(id(child))
                if ci is None or ci[0] is not child or ci[4]:
                    x = child(x)            # a container queues itself (its own _seq_forward)
                    continue
                pre = None
                if child.__dict__.get("inplace") is True:   # it overwrites its input: read that now
                    self._flush()
                    with _torch._C.DisableTorchFunction():
                        t = _first_tensor((x,))
                        pre = self._input_moments(t) if t is not None else None
                y = child(x)
                # read while the output is in cache, where the pass will be replayed
                q.append((ci, x, y, pre, ci[3] if self._in_pass else None,
                          read(y) if (read is not None and isinstance(y, T)) else None))
                x = y
            q.append((info, input, x, None, None, None))
            if root or not self._in_pass:
                self._flush()
            return x
        finally:
            if root:
                self._queue.clear()
                self._end_pass()

    def _flush(self):
        """Record the queued module calls of the Sequential path, in call order: a leaf's op (the
        function its forward runs, with its arguments as the function mode would see them),
        then its module call; a Sequential's own call after its children's.  A pass that makes
        the same calls as the last one recorded here (the usual case: a Sequential runs the same
        layers every step) is recorded by :meth:`_replay`, from the records and links that pass
        left (on a detail step with its extra reads, :meth:`_replay_detail`); anything unusual
        takes the general path below."""
        q = self._queue
        if not q:
            return
        seg = self._seg                 # the pass's flushes so far (an in-place leaf splits a pass)
        self._seg = seg + 1
        with _torch._C.DisableTorchFunction():
            plan = self._plans.get(seg)
            if plan is not None and len(plan) == len(q) and \
                    all(e[0] is p[0] for e, p in zip(q, plan)):
                self._replay(q, plan)
            else:
                self._plans[seg] = [(e[0], self._flush_one(e)) for e in q]
        q.clear()

    def _flush_one(self, entry):
        """One queued call by the general path; returns what :meth:`_replay` needs to record the
        same call again (None: the general path again)."""
        info, x, y, pre, leaf, _ = entry
        T = _torch.Tensor
        mod, path = info[0], info[1]
        calls = self._calls
        k0 = calls.get(path, 0)
        st = self._stack
        opplan = None
        st.append(path)
        if leaf is not None and y is not None and isinstance(x, T):
            call = leaf(mod, x)
            if call is not None:
                func, fargs, fkw = call
                op = _op_name(func)
                name = path + ":" + op
                k = calls.get(name, 0)
                self._op(op, func, fargs, fkw, y, pre)
                hit = self._produced.get(id(y))
                if op in _REPLAY_OPS and hit is not None and hit[0] is y and calls.get(name, 0) == k + 1:
                    opplan = (name, k, self.records[hit[2]], op, bool(fkw) or op in _PARAMS_EVERY_CALL)
        st.pop()
        if not info[2] or y is None:
            return None
        self._record_module(path, mod, (x,), y, pre)
        hit = self._produced.get(id(y))
        if hit is None or hit[0] is not y or calls.get(path, 0) != k0 + 1 or pre is not None:
            return None
        mrec = self.records[hit[2]]
        if info[4]:                      # a Sequential: its output is its last child's
            return (None, path, k0, mrec) if mrec.source is not None else None
        if opplan is None and leaf is None and mrec.source is None and isinstance(x, T) and y is not x:
            return (False, None, None, None, False, path, k0, mrec, mrec.kind in _SHAPED)   # ops=False
        if opplan is None or mrec.source != opplan[2].key:
            return None
        return opplan + (path, k0, mrec, mrec.kind in _SHAPED)

    def _replay(self, q, plan):
        """A queued pass that makes the calls of the pass that made ``plan``: per leaf, the output
        is read once (at its address) and its statistics, row count, input moments, shapes and
        gradient hook go into the records that pass made; producers, consumers and sources are
        links that pass made already.  The call counts and the per-pass caches are kept as the
        general path keeps them, and the general path takes any call that does not fit: an
        in-place leaf, a view, an output that is not a finite float CPU tensor, a leaf that has
        become a different call."""
        calls = self._calls
        produced, summ = self._produced, self._summ
        T = _torch.Tensor
        last = None                      # (output, its mean, its second moment) of the last leaf
        detail = self._detail
        grads = self.grads
        for entry, (_, p) in zip(q, plan):
            info, x, y, pre, leaf, sums = entry
            if p is None or not isinstance(y, T) or not isinstance(x, T):
                self._flush_one(entry)
                last = None
                continue
            if p[0] is None:             # a Sequential's own call
                _, path, km, mrec = p
                hit = produced.get(id(y))
                if calls.get(path, 0) != km or hit is None or hit[0] is not y:
                    self._flush_one(entry)
                    last = None
                    continue
                calls[path] = km + 1
                mean, mq, _ = self._input_moments(x)
                mrec.rows = y.shape[0] if y.dim() else 1
                mrec.inputs[0].add(mean, mq, tuple(x.shape))
                produced[id(y)] = (y, y._version, mrec.key)
                continue
            name, k, rec, op, every, path, km, mrec, shaped = p
            own = name is False          # a module record of its own (no op records: ops=False)
            sm = None
            if pre is None and y is not x and calls.get(path, 0) == km and \
                    (own or (leaf is not None and calls.get(name, 0) == k)):
                sm = sums if sums is not None else self._read_now(y)
            if sm is None:
                self._flush_one(entry)
                last = None
                continue
            if not own:
                calls[name] = k + 1
            calls[path] = km + 1
            summ[id(y)] = (y, y._version, sm, False)
            if last is not None and last[0] is x and not detail:
                mean, mq = last[1], last[2]
            else:
                mean, mq, prev = self._input_moments(x)
            last = (y, sm[1], sm[2] / sm[0] + sm[1] * sm[1])
            xshape = tuple(x.shape)
            r = mrec if own else rec
            out = r.out
            if r.sat_kind is None:       # _replay_out inline: Stats.update without the array
                out.calls += 1
                out.shape = yshape = tuple(y.shape)
                out.merge(sm)
                rows = r.rows = yshape[0] if yshape else 1
                if grads and y.requires_grad:
                    self._grad_prehook(r, y)
            else:
                rows = self._replay_out(r, y, sm)
            if not own:
                # the op record, as _record_one fills it
                rec.inputs[0].add(mean, mq, xshape)
                if every:
                    if op in _SHAPE_PARAMS_ONLY:
                        rec.params["in_shape"] = xshape
                        rec.params["out_shape"] = tuple(y.shape)
                    else:
                        _, fargs, fkw = leaf(info[0], x)
                        self._op_params(rec, op, _named(op, fargs, fkw), fkw, y)
                # the module record, as _record_module fills it (its statistics are the op's objects)
                mrec.rows = rows
            if shaped:
                mrec.params["in_shape"] = xshape
            mrec.inputs[0].add(mean, mq, xshape)
            if detail:
                self._replay_detail(mrec, None if own else rec, x, y, prev)
            produced[id(y)] = (y, y._version, mrec.key)

    def _read_now(self, t):
        """The summary of tensor ``t`` read at its address (:func:`_fast_summary`), on a detail
        step together with its other detail reads (:meth:`_dread`); None where that does not
        apply (the general path reads it then)."""
        if self._detail:
            d = self._dread(t)
            return None if d is None else d[0]
        return _fast_summary(t)

    def _dread(self, t, cols=True):
        """On a detail step: (summary or None where a value is not finite, headroom counts, column
        sums of ``t`` seen as (-1, last axis)) of a C-contiguous float32/float64 CPU tensor of 2 or
        more dimensions, read in one compiled call at its address
        (:func:`varlens.lens.torch_kernels.detail_at`: what :func:`varlens.lens.records.summarize`,
        Stats.update_numerics and kernels.col_sums give on its host view), once per tensor version
        per pass (per backward pass for gradients); None for any other tensor.  ``cols=False``:
        the column sums are not needed (None in the result unless made already)."""
        dc = self._dc
        key = id(t)
        hit = dc.get(key)
        v = t._version
        if hit is not None and hit[0] is t and hit[1] == v and (hit[2] is None or not cols or hit[2][2] is not None):
            return hit[2]
        got = None
        dt = _NP_DTYPES.get(t.dtype)
        if dt is not None and _SUMM and t.dim() >= 2 and t.is_cpu and t.is_contiguous() and not t.is_neg():
            n = t.numel()
            if n:
                sh = t.shape
                got = TK.detail_at(t.data_ptr(), sh[0], n // sh[0], sh[-1], dt, 3 if cols else 0)
        dc[key] = (t, v, got)
        return got

    def _numerics(self, stats, t):
        """Stats.update_numerics of tensor ``t`` (the headroom counts of :meth:`_dread` where it
        applies)."""
        d = self._dread(t, cols=False)
        if d is None:
            _update_numerics(stats, t)
            return
        h = d[1]
        stats.tiny16 += h[0]
        stats.tiny_bf16 += h[1]
        stats.over16 += h[2]
        stats.num_n += h[3]

    def _replay_detail(self, mrec, rec, x, y, prev):
        """A replayed leaf's reads on a detail step, besides the ordinary replay's: the output's
        numerics (_measure), the unit moments of a linear output (_record_one, _record_module)
        and the input's per-feature or per-channel moments (_note_input), for the op record
        ``rec`` (None with ops=False) and the module record ``mrec``; ``prev``: the record that
        made input ``x``."""
        self._numerics((mrec if rec is None else rec).out, y)
        if rec is not None:
            self._detail_input(rec, x, prev)
            if rec.kind in ("linear", "conv"):
                self._units(rec, y, unit_axis(y, rec.kind == "conv"))
        if mrec.kind in LINEAR_LIKE:
            self._units(mrec, y, unit_axis(y, mrec.kind.startswith("Conv")))
        self._detail_input(mrec, x, prev)

    def _replay_out(self, rec, y, sm):
        """What _measure does with output ``y`` (summary ``sm``, finite), less a detail step's
        numerics (:meth:`_replay_detail`); returns the row count."""
        out = rec.out
        if rec.sat_kind is None:         # Stats.update without the array (its shape and the summary)
            out.calls += 1
            out.shape = tuple(y.shape)
            out.merge(sm)
        else:
            out.update(_host_view(y), rec.sat_kind, sm)
        rows = rec.rows = y.shape[0] if y.dim() else 1
        if self.grads and y.requires_grad:
            self._grad_prehook(rec, y)
        return rows

    # ------------------------------------------------------------------ module hooks
    def _make_pre(self, path, root):
        def pre(module, args):
            if root:
                self._clear_pass()
            if not self._active:
                return None
            self._stack.append(path)
            if module.__dict__.get("inplace") is True:       # its input will be overwritten: read it now
                with _torch._C.DisableTorchFunction():
                    x = _first_tensor(args)
                    self._pre.append(self._input_moments(x) if x is not None else None)
            if root:
                self._in_pass = True
                if self._use_mode and self._mode is None:
                    if self._mode_obj is None:
                        self._mode_obj = _MODE(self)
                    self._mode = self._mode_obj
                    self._mode.__enter__()
            return None
        return pre

    def _make_post(self, path, rec, root, leaf):
        def post(module, args, output):
            try:
                if self._active:
                    st = self._stack
                    pre = self._pre.pop() if module.__dict__.get("inplace") is True and self._pre else None
                    with _torch._C.DisableTorchFunction():
                        if leaf is not None and self._in_pass and output is not None and st and st[-1] == path \
                                and args and isinstance(args[0], _torch.Tensor):
                            call = leaf(module, args[0])
                            if call is not None:      # the op the function mode would have seen
                                func, fargs, fkw = call
                                self._op(_op_name(func), func, fargs, fkw, output, pre)
                        if st and st[-1] == path:
                            st.pop()
                        elif path in st:                      # a child raised past its hook: unwind
                            del st[st.index(path):]
                        if rec and output is not None:
                            self._record_module(path, module, args, output, pre)
            finally:
                if root:
                    self._end_pass()
            return None
        return post

    def _clear_pass(self):
        self._seg = 0
        self._queue.clear()
        self._calls.clear()
        self._produced.clear()
        self._summ.clear()
        self._cols.clear()
        self._dc.clear()
        self._moms.clear()
        self._alias.clear()
        self._stack.clear()
        self._pre.clear()

    def _end_pass(self, *args):
        """The model's forward returned (or raised): leave the function mode; the next call of a
        module is its first use again (several passes per step merge into the same records)."""
        self._in_pass = False
        if self._mode is not None:
            mode, self._mode = self._mode, None
            mode.__exit__(None, None, None)
        self._clear_pass()
        return None

    # ------------------------------------------------------------------ bookkeeping
    def _new(self, key, **kw):
        rec = self.records[key] = R.Record(key, order=self._order, **kw)
        self._order += 1
        return rec

    def _summary(self, t):
        """(summary, host view or None) of ``t`` as it is now, once per tensor object and version
        per pass."""
        hit = self._summ.get(id(t))
        v = t._version
        if hit is not None and hit[0] is t and hit[1] == v:
            a = hit[3]
            if a is False:               # summarised at its address (_replay): the view on demand
                a = _host_view(t)
                self._summ[id(t)] = (t, v, hit[2], a)
            return hit[2], a
        a = _host_view(t)
        sm = R.summarize(a) if a is not None else torch_summary(t)
        self._summ[id(t)] = (t, v, sm, a)
        return sm, a

    def _base(self, x):
        """The recorded tensor a view was made from (views are not rows: they pass moments on)."""
        while True:
            hit = self._alias.get(id(x))
            if hit is None or hit[0] is not x:
                return x
            x = hit[1]

    def _input_moments(self, x):
        """(mean, E[x^2], producer key or None) of input ``x`` as it is now; None if not finite."""
        x = self._base(x)
        prod = self._produced.get(id(x))
        key = prod[2] if prod is not None and prod[0] is x and prod[1] == x._version else None
        hit = self._summ.get(id(x))
        if hit is not None and hit[0] is x and hit[1] == x._version:
            sm = hit[2]
            if sm[0] == 0:
                return float("nan"), float("nan"), key
            return sm[1], sm[2] / sm[0] + sm[1] * sm[1], key
        hit = self._moms.get(id(x))                 # data: the model and its first layer share it
        if hit is not None and hit[0] is x and hit[1] == x._version:
            mo = hit[2]
        else:
            d = self._dread(x) if self._detail else None   # with the detail reads of a first layer's input
            if d is not None and d[0] is not None:
                sm = d[0]
                mo = (sm[0], sm[1], sm[2] / sm[0] + sm[1] * sm[1])
            else:
                mo = torch_moments(x)
            self._moms[id(x)] = (x, x._version, mo)
        if mo is None:
            return float("nan"), float("nan"), key
        return mo[1], mo[2], key

    def _note_input(self, rec, i, x, mom=None, module=None):
        """Input ``i`` of ``rec``: producer link and pooled moments (probes.Lens._note_input)."""
        if mom is None:
            mom = self._input_moments(x)
        mean, q, prev = mom
        im = rec.input(i)
        if prev is not None and prev != rec.key:
            if im.producer is None:
                im.producer = prev
                if i == 0 and rec.producer is None:
                    rec.producer = prev
            prod = self.records[prev]
            if i == 0 and rec.kind in MIXING_KINDS:
                how = "conv" if (rec.kind == "conv" or rec.kind.startswith("Conv")) else "linear"
                prod.params["feeds_mixing"] = how
                if prod.source is not None:
                    self.records[prod.source].params["feeds_mixing"] = how
            if rec.key not in prod.consumers and not self._is_ancestor(rec, prod):
                prod.consumers.append(rec.key)
        # what the rules read besides moments: the varlens recorder's own functions, on the
        # tensor's memory (a host copy off the CPU)
        if i:
            im.add(mean, q, tuple(x.shape))
            return
        kind = rec.kind
        if module is not None:
            if kind in NORM_LIKE:
                a = _host(x)
                rec.inp_var_group = self._group_var(module, a, rec.params)
                if kind.startswith("BatchNorm") and not module.training:
                    xd = a.astype(np.float64)
                    axes = (0,) + tuple(range(2, xd.ndim))
                    rec.params["channel_mean"] = xd.mean(axis=axes)
                    rec.params["channel_q"] = (xd * xd).mean(axis=axes)
            elif kind in _SHAPED:
                rec.params["in_shape"] = tuple(x.shape)
        if self._detail:
            self._detail_input(rec, x, prev)
        im.add(mean, q, tuple(x.shape))

    def _detail_input(self, rec, x, prev):
        """What a detail step reads of input 0 (``x``, made by record ``prev`` or None) besides
        its moments: a mixing layer's per-feature means, an activation's per-channel moments."""
        kind = rec.kind
        if kind in MIXING_KINDS:
            if kind != "conv" and not kind.startswith("Conv"):
                d = self._dread(x)
                if d is not None:            # probes.Lens._feature_means from the column sums
                    _acc_params(rec.params, ("in_fmean_sum",), "in_fmean_n", (d[2][0] / (x.numel() // x.shape[-1]),))
                    return
            a = _host_view(x)
            self._feature_means(rec, _host(x) if a is None else a, self._col_sums(x, a))
        elif kind in _ACT_KINDS:
            if prev is not None:
                pr = self.records[prev]
                pk = self.records[pr.source].kind if pr.source else pr.kind
                rec.params["conv_input"] = pk.startswith("Conv") or pk in ("conv", "batch_norm") or \
                    pk.startswith("BatchNorm") or x.dim() == 4
            else:
                rec.params["conv_input"] = x.dim() == 4
            if x.dim() < 3 or not rec.params["conv_input"]:
                d = self._dread(x)
                if d is not None:            # probes.channel_moments from the column sums
                    _acc_params(rec.params, ("in_cmean_sum", "in_cq_sum", "in_c3_sum"), "in_c_n",
                                tuple(d[2] / (x.numel() // x.shape[-1])))
                    return
            a = _host_view(x)
            channel_moments(rec, _host(x) if a is None else a, self._col_sums(x, a))

    def _col_sums(self, t, a):
        """:func:`varlens.lens.kernels.col_sums` of ``a`` (the host view of ``t``) seen as (-1, last
        axis), once per tensor version per pass (a Linear's output feeds its op's and module's
        unit moments and the next activation's channel moments); None without a host view."""
        if a is None or a.ndim < 2 or not a.size:
            return None
        hit = self._cols.get(id(t))
        if hit is not None and hit[0] is t and hit[1] == t._version:
            return hit[2]
        c = col_sums(a.reshape(-1, a.shape[-1]))
        self._cols[id(t)] = (t, t._version, c)
        return c

    def _units(self, rec, t, axis, grad=False):
        """Record.add_units for a torch tensor (by torch ops where it is not a host array)."""
        if axis == t.dim() - 1:
            d = self._dread(t)
            if d is not None:                # Record.add_units from the column sums
                rec.add_unit_q(d[2][1] / (t.numel() // t.shape[-1]), grad)
                return
        a = _host_view(t)
        if a is not None:
            rec.add_units(a, axis, grad=grad, cols=self._col_sums(t, a) if axis == a.ndim - 1 else None)
        else:
            _add_units(rec, t, axis, grad)

    def _measure(self, rec, t, check=True):
        """Output statistics of a record (and the gradient hook on the output); True if the
        output held a NaN or an Inf (``check``: note it at once)."""
        sm, a = self._summary(t)
        _update_stats(rec.out, t, rec.sat_kind, sm, a)
        bad = bool(sm[5] or sm[6])
        if bad and check:
            self._check_finite(rec, "forward", sm)
        if self._detail:
            if a is not None:
                rec.out.update_numerics(a)
            else:
                _update_numerics(rec.out, t)
        rec.rows = t.shape[0] if t.dim() else 1
        if self.grads and t.requires_grad:
            self._grad_prehook(rec, t)
        return bad

    def _grad_prehook(self, rec, t):
        """The hook that reads ``t``'s gradient into ``rec.grad`` in the backward pass: put, as
        ``Tensor.register_hook`` puts it, in a hook dictionary of ``t`` that the node which made
        ``t`` calls with ``t``'s gradient (without the RemovableHandle register_hook makes, which
        costs a sampled step more than the rest of the registration); a pre-hook on that node
        where ``t`` already has hooks of its own (or this torch lacks the internals)."""
        h = rec.grad_hook
        if h is None:
            h = rec.grad_hook = self._grad_hook(rec)
        fn = t.grad_fn
        if fn is None:
            t.register_hook(h)
            return
        if t._backward_hooks is None:
            try:
                t._backward_hooks = OrderedDict(((_HOOK_KEY, h),))
                fn._register_hook_dict(t)
                return
            except (AttributeError, TypeError, RuntimeError):
                t._backward_hooks = None
        nr = t.output_nr
        fn.register_prehook(lambda gs: None if gs[nr] is None else h(gs[nr]))

    def _grad_hook(self, rec):
        """The hook of ``rec``'s output gradient, called by autograd with the total gradient of the
        output and read at once, while the backward kernel's output is in cache (queueing the
        gradients and reading them when the backward pass ended, as before, read them cold:
        same-process A/B on bench_lens_torch.py's MLP, 2026-12-01, no slower at once, and less
        code).  A finite CPU gradient on an ordinary sampled step is read at its address and
        merged in a few lines; detail steps, other devices and non-finite values take ``full``.
        A gradient handed to two records' hooks (both inputs of an addition) is read once
        (``_gsumm``, cleared by step())."""
        def full(g):
            detail = self._detail
            fm = rec.params.get("feeds_mixing") if detail else None
            hit = self._gsumm.get(id(g))
            if hit is not None and hit[0] is g:
                sm, a = hit[1], hit[2]
            else:
                if detail:                 # with the headroom counts (and column sums for units)
                    d = self._dread(g, cols=fm is not None and unit_axis(g, fm == "conv") == g.dim() - 1)
                    sm = None if d is None else d[0]
                else:
                    sm = _fast_summary(g)
                a = None
                if sm is None:
                    a = _host_view(g)
                    if g.numel():
                        sm = R.summarize(a) if a is not None else torch_summary(g)
                self._gsumm[id(g)] = (g, sm, a)
            _update_stats(rec.grad, g, None, sm, a)
            if sm is not None and (sm[5] or sm[6]):
                self._check_finite(rec, "backward", sm)
            if detail and g.numel():
                self._numerics(rec.grad, g)
                if fm:
                    self._units(rec, g, unit_axis(g, fm == "conv"), grad=True)
            return None

        gsumm = self._gsumm

        def hook(g):
            # a finite CPU gradient on an ordinary sampled step: read at its address while it is
            # in cache (the backward kernel has just written it) and merged
            if self._detail or not g.is_cpu:
                return full(g)
            key = id(g)
            hit = gsumm.get(key)
            if hit is not None and hit[0] is g:
                return full(g)
            sm = _fast_summary(g)
            if sm is None:
                return full(g)
            gsumm[key] = (g, sm, None)
            st = rec.grad
            st.calls += 1                # Stats.update without the array (its shape and the summary)
            st.shape = tuple(g.shape)
            st.merge(sm)
            return None
        return hook

    # ------------------------------------------------------------------ records
    def _record_module(self, path, module, args, output, pre):
        key = self._key(path)
        rec = self.records.get(key)
        if rec is None:
            rec = self._new(key, path=path, level="module", kind=module_kind(module), cls=type(module).__name__,
                            module=module)
            rec.sat_kind = saturation_kind(module)
        out = _first_tensor(output)
        inp = _first_tensor(args)
        src = None
        bad = False
        if out is not None and out.is_floating_point():
            hit = self._produced.get(id(out))
            if hit is not None and hit[0] is out and hit[1] == out._version:
                s = self.records[hit[2]]
                if s.key != key and (s.path == path or s.path.startswith(path + ".") or path == "(model)"):
                    src = self.records[s.source] if (s.level == "module" and s.source) else s
            if src is not None and rec.source in (None, src.key):
                rec.source = src.key       # the op that made this output: the same tensor, shared stats
                rec.out = src.out
                rec.grad = src.grad
            else:
                bad = self._measure(rec, out, check=False)
                src = None
            rec.rows = out.shape[0] if out.dim() else 1
            if rec.params.get("training") is None:
                rec.params["training"] = bool(module.training)
            if self._detail and rec.kind in LINEAR_LIKE:
                self._units(rec, out, unit_axis(out, rec.kind.startswith("Conv")))
        else:
            out = None
        if inp is not None and inp.is_floating_point():
            self._note_input(rec, 0, inp, pre, module)
        if bad:
            self._check_finite(rec, "forward")
        if out is not None:
            self._produced[id(out)] = (out, out._version, key)

    def _op(self, op, func, args, kwargs, out, pre):
        """One torch function applied inside the model's forward (probes.Lens._op)."""
        if not self._stack:
            return
        T = _torch.Tensor
        if op in _VIEWS:
            src = args[0] if args and isinstance(args[0], T) else None
            pieces = [o for o in out if isinstance(o, T)] if isinstance(out, (tuple, list)) else [out]
            for piece in pieces:
                if src is None or not isinstance(piece, T) or not piece.is_floating_point():
                    continue
                if piece is src:
                    # contiguous() of a transposed tensor that torch happens to hold in row-major order
                    # (scaled_dot_product_attention's output is one): varlens's array is strided
                    # there and copies, so the row is kept
                    hit = self._produced.get(id(src))
                    if not (op == "clone" and hit is not None and hit[0] is src and
                            self.records[hit[2]].kind == "permute"):
                        continue
                if op == "alias" or (op == "reshape" and piece.shape == src.shape) or (
                        op == "cast" and piece.dtype == src.dtype):
                    self._alias[id(piece)] = (piece, src)
                    continue
                self._record_one(op, func, (src,), {}, piece, None)
            return
        t = _first_tensor(out)
        if t is None or not t.is_floating_point():
            return
        ins_all = list(args) + [v for v in kwargs.values() if isinstance(v, T)]
        if pre is None and any(t is a for a in ins_all):
            return                         # returned an input unchanged (dropout in eval): no op ran
        self._record_one(op, func, args, kwargs, t, pre)

    def _record_one(self, op, func, args, kwargs, t, pre):
        """One op record (or one more call of it) for output ``t``."""
        T = _torch.Tensor
        if op == "adaptive_avg_pool2d":
            op, kwargs = _adaptive_as_varlens(args, kwargs, t)
            args = args[:1]
        path = self._stack[-1]
        key = self._key(path + ":" + op)
        rec = self.records.get(key)
        named = _named(op, args, kwargs)
        new = rec is None
        if new:
            rec = self._new(key, path=path, level="op", kind=op, op=op, cls=getattr(func, "__name__", op).strip("_"))
            rec.sat_kind = OP_SATURATING.get(op)
            pidx = set()
            vnames = OP_PARAM_NAMES.get(op, ())
            for i, (nm, v) in enumerate(named):
                if isinstance(v, T) and (_is_param(v) or (nm is not None and nm not in _ACTIVATIONS)):
                    if nm in _PARAM_NAMES:
                        rec.arrays[nm] = _getter(v)
                        # numbered as the varlens Function numbers its arguments
                        pidx.add(vnames.index(nm) if nm in vnames else i)
                    elif nm is None:
                        rec.arrays[f"arg{i}"] = _getter(v)
                        pidx.add(i)
            rec.params["param_args"] = pidx
        self._measure(rec, t)
        scalars = None
        for i, (nm, v) in enumerate(named):
            if isinstance(v, T):
                if v.is_floating_point() and (nm in _ACTIVATIONS or (nm is None and not _is_param(v))):
                    self._note_input(rec, i, v, pre if i == 0 else None)
            elif nm is None and isinstance(v, (int, float)) and not isinstance(v, bool):
                if scalars is None:
                    scalars = {}
                scalars[i] = float(v)
        if scalars:
            rec.params["scalars"] = scalars
        if op in CROSS_OPS and len(args) >= 2 and isinstance(args[0], T) and isinstance(args[1], T) \
                and pre is None and args[0].shape == args[1].shape and args[0].numel():
            c = _cross(args[0], args[1])
            rec.cross += c
            rec.cross_n += 1
        if new or kwargs or op in _PARAMS_EVERY_CALL:   # as probes.Lens: the others' parameters are fixed
            self._op_params(rec, op, named, kwargs, t)
        if self._detail and op in ("linear", "conv"):
            self._units(rec, t, unit_axis(t, op == "conv"))
        if op == "sdpa":
            nm = {k: v for k, v in named if k is not None}
            q = nm.get("query")
            sc = nm.get("scale")
            sc = 1.0 / math.sqrt(q.shape[-1]) if sc is None else float(sc)
            rec.params["scalars"] = {5: sc, 6: float(nm.get("dropout_p", 0.0) or 0.0)}   # as varlens's SDPA
            self._sdpa_internals(path, nm)
        self._produced[id(t)] = (t, t._version, key)

    def _op_params(self, rec, op, pairs, kwargs, t):
        """The scalars an op's rule needs, under the names the varlens recorder uses."""
        p = rec.params
        named = {k: v for k, v in pairs if k is not None}
        x = named.get("input", named.get("query"))
        if x is None:
            x = next((v for _, v in pairs if isinstance(v, _torch.Tensor)), None)
        if isinstance(x, _torch.Tensor):
            p["in_shape"] = tuple(x.shape)
        p["out_shape"] = tuple(t.shape)
        if op == "dropout":
            p["p"] = float(named.get("p", 0.5))
        elif op in ("softmax", "log_softmax") and isinstance(x, _torch.Tensor):
            dim = named.get("dim", -1)
            dim = -1 if dim is None else dim
            rv = float(x.detach().to(_F64).var(dim=dim, unbiased=False).mean())
            p["scalars"] = {1: float(dim % x.dim())}       # the axis, as varlens's Softmax receives it
            p["row_var_sum"] = p.get("row_var_sum", 0.0) + rv
            p["row_var_n"] = p.get("row_var_n", 0) + 1
            p["n"] = x.shape[dim]
        elif op in ("layer_norm", "rms_norm") and isinstance(x, _torch.Tensor):
            ns = named.get("normalized_shape")
            nd = p["nd"] = 1 if isinstance(ns, int) else len(tuple(ns or (0,)))
            if named.get("eps") is not None:
                p["eps"] = float(named["eps"])
            elif op == "layer_norm":
                p["eps"] = 1e-5
            axes = tuple(range(x.dim() - nd, x.dim()))
            rec.inp_var_group = norm_stats(_host(x).astype(np.float64), axes, float(p.get("eps") or 1e-5),
                                            op == "rms_norm", p)
        elif op == "conv" and isinstance(x, _torch.Tensor):
            k = x.dim() - 2
            st, pd, dl = (named.get(n, d) for n, d in (("stride", 1), ("padding", 0), ("dilation", 1)))
            p["stride"] = _tuple(st, k)
            p["dilation"] = _tuple(dl, k)
            p["groups"] = int(named.get("groups", 1))
            if isinstance(pd, str):
                p["padding"] = pd
            else:
                p["pads"] = tuple(v for v in _tuple(pd, k) for _ in (0, 1))   # (top, bottom, left, right)
        elif op == "gelu":
            p["approximate"] = named.get("approximate", "none")
        elif op == "batch_norm" and isinstance(x, _torch.Tensor):
            rm, rv = named.get("running_mean"), named.get("running_var")
            bs = bool(named.get("training", False)) or rm is None or rv is None
            p["batch_stats"] = bs
            p["eps"] = float(named.get("eps", 1e-5))
            p["eps_mode"] = "sqrt"
            axes = (0,) + tuple(range(2, x.dim()))
            p["axes"] = axes
            p["pshape"] = tuple(x.shape[1] if i == 1 else 1 for i in range(x.dim()))
            if bs:
                rec.inp_var_group = norm_stats(_host(x).astype(np.float64), axes, p["eps"], False, p)
            else:
                p["running_mean"] = rm.detach().to(_F64).reshape(-1).cpu().numpy()
                p["running_var"] = rv.detach().to(_F64).reshape(-1).cpu().numpy()
                xd = x.detach().to(_F64)
                p["channel_mean"] = xd.mean(dim=axes).cpu().numpy()
                p["channel_q"] = (xd * xd).mean(dim=axes).cpu().numpy()
        elif op in ("avg_pool", "max_pool") and isinstance(x, _torch.Tensor):
            k = _tuple(named.get("kernel_size", 2), x.dim() - 2)
            p["kernel_size"] = k
            p["stride"] = _tuple(named.get("stride") or k, x.dim() - 2)
            p["padding"] = _tuple(named.get("padding", 0), x.dim() - 2)
            p["ceil_mode"] = bool(named.get("ceil_mode", False))
            if op == "max_pool":
                p["dilation"] = _tuple(named.get("dilation", 1), x.dim() - 2)
            else:
                p["count_include_pad"] = bool(named.get("count_include_pad", True))
            if op == "avg_pool":
                a = _host_view(x)
                p["lag_corr"] = window_correlation(a if a is not None else x.detach().cpu().numpy(), k)

    def _sdpa_internals(self, path, named):
        """``<path>:sdpa.logits`` and ``<path>:sdpa.softmax`` of a fused scaled_dot_product_attention,
        recomputed under no_grad from q and k (forward statistics only; the model keeps the fused
        op's output)."""
        torch = _torch
        q, k = named.get("query"), named.get("key")
        if not isinstance(q, torch.Tensor) or not isinstance(k, torch.Tensor):
            return
        with torch.no_grad():
            d = q.shape[-1]
            scale = named.get("scale")
            scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
            if named.get("enable_gqa") and q.dim() >= 3 and k.shape[-3] != q.shape[-3]:
                k = k.repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3)
            s = torch.matmul(q, k.transpose(-2, -1)) * scale
            mask = named.get("attn_mask")
            if named.get("is_causal"):
                mask = torch.ones(s.shape[-2], s.shape[-1], dtype=torch.bool, device=s.device).tril()
            valid = None
            if isinstance(mask, torch.Tensor) and mask.dtype == torch.bool:
                valid = mask.expand(s.shape)
                z = s.masked_fill(~valid, float("-inf"))
            elif isinstance(mask, torch.Tensor):
                z = s + mask
            else:
                z = s
            p = torch.softmax(z, dim=-1)
            p = torch.nan_to_num(p, nan=0.0)            # a row with every key masked attends to nothing
            for suffix, arr in (("sdpa.logits", s), ("sdpa.softmax", p)):
                key = self._key(f"{path}:{suffix}")
                rec = self.records.get(key)
                if rec is None:
                    rec = self._new(key, path=path, level="op", kind=suffix, op=suffix, cls="SDPA")
                    rec.sat_kind = "softmax" if suffix == "sdpa.softmax" else None
                if suffix == "sdpa.logits":
                    sd = s.to(_F64)
                    if valid is None:
                        vals = arr
                        rv = float(sd.var(dim=-1, unbiased=False).mean())
                    else:
                        vals = arr[valid].reshape(arr.shape[0], -1)
                        cnt = valid.sum(dim=-1).clamp_min(1).to(_F64)
                        mu = torch.where(valid, sd, 0.0).sum(dim=-1) / cnt
                        rv = float((torch.where(valid, (sd - mu[..., None]) ** 2, 0.0).sum(dim=-1) / cnt).mean())
                    _update_stats(rec.out, vals.contiguous(), None, None)
                    rec.params["row_var_sum"] = rec.params.get("row_var_sum", 0.0) + rv
                    rec.params["row_var_n"] = rec.params.get("row_var_n", 0) + 1
                    rec.params["d"] = d
                    rec.params["scale"] = scale
                    self._note_input(rec, 0, named["query"])
                    self._note_input(rec, 1, named["key"])
                else:
                    _update_stats(rec.out, arr.contiguous(), "softmax", None)
                    nv = (valid.reshape(-1, valid.shape[-1]).sum(dim=1).cpu().numpy() if valid is not None
                          else np.full(1, arr.shape[-1]))
                    rec.params["n_valid"] = np.unique(nv, return_counts=True)
                    rec.params["n"] = arr.shape[-1]
                rec.rows = arr.shape[0]

    def tap(self, name, tensor, kind=None):
        """Record a torch tensor that no module returns; returns it unchanged."""
        if not self._active:
            return tensor
        with _torch._C.DisableTorchFunction():
            key = self._key(name)
            rec = self.records.get(key)
            if rec is None:
                rec = self._new(key, path=name, level="tap", kind="tap", cls="tap")
            rec.sat_kind = kind
            self._measure(rec, tensor)
        return tensor

    # ------------------------------------------------------------------ steps
    def step(self):
        """End a training step (after backward): weight statistics on detail steps, then decide
        whether the next step is sampled."""
        if self._active and self._detail and self.weights:
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
        self._clear_pass()
        self._gsumm.clear()
        self._active = (self.steps_seen % self.every) == 0
        self._detail = self._active and (self.steps_sampled % self.weight_every == 0)
        if self._active:
            self._attach()
        else:
            self._release()

    def detach(self):
        """Remove every hook; the model then runs as if the lens had never been attached."""
        self._detached = True
        self._release()
        self._end_pass()
        self._gsumm.clear()
        self._active = False


# the leaf ops _replay records (the ops of _LEAF_CALLS that are not views); those whose only
# parameters each call are the input's and the output's shapes
_HOOK_KEY = -1                     # the lens's key in a tensor's hook dictionary (torch's own keys count up from 0)
_REPLAY_OPS = {"linear", "relu", "tanh", "sigmoid", "gelu", "silu", "leaky_relu", "dropout"}
_SHAPE_PARAMS_ONLY = {"relu", "silu", "leaky_relu", "tanh", "sigmoid"}
_PARAMS_EVERY_CALL = {"dropout", "softmax", "log_softmax", "sdpa", "batch_norm", "avg_pool", "layer_norm",
                      "rms_norm"}
_SHAPED = LINEAR_LIKE | POOL_LIKE        # module kinds whose rule reads the input's shape
_ACT_KINDS = (ACT_OPS | set(ACT_NAMES)) - {"Identity"}   # activations whose input's channel moments are kept


def _is_param(t):
    """A leaf the model owns (a Parameter, or a leaf that requires grad): read at compare time."""
    return t.grad_fn is None and (t.requires_grad or isinstance(t, _torch.nn.Parameter))


def _named(op, args, kwargs):
    """[(argument name or None, value)] of one call in positional order, keyword arguments of the
    op's signature placed at their position."""
    sig = _SIGNATURES.get(op, ())
    out = [(sig[i] if i < len(sig) else None, a) for i, a in enumerate(args)]
    for k, v in kwargs.items():
        if k in sig:
            i = sig.index(k)
            while len(out) <= i:
                out.append((sig[len(out)], None))
            out[i] = (k, v)
    return out


def _adaptive_as_varlens(args, kwargs, out):
    """(op, kwargs) under which varlens records F.adaptive_avg_pool2d: a mean over H and W for a
    (1, 1) output, an average pool when the sizes divide, else the op keeps its own name."""
    x = args[0]
    H, W = x.shape[-2], x.shape[-1]
    Ho, Wo = out.shape[-2], out.shape[-1]
    if (Ho, Wo) == (1, 1):
        return "mean", {}
    if H % Ho == 0 and W % Wo == 0:
        k = (H // Ho, W // Wo)
        return "avg_pool", {"kernel_size": k, "stride": k}
    return "adaptive_avg_pool2d", kwargs


def _tuple(v, k):
    return tuple(int(x) for x in v) if isinstance(v, (tuple, list)) else (int(v),) * k


def _getter(t):
    return lambda: t


def _cross(a, b):
    """E[a*b] of two equal-shaped tensors (float64 accumulation)."""
    va, vb = _host_view(a), _host_view(b)
    if va is not None and vb is not None:
        with np.errstate(over="ignore", invalid="ignore"):
            return float(np.vdot(va.reshape(-1), vb.reshape(-1))) / va.size
    return float((a.detach().reshape(-1).to(_F64) * b.detach().reshape(-1).to(_F64)).mean())

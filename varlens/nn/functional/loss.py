"""Loss functions (every torch.nn.functional loss) and the L1/L2 penalties.
"""
from __future__ import annotations

import math
import warnings

from varlens.ops.nn.loss import MseLoss as _MseLoss
from varlens import ops as _ops
from varlens.core import array as B
from varlens.core.array import xp
from varlens.core.tensor import Tensor
from varlens.nn.functional._errors import ArgRuntimeError
from varlens.nn.functional._common import (_tensor_args, _arr, _const, _dtype_name, _need_tensor, _require_tensor, _shape,
                                           NotATensorError)
from varlens.nn.functional.activation import logsigmoid
from varlens.nn.functional.distance import pairwise_distance
from varlens.ops.nn import loss as _nn_loss_mod
from varlens.ops.nn.binary_cross_entropy import BinaryCrossEntropy as _BinaryCrossEntropy



def _loss_args(input, target, op):
    _need_tensor(input, "input", 1, op, NotATensorError)
    _need_tensor(target, "target", 2, op, NotATensorError)


def _check_class_target(tgt, op):
    """Class indices must be int64 or uint8 (PyTorch's 'Long or Byte')."""
    dt = tgt.dtype
    if dt != xp.int64 and dt != xp.uint8:
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {_dtype_name(dt)} ({op}: "
                           f"class-index targets must be int64 or uint8, got {dt}; use target.long())")


def _check_batch(in_shape, tgt_shape, op):
    N = in_shape[0]
    if not tgt_shape or tgt_shape[0] != N:
        exp = (N,) + tuple(in_shape[2:])
        raise ValueError(f"Expected input batch_size ({N}) to match target batch_size "
                         f"({tgt_shape[0] if tgt_shape else 'none: a 0-d target'}). ({op}: for input of shape "
                         f"{tuple(in_shape)} the class-index target must have shape {exp}, got {tuple(tgt_shape)})")


def _as_tensor_like(v, like):
    if isinstance(v, Tensor) or v is None:
        return v
    return Tensor._make(xp.asarray(v, dtype=like.dtype))


# ---------------------------------------------------------------- losses
_REDUCTIONS = ("mean", "sum", "none")


_INT64 = xp.dtype("int64")
_HOST = xp.ndarray   # host arrays: value checks that read data run only on these


def _legacy_reduction(size_average, reduce, reduction):
    if size_average is None and reduce is None:
        return reduction
    sa = True if size_average is None else size_average
    rd = True if reduce is None else reduce
    return "none" if not rd else ("mean" if sa else "sum")


def _check_reduction(reduction, what, extra=()):
    if reduction not in _REDUCTIONS + tuple(extra):
        raise ValueError(f"{what}: reduction must be one of {_REDUCTIONS + tuple(extra)}, got {reduction!r}")


def _reduce(loss, reduction):
    if reduction == "mean":
        return _ops.mean(loss)
    if reduction == "sum":
        return _ops.sum(loss)
    return loss


def _pair(input, target, what):
    _loss_args(input, target, what)
    if tuple(target.shape) != tuple(input.shape):
        try:
            xp.broadcast_shapes(tuple(input.shape), tuple(target.shape))
        except ValueError:
            raise ArgRuntimeError(f"{what}: input of shape {tuple(input.shape)} and target of shape "
                                  f"{tuple(target.shape)} cannot be broadcast together (the size of each "
                                  f"dimension must match or be 1)") from None
        warnings.warn(f"{what}: using a target size {tuple(target.shape)} that is different to the input size "
                      f"{tuple(input.shape)}; they will be broadcast, which is probably not what you want",
                      stacklevel=3)
    return target


def _fused_pair(input, target):
    """True when a regression loss can be its single fused node: input and target of one
    floating-point dtype (other combinations take the composite of small ops, which promotes)."""
    a, b = input._data.dtype, target._data.dtype
    return a == b and a.kind == "f"


def _no_grad_weight(w, op, name="weight"):
    """PyTorch's refusal of a class weight that requires grad (binary_cross_entropy(_with_logits)
    are not differentiable in it)."""
    if isinstance(w, Tensor) and w.requires_grad:
        raise RuntimeError(f"The function '{op}' is not differentiable with respect to argument '{name}'. "
                           f"This input cannot have requires_grad True. ({op}: pass {name}.detach())")


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """mean((x - y)^2).  Its gradient is 2 (x - y) / n; seed 003 Example 1.6.6 writes z - y,
    the gradient of half the squared error (see docs/conventions.md)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "mse_loss")
    target = _pair(input, target, "mse_loss")
    if input._data.dtype.kind in "biu" and target._data.dtype.kind in "biu":
        raise NotImplementedError(f'"mse_cpu" not implemented for \'{_dtype_name(input._data.dtype)}\' (mse_loss: '
                                  f"input and target are both integer tensors; convert them with .float())")
    if weight is None and input._data.dtype == target._data.dtype:
        return _MseLoss.apply(input, target, reduction=reduction)   # one node, as torch's MseLossBackward0
    d = input - target
    loss = d * d
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "l1_loss")
    target = _pair(input, target, "l1_loss")
    loss = _ops.abs(input - target)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """0.5 d^2 where |d| < delta, else delta (|d| - delta/2)."""
    _check_reduction(reduction, "huber_loss")
    if delta <= 0:
        raise ArgRuntimeError(f"huber_loss does not support non-positive values for delta (got delta={delta})")
    target = _pair(input, target, "huber_loss")
    if _fused_pair(input, target):
        if weight is None:   # one node, as torch's HuberLossBackward0
            return _nn_loss_mod.HuberLoss.apply(input, target, reduction=reduction, delta=delta)
        # with a weight PyTorch multiplies the unreduced node's output, then reduces (Mul, Mean)
        loss = _nn_loss_mod.HuberLoss.apply(input, target, reduction="none", delta=delta)
        return _reduce(loss * weight, reduction)
    d = input - target
    ad = _ops.abs(d)
    loss = _ops.where((ad < delta)._data, 0.5 * d * d, delta * (ad - 0.5 * delta))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """0.5 d^2 / beta where |d| < beta, else |d| - beta/2 (L1 for beta = 0)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "smooth_l1_loss")
    if beta < 0:
        raise ArgRuntimeError(f"smooth_l1_loss does not support negative values for beta (got beta={beta})")
    target = _pair(input, target, "smooth_l1_loss")
    if beta == 0:   # L1 (PyTorch then records Mean/Sum over Abs over Sub, as here)
        return _reduce(_ops.abs(input - target), reduction)
    if _fused_pair(input, target):   # one node, as torch's SmoothL1LossBackward0
        return _nn_loss_mod.SmoothL1Loss.apply(input, target, reduction=reduction, beta=beta)
    d = input - target
    ad = _ops.abs(d)
    loss = _ops.where((ad < beta)._data, (0.5 / beta) * d * d, ad - 0.5 * beta)
    return _reduce(loss, reduction)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """Softmax cross-entropy of logits ``input`` (N, C) / (N, C, d1, ...) / (C,) against class
    indices (N,) / (N, d1, ...) / () or class probabilities (same shape as input).
    One fused op; its gradient with respect to the logits is softmax(z) - y (seed 001 §3.1,
    seed 003 Example 1.6.6), per row and before the reduction."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    if reduction not in _REDUCTIONS:
        _check_reduction(reduction, "cross_entropy")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ArgRuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing} (cross_entropy)")
    if not isinstance(input, Tensor):
        _need_tensor(input, "input", 1, "cross_entropy")
    if not isinstance(target, Tensor):
        _need_tensor(target, "target", 2, "cross_entropy")
    zs = input._data.shape
    if not zs:
        raise ArgRuntimeError("cross_entropy: input must have a class dimension (shape (C,), (N, C) or "
                              "(N, C, d1, ...)), got a 0-d tensor")
    C = zs[1] if len(zs) > 1 else zs[0]
    w = None
    if weight is not None:
        _need_tensor(weight, "weight", 3, "cross_entropy")
        w = _arr(weight).astype(input.dtype, copy=False)
        if w.shape != (C,):
            raise ArgRuntimeError(f"weight tensor should be defined either for all {C} classes or no classes but got "
                                  f"weight tensor of shape: {list(w.shape)} (cross_entropy: weight must have shape "
                                  f"({C},), one per class)")
    tgt = target._data
    dt = tgt.dtype
    if dt.kind == "f":
        if tgt.shape != zs:
            raise RuntimeError(f"expected target dtype to be Long or Byte, but got {_dtype_name(dt)} "
                               f"(cross_entropy: a floating-point target holds class probabilities and must "
                               f"have the input's shape {tuple(zs)}, got {tuple(tgt.shape)})")
        return _nn_loss_mod.CrossEntropy.apply(input, target, weight=w, label_smoothing=label_smoothing,
                                      reduction=reduction, probs=True)
    if dt is not _INT64:
        _check_class_target(tgt, "cross_entropy")
    exp_shape = () if len(zs) == 1 else (zs[0],) + zs[2:]
    if len(zs) == 1 and tgt.shape == (1,):  # a 1-element target for one example works too (PyTorch)
        tgt = tgt.reshape(())
    if tgt.shape != exp_shape:
        if len(zs) == 1:
            raise ValueError(f"For 1D input, 1D target must have size 1, but got target size: "
                             f"{tgt.shape[0] if tgt.ndim else 0} (cross_entropy: input of shape {tuple(zs)} "
                             f"takes a 0-d class-index target)")
        if not tgt.shape or tgt.shape[0] != zs[0]:
            _check_batch(zs, tgt.shape, "cross_entropy")
        head = ("0D or 1D target tensor expected, multi-target not supported" if len(zs) == 2 else
                f"Expected target size {list(exp_shape)}, got {list(tgt.shape)}")
        raise ArgRuntimeError(f"{head} (cross_entropy: for input of shape {tuple(zs)} the class-index target "
                              f"must have shape {exp_shape}, got {tuple(tgt.shape)})")
    # the target range check reads values on the host: CPU only (on CUDA an out-of-range class is
    # not checked; docs/conventions.md, "Layers, losses and attention on CUDA")
    real = _nn_loss_mod.cross_entropy_check(tgt, C, ignore_index) if tgt.__class__ is _HOST else False
    return _nn_loss_mod.CrossEntropy.apply(input, tgt, weight=w, ignore_index=ignore_index,
                                  label_smoothing=label_smoothing, reduction=reduction, probs=False,
                                  all_real=real)


@_tensor_args("input", "target", "weight", optional=("weight",))
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """-w[y] * input[y] for log-probabilities ``input`` (N, C, ...); 'mean' divides by the
    summed weights of the (non-ignored) targets."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "nll_loss")
    _need_tensor(input, "input", 1, "nll_loss")
    _need_tensor(target, "target", 2, "nll_loss")
    if input.ndim == 0:
        raise ValueError("nll_loss: input must have a class dimension, got a 0-d tensor")
    C = input.shape[1] if input.ndim > 1 else input.shape[0]
    tgt = target._data
    _check_class_target(tgt, "nll_loss")
    if input.ndim == 1:
        if tgt.ndim > 1 or tgt.size != 1:
            raise ValueError(f"For 1D input, 1D target must have size 1, but got target size: {tgt.size} "
                             f"(nll_loss: input of shape {tuple(input.shape)})")
    else:
        if tgt.ndim != input.ndim - 1 and input.ndim == 2:
            raise RuntimeError(f"0D or 1D target tensor expected, multi-target not supported (nll_loss: input "
                               f"of shape {tuple(input.shape)} takes a target of shape ({input.shape[0]},), got "
                               f"{tuple(tgt.shape)})")
        _check_batch(tuple(input.shape), tgt.shape, "nll_loss")
        exp_shape = (input.shape[0],) + tuple(input.shape[2:])
        if tgt.shape != exp_shape:
            raise RuntimeError(f"nll_loss: expected target of shape {exp_shape} for input of shape "
                               f"{tuple(input.shape)}, got {tuple(tgt.shape)}")
    host = tgt.__class__ is _HOST
    if host:   # (a host read: CPU only, as cross_entropy's)
        _nn_loss_mod.cross_entropy_check(tgt, C, ignore_index, "nll_loss")
    if weight is not None:
        _need_tensor(weight, "weight", 3, "nll_loss")
        if weight._data.shape != (C,):
            raise ArgRuntimeError(f"weight tensor should be defined either for all {C} classes or no classes but got "
                                  f"weight tensor of shape: {list(weight._data.shape)} (nll_loss: weight must have "
                                  f"shape ({C},), one per class)")
    w = None if weight is None else _arr(weight).astype(input.dtype, copy=False)
    t = tgt if input.ndim > 1 else tgt.reshape(())
    # one node, as torch's NllLossBackward0 / NllLoss2DBackward0 (ops/nn/loss.py)
    return _nn_loss_mod.NllLoss.apply(input, t, weight=w, ignore_index=ignore_index, reduction=reduction)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-w (y log x + (1 - y) log(1 - x)) on probabilities x, each log clamped at -100 (PyTorch)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "binary_cross_entropy")
    _loss_args(input, target, "binary_cross_entropy")
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"binary_cross_entropy: target of shape {tuple(target.shape)} must match the input's "
                         f"shape {tuple(input.shape)}")
    x = input._data
    if target._data.dtype != x.dtype:
        raise RuntimeError(f"Found dtype {_dtype_name(target._data.dtype)} but expected {_dtype_name(x.dtype)} "
                           f"(binary_cross_entropy: target must have the input's dtype {x.dtype}, got "
                           f"{target._data.dtype}; convert it with target.to(input.dtype))")
    if x.dtype.kind != "f":
        raise NotImplementedError(f'"binary_cross_entropy" not implemented for \'{_dtype_name(x.dtype)}\' '
                                  f"(the input holds probabilities and must be floating point)")
    # one pass each for min and max; a NaN makes both comparisons False, so it is refused too
    # (a host read: CPU only; on CUDA the range is not checked: docs/conventions.md, "Layers,
    # losses and attention on CUDA")
    if x.__class__ is _HOST and x.size and not (x.min() >= 0 and x.max() <= 1):
        raise RuntimeError("all elements of input should be between 0 and 1 (binary_cross_entropy: input "
                           "holds probabilities; got values outside [0, 1] or NaN; for logits use "
                           "binary_cross_entropy_with_logits)")
    if weight is not None:
        _need_tensor(weight, "weight", 3, "binary_cross_entropy", NotATensorError)
    # one op with PyTorch's closed-form gradient, finite at p = 0 and 1 (ops/nn/binary_cross_entropy.py)
    w = None
    if weight is not None:
        _no_grad_weight(weight, "binary_cross_entropy")
        w = weight._data.astype(x.dtype, copy=False)
        if tuple(w.shape) != tuple(x.shape):
            w = B.namespace(w).broadcast_to(w, x.shape)
    # one node with the reduction folded in, as torch's BinaryCrossEntropyBackward0
    return _BinaryCrossEntropy.apply(input, target, w, reduction=reduction)


@_tensor_args("input", "target", "weight", "pos_weight", optional=("weight", "pos_weight"))
def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """Sigmoid + binary cross-entropy in one stable op; gradient w (sigmoid(x) - y) without
    pos_weight.  ``pos_weight`` multiplies the positive term (broadcast over the class axis)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "binary_cross_entropy_with_logits")
    _loss_args(input, target, "binary_cross_entropy_with_logits")
    if target._data.dtype.kind != "f" and input._data.dtype.kind == "f":
        raise RuntimeError(f"result type {_dtype_name(input._data.dtype)} can't be cast to the desired output "
                           f"type {_dtype_name(target._data.dtype)} (binary_cross_entropy_with_logits: target "
                           f"must be floating point, got dtype {target._data.dtype}; use target.float())")
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"binary_cross_entropy_with_logits: target of shape {tuple(target.shape)} must match "
                         f"the input's shape {tuple(input.shape)}")
    _no_grad_weight(weight, "binary_cross_entropy_with_logits")
    _no_grad_weight(pos_weight, "binary_cross_entropy_with_logits", "pos_weight")
    w = None if weight is None else _arr(weight).astype(input.dtype, copy=False)
    pw = None if pos_weight is None else _arr(pos_weight).astype(input.dtype, copy=False)
    # one node with the reduction folded in, as torch's BinaryCrossEntropyWithLogitsBackward0
    return _nn_loss_mod.BCEWithLogits.apply(input, target, w, pw, reduction=reduction)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """KL(target || model) pointwise: target (log target - input) for log-probabilities ``input``.
    reduction='batchmean' divides the sum by the batch size (the mathematical KL per example)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "kl_div", ("batchmean",))
    if reduction == "mean":
        warnings.warn("kl_div: reduction='mean' divides the total by the number of elements (batch size "
                      "times support size); 'batchmean' divides by the batch size only, which is the "
                      "mathematical KL divergence per example", stacklevel=2)
    _need_tensor(input, "input", 1, "kl_div")
    _need_tensor(target, "target", 2, "kl_div")
    if log_target:
        loss = _ops.exp(target) * (target - input)
    else:
        t = target._data
        pos = t > 0
        safe = Tensor._make(B.namespace(t).where(pos, t, 1).astype(t.dtype)) if not target.requires_grad else \
            _ops.where(pos, target, 1.0)
        loss = _ops.where(pos, target * _ops.log(safe), 0.0) - target * input
    if reduction == "batchmean":
        n = input.shape[0] if input.ndim else 1
        return _ops.sum(loss) / n
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-06, reduction="mean"):
    """0.5 (log max(var, eps) + (input - target)^2 / max(var, eps)) (+ 0.5 log 2 pi if full).
    The clamp is not differentiated through (as PyTorch)."""
    _check_reduction(reduction, "gaussian_nll_loss")
    _loss_args(input, target, "gaussian_nll_loss")
    if not isinstance(var, (Tensor, int, float)) or isinstance(var, bool):
        _need_tensor(var, "var", 3, "gaussian_nll_loss")
    var = _as_tensor_like(var, input)
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = _ops.unsqueeze(var, -1)
        elif not (tuple(input.shape[:-1]) == tuple(var.shape[:-1]) and var.shape[-1] == 1):
            raise ValueError(f"gaussian_nll_loss: var of shape {tuple(var.shape)} must match the input's shape "
                             f"{tuple(input.shape)}, or drop/size-1 its last dimension")
    vd = var._data
    if vd.__class__ is _HOST and bool((vd < 0).any()):   # (a host read: CPU only)
        raise ValueError("gaussian_nll_loss: var has negative entries; variances must be >= 0")
    clamped = B.namespace(vd).maximum(vd, eps)
    v = var + Tensor._make(clamped - var._data) if var.requires_grad else Tensor._make(clamped)
    d = input - target
    loss = 0.5 * (_ops.log(v) + d * d / v)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


# ---------------------------------------------------------------- penalties (seed 003 §4.1.1)
def _tensors(params):
    if isinstance(params, Tensor):
        return [params]
    if hasattr(params, "parameters") and callable(params.parameters):
        return list(params.parameters())
    return list(params)


def l2_penalty(params, weight_decay=1.0):
    """weight_decay * sum of squared entries of every tensor in ``params`` (a Tensor, an iterable
    of Tensors, or a Module: all its parameters) -- the L2 term lambda ||W||_2^2 of seed 003
    §4.1.1.  Its gradient is 2 lambda W (seed 003 Remark 4.1.1, sign corrected)."""
    ts = _tensors(params)
    if not ts:
        raise ValueError("l2_penalty: no tensors given")
    total = _ops.sum(ts[0] * ts[0])
    for t in ts[1:]:
        total = total + _ops.sum(t * t)
    return total * weight_decay if weight_decay != 1.0 else total


def l1_penalty(params, weight_decay=1.0):
    """weight_decay * sum of absolute entries (the L1 term lambda |W|_1 of seed 003 §4.1.1)."""
    ts = _tensors(params)
    if not ts:
        raise ValueError("l1_penalty: no tensors given")
    total = _ops.sum(_ops.abs(ts[0]))
    for t in ts[1:]:
        total = total + _ops.sum(_ops.abs(t))
    return total * weight_decay if weight_decay != 1.0 else total


# ---------------------------------------------------------------- losses
def _red(size_average, reduce, reduction, op, extra=()):
    r = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(r, op, extra)
    return r


def _same(a, b, op, an="input", bn="target"):
    if _shape(a) != _shape(b):
        raise ValueError(f"{op}: {bn} of shape {_shape(b)} must have the same shape as {an} {_shape(a)}")


def _as_t(v, like):
    return v if isinstance(v, Tensor) else _const(v, like)


def _loss_tensors(op, *named):
    """A TypeError naming the first non-Tensor argument, as PyTorch's argument parser
    (``named``: (value, name) pairs in positional order)."""
    for pos, (v, name) in enumerate(named, 1):
        if not isinstance(v, Tensor):
            _need_tensor(v, name, pos, op, NotATensorError)


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """max(0, -y (x1 - x2) + margin) for y in {1, -1}."""
    op = "margin_ranking_loss"
    r = _red(size_average, reduce, reduction, op)
    _loss_tensors(op, (input1, "input1"), (input2, "input2"), (target, "target"))
    if not (_shape(input1) == _shape(input2) == _shape(target)):
        raise RuntimeError(f"{op}: all input tensors should have the same size, got input1 {_shape(input1)}, "
                           f"input2 {_shape(input2)}, target {_shape(target)}")
    # clamp(min=0), not relu: at exactly 0 the gradient passes, as torch's clamp_min does
    return _reduce(_ops.clamp(-target * (input1 - input2) + margin, 0.0, None), r)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """x where y = 1, max(0, margin - x) where y = -1 (PyTorch's form: both terms where y is
    neither)."""
    op = "hinge_embedding_loss"
    r = _red(size_average, reduce, reduction, op)
    _loss_tensors(op, (input, "input"), (target, "target"))
    t = target._data if isinstance(target, Tensor) else xp.asarray(target)
    if t.shape != _shape(input):
        raise ValueError(f"{op}: target of shape {t.shape} must have the same shape as input {_shape(input)}")
    m = _ops.where(t != 1, _ops.relu(margin - input), 0.0)
    s = _ops.where(t != -1, input, 0.0)
    return _reduce(m + s, r)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-y x)) (a softplus, stable for large |x|)."""
    op = "soft_margin_loss"
    r = _red(size_average, reduce, reduction, op)
    _loss_tensors(op, (input, "input"), (target, "target"))
    _same(input, target, op)
    if isinstance(target, Tensor) and target.requires_grad:
        raise RuntimeError("The function 'soft_margin_loss' is not differentiable with respect to argument "
                           "'target'. This input cannot have requires_grad True. (soft_margin_loss: pass "
                           "target.detach())")
    if input._data.dtype.kind == "f":   # one node, as torch's SoftMarginLossBackward0
        return _nn_loss_mod.SoftMarginLoss.apply(input, target._data, reduction=r)
    return _reduce(_ops.softplus(-target * input), r)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-(1/C) sum_c w_c [y_c log sigmoid(x_c) + (1 - y_c) log sigmoid(-x_c)] per example."""
    op = "multilabel_soft_margin_loss"
    r = _red(size_average, reduce, reduction, op)
    _loss_tensors(op, (input, "input"), (target, "target"))
    _same(input, target, op)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    C = input.shape[-1] if input.ndim else 1
    loss = _ops.sum(loss, -1) / C if input.ndim else loss
    return _reduce(loss, r)


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """1 - cos(x1, x2) where y = 1, max(0, cos(x1, x2) - margin) where y = -1; cos along the last
    dim with 1e-12 added to each squared norm (PyTorch's form)."""
    op = "cosine_embedding_loss"
    r = _red(size_average, reduce, reduction, op)
    _loss_tensors(op, (input1, "input1"), (input2, "input2"), (target, "target"))
    if _shape(input1) != _shape(input2) or input1.ndim not in (1, 2):
        raise RuntimeError(f"{op}: expected input1 and input2 of the same 1-D or 2-D shape, got "
                           f"{_shape(input1)} and {_shape(input2)}")
    t = target._data if isinstance(target, Tensor) else xp.asarray(target)
    if t.shape != _shape(input1)[:-1]:
        raise RuntimeError(f"{op}: expected target of shape {_shape(input1)[:-1]}, got {t.shape}")
    eps = 1e-12
    prod = _ops.sum(input1 * input2, -1)
    m1 = _ops.sum(input1 * input1, -1) + eps
    m2 = _ops.sum(input2 * input2, -1) + eps
    cos = prod / _ops.sqrt(m1 * m2)
    pos = _ops.where(t == 1, 1 - cos, 0.0)
    neg = _ops.where(t == -1, _ops.relu(cos - margin), 0.0)
    return _reduce(pos + neg, r)


@_tensor_args("anchor", "positive", "negative")
def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-06, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """max(0, margin + d(a, p) - d(a, n)) with d = pairwise_distance(., ., p, eps); ``swap``
    uses min(d(a, n), d(p, n)) for the negative distance."""
    op = "triplet_margin_loss"
    r = _red(size_average, reduce, reduction, op)
    if not (anchor.ndim == positive.ndim == negative.ndim):
        raise RuntimeError(f"{op}: the anchor, positive, and negative tensors are expected to have the same "
                           f"number of dimensions, but got: anchor {anchor.ndim}D, positive {positive.ndim}D, "
                           f"and negative {negative.ndim}D inputs")
    dp = pairwise_distance(anchor, positive, p, eps)
    dn = pairwise_distance(anchor, negative, p, eps)
    if swap:
        dn = _ops.minimum(dn, pairwise_distance(positive, negative, p, eps))
    return _reduce(_ops.relu(margin + dp - dn), r)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0,
                                      swap=False, reduction="mean"):
    op = "triplet_margin_with_distance_loss"
    r = _red(None, None, reduction, op)
    if margin <= 0:
        raise ValueError(f"{op}: margin must be greater than 0, got {margin}")
    dist = distance_function if distance_function is not None else pairwise_distance
    dp = dist(anchor, positive)
    dn = dist(anchor, negative)
    if swap:
        dn = _ops.minimum(dn, dist(positive, negative))
    return _reduce(_ops.relu(margin + dp - dn), r)


def _class_targets(input, target, op):
    t = target._data if isinstance(target, Tensor) else xp.asarray(target)
    if t.dtype.kind not in "iu":
        raise TypeError(f"{op}: target must hold class indices (int64), got dtype {t.dtype}")
    if input.ndim not in (1, 2):
        raise ValueError(f"{op}: expected a 1-D (C,) or 2-D (N, C) input, got shape {_shape(input)}")
    return t


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    """(1/C) sum_{i != y} w_y max(0, margin - x_y + x_i)^p per example, p in {1, 2}."""
    op = "multi_margin_loss"
    r = _red(size_average, reduce, reduction, op)
    _loss_tensors(op, (input, "input"), (target, "target"))
    if p not in (1, 2):
        raise ValueError(f"{op}: only p == 1 and p == 2 supported, got {p}")
    t = _class_targets(input, target, op)
    x = input if input.ndim == 2 else _ops.unsqueeze(input, 0)
    t2 = t.reshape(-1)
    N, C = _shape(x)
    if t2.shape != (N,):
        raise ValueError(f"{op}: expected target of shape ({N},) for input of shape {_shape(input)}, got {t.shape}")
    ns = B.namespace(t2)
    if ns is xp and t2.size and (t2.min() < 0 or t2.max() >= C):   # (a host read: CPU only)
        raise IndexError(f"{op}: target {int(t2.max() if t2.max() >= C else t2.min())} is out of bounds for "
                         f"{C} classes")
    xy = _ops.gather(x, 1, Tensor._make(t2[:, None]))
    z = _ops.relu(margin - xy + x)
    if p == 2:
        z = z * z
    notself = ns.ones((N, C), dtype=input.dtype)
    notself[ns.arange(N), t2] = 0
    z = z * Tensor._make(notself)
    if weight is not None:
        w = weight._data if isinstance(weight, Tensor) else ns.asarray(weight)
        if w.shape != (C,):
            raise ValueError(f"{op}: weight must have shape ({C},), got {tuple(w.shape)}")
        z = z * Tensor._make(w[t2][:, None].astype(input.dtype))
    loss = _ops.sum(z, 1) / C
    if input.ndim == 1:
        loss = _ops.reshape(loss, ())
    return _reduce(loss, r)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """(1/C) sum over target classes j and non-target classes i of max(0, 1 - (x_j - x_i)); the
    target row lists class indices and ends at the first -1."""
    op = "multilabel_margin_loss"
    r = _red(size_average, reduce, reduction, op)
    _loss_tensors(op, (input, "input"), (target, "target"))
    t = _class_targets(input, target, op)
    if t.shape != _shape(input):
        raise ValueError(f"{op}: target of shape {t.shape} must have the input's shape {_shape(input)}")
    x = input if input.ndim == 2 else _ops.unsqueeze(input, 0)
    t2 = t.reshape(x.shape)
    N, C = _shape(x)
    if t2.__class__ is not _HOST:
        count = _label_counts_device(t2, N, C)
    else:
        count = _label_counts(t2, N, C, op)
    is_t = count > 0
    mask = count[:, :, None] * (~is_t)[:, None, :]            # (N, j target, i non-target)
    z = _ops.relu(1 - _ops.unsqueeze(x, 2) + _ops.unsqueeze(x, 1)) * Tensor._make(mask.astype(input.dtype))
    loss = _ops.sum(z, (1, 2)) / C
    if input.ndim == 1:
        loss = _ops.reshape(loss, ())
    return _reduce(loss, r)


def _label_counts_device(t2, N, C):
    """count[n, c]: how often class c is listed in row n before its first -1, on the device (a
    one-hot scatter-add, no host read; labels >= C are not checked there)."""
    ns = B.namespace(t2)
    live = ns.cumsum(t2 < 0, axis=1) == 0                 # before the first negative entry
    count = ns.zeros((N, C + 1))
    rows = ns.broadcast_to(ns.arange(N)[:, None], t2.shape)
    B.add_at(ns, count, (rows, ns.where(live, ns.clip(t2, 0, C - 1), C)), 1.0)
    return count[:, :C]


def _label_counts(t2, N, C, op):
    """count[n, c] for host targets, refusing a label >= C by name."""
    count = xp.zeros((N, C))
    for n in range(N):
        for c in t2[n]:
            if c < 0:
                break
            if c >= C:
                raise IndexError(f"{op}: target {int(c)} is out of bounds for {C} classes")
            count[n, c] += 1
    return count


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-08,
                     reduce=None, reduction="mean"):
    """exp(x) - y x (log_input) or x - y log(x + eps); ``full`` adds Stirling's term
    y log y - y + log(2 pi y)/2 where y > 1 (differentiable in y too, as PyTorch)."""
    op = "poisson_nll_loss"
    r = _red(size_average, reduce, reduction, op)
    _loss_tensors(op, (input, "input"), (target, "target"))
    if log_input:
        loss = _ops.exp(input) - target * input
    else:
        loss = input - target * _ops.log(input + eps)
    if full:
        t = target._data
        big = t > 1
        ts = _ops.where(big, target, 1.0)
        st = ts * _ops.log(ts) - ts + 0.5 * _ops.log(2 * math.pi * ts)
        loss = loss + _ops.where(big, st, 0.0)
    return _reduce(loss, r)


# ---------------------------------------------------------------- CTC loss
_NEG = -1e30   # "log 0" that keeps logsumexp's gradient finite (exp(-1e30 - m) is exactly 0)


def _lengths(v, n, name, op):
    a = B.to_host(v._data) if isinstance(v, Tensor) else xp.asarray(v)
    a = xp.atleast_1d(a)
    if a.dtype.kind not in "iu" or a.shape != (n,):
        raise RuntimeError(f"{op}: {name} must be {n} integer length(s), got {a.dtype} array of shape {a.shape}")
    return a.astype(xp.int64)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """Connectionist temporal classification: -log of the total probability of all alignments of
    each target (blanks between and around labels, repeats merged), by the forward recursion
    alpha_t(s) = logsumexp(alpha_{t-1}(s), alpha_{t-1}(s-1), alpha_{t-1}(s-2)) + log y_t(l'_s)
    on the blank-extended target l' (the s-2 term only between two different labels).
    ``log_probs`` (T, N, C) or (T, C) are log-softmax outputs; ``targets`` (N, S) padded or
    1-D concatenated.  'mean' divides each loss by its target length, then averages.

    The gradient is the chain rule through that recursion, i.e. the exact derivative with
    respect to ``log_probs`` (-(occupation probability) per (t, c)).  PyTorch returns
    exp(log_probs) minus the occupation instead; the two agree after log_softmax (the extra
    term is removed by log_softmax's backward), which is how CTC is used."""
    op = "ctc_loss"
    _require_tensor(log_probs, "log_probs", op)
    _red(None, None, reduction, op)
    if log_probs.ndim not in (2, 3):
        raise RuntimeError(f"{op}: log_probs must be (T, N, C) or (T, C), got shape {_shape(log_probs)}")
    unb = log_probs.ndim == 2
    lp = _ops.unsqueeze(log_probs, 1) if unb else log_probs
    T, N, C = _shape(lp)
    if not 0 <= blank < C:
        raise RuntimeError(f"{op}: blank must be in label range [0, {C}), got {blank}")
    # On CUDA the targets and lengths are read on the host once (PyTorch takes the lengths as host
    # integers too); the alignment tables are built there and copied to the device.
    tgt = B.to_host(targets._data) if isinstance(targets, Tensor) else xp.asarray(targets)
    ns = B.namespace(lp._data)
    dev = (lambda a: a) if ns is xp else ns.asarray
    if tgt.dtype.kind not in "iu":
        raise RuntimeError(f"{op}: targets must hold integer class indices, got dtype {tgt.dtype}")
    il = _lengths(input_lengths, N, "input_lengths", op)
    tl = _lengths(target_lengths, N, "target_lengths", op)
    if (il > T).any() or (il < 0).any():
        raise RuntimeError(f"{op}: input_lengths must be in [0, {T}], got {il.tolist()}")
    if unb:
        tgt = tgt.reshape(1, -1)
    if tgt.ndim == 2:
        if tgt.shape[0] != N or (tl > tgt.shape[1]).any():
            raise RuntimeError(f"{op}: padded targets of shape {tgt.shape} do not fit {N} sequences of lengths "
                               f"{tl.tolist()}")
        rows = [tgt[n, :tl[n]] for n in range(N)]
    elif tgt.ndim == 1:
        if tgt.size != tl.sum():
            raise RuntimeError(f"{op}: concatenated targets hold {tgt.size} labels but target_lengths sum to "
                               f"{int(tl.sum())}")
        ends = xp.cumsum(tl)
        rows = [tgt[e - n:e] for e, n in zip(ends, tl)]
    else:
        raise RuntimeError(f"{op}: targets must be (N, S) padded or 1-D concatenated, got shape {tgt.shape}")
    for r in rows:
        if r.size and (r.min() < 0 or r.max() >= C or (r == blank).any()):
            raise RuntimeError(f"{op}: target labels must be in [0, {C}) and differ from blank={blank}, got "
                               f"{r.tolist()}")
    Smax = int(tl.max()) if N else 0
    Sx = 2 * Smax + 1
    ext = xp.full((N, Sx), blank, dtype=xp.int64)
    skip = xp.zeros((N, Sx), dtype=bool)        # may come from s - 2
    need = xp.zeros(N, dtype=xp.int64)          # shortest alignment length
    for n, r in enumerate(rows):
        ext[n, 1:2 * r.size:2] = r
        if r.size > 1:
            skip[n, 3:2 * r.size:2] = r[1:] != r[:-1]
        need[n] = r.size + (int((r[1:] == r[:-1]).sum()) if r.size > 1 else 0)
    valid = dev(xp.arange(Sx)[None, :] < (2 * tl + 1)[:, None])
    skip = dev(skip)
    neg = Tensor._make(ns.full((N, 1), _NEG, dtype=lp.dtype))
    neg2 = Tensor._make(ns.full((N, 2), _NEG, dtype=lp.dtype))
    idx = Tensor._make(dev(ext))

    def emit(t):
        return _ops.gather(_ops.getitem(lp, t), 1, idx)         # (N, Sx): log y_t(l'_s)

    init = xp.full((N, Sx), _NEG)
    init[:, 0] = 0.0
    init[:, 1] = xp.where(tl > 0, 0.0, _NEG)
    alpha = Tensor._make(dev(init.astype(lp.dtype))) + emit(0)
    alpha = _ops.where(valid, alpha, _NEG)
    for t in range(1, T):
        a1 = _ops.cat([neg, _ops.narrow(alpha, 1, 0, Sx - 1)], 1)
        a2 = _ops.where(skip, _ops.cat([neg2, _ops.narrow(alpha, 1, 0, Sx - 2)], 1) if Sx > 2 else alpha, _NEG)
        new = _ops.logsumexp(_ops.stack([alpha, a1, a2]), 0) + emit(t)
        new = _ops.where(valid, new, _NEG)
        alpha = _ops.where(dev((t < il)[:, None]), new, alpha)
    last = Tensor._make(dev((2 * tl)[:, None]))
    prev = Tensor._make(dev(xp.maximum(2 * tl - 1, 0)[:, None]))
    end1 = _ops.gather(alpha, 1, last)
    end2 = _ops.where(dev((tl > 0)[:, None]), _ops.gather(alpha, 1, prev), _NEG)
    loss = -_ops.reshape(_ops.logsumexp(_ops.cat([end1, end2], 1), 1), (N,))
    bad = (il < need) | (il == 0)
    if bad.any():
        loss = _ops.where(dev(bad), 0.0 if zero_infinity else xp.inf, loss)
    if reduction == "mean":
        loss = _ops.mean(loss / Tensor._make(dev(xp.maximum(tl, 1).astype(lp.dtype))))
    elif reduction == "sum":
        loss = _ops.sum(loss)
    elif unb:
        loss = _ops.reshape(loss, ())
    return loss


# ---------------------------------------------------------------- linear_cross_entropy
def linear_cross_entropy(input, linear_weight, target, *, linear_bias=None, weight=None, reduction="mean",
                         ignore_index=None, label_smoothing=0.0, options=None):
    """cross_entropy(input @ linear_weight^T (+ linear_bias), target): PyTorch's reference form (no
    chunking; ``options`` is accepted and ignored).  linear_weight (C, *out_features, in_features)."""
    op = "linear_cross_entropy"
    _require_tensor(input, "input", op)
    _require_tensor(linear_weight, "linear_weight", op)
    if input.ndim not in (1, 2):
        raise RuntimeError(f"{op}: expected input with dimensionality 1 or 2, got {input.ndim}")
    if linear_weight.ndim < 2:
        raise RuntimeError(f"{op}: expected linear_weight with dimensionality at least 2, got {linear_weight.ndim}")
    if input.shape[-1] != linear_weight.shape[-1]:
        raise RuntimeError(f"{op}: expected equal input and linear_weight last dimensions (in_features), got "
                           f"{input.shape[-1]} and {linear_weight.shape[-1]}, respectively")
    C, out = linear_weight.shape[0], _shape(linear_weight)[1:-1]
    if linear_bias is not None and _shape(linear_bias) != (C,) + out:
        raise RuntimeError(f"{op}: expected linear_bias shape {(C,) + out}, got {_shape(linear_bias)}")
    if out and input.ndim == 1:
        raise RuntimeError(f"{op}: K-dimensional loss defined by linear_weight shape {_shape(linear_weight)} "
                           f"requires batched input, (N, {input.shape[-1]}), got unbatched input with shape "
                           f"{_shape(input)}")
    lead = _shape(input)[:-1]
    w2 = _ops.reshape(linear_weight, (-1, linear_weight.shape[-1]))
    logits = _ops.reshape(_ops.matmul(input, _ops.transpose(w2, 0, 1)), lead + (C,) + out)
    if linear_bias is not None:
        logits = logits + linear_bias
    tshape = _shape(target) if isinstance(target, Tensor) else xp.asarray(target).shape
    if tuple(tshape) == lead + (C,) + out and ignore_index is not None:
        raise RuntimeError(f"{op}: ignore_index cannot be specified when target contains probabilities")
    return cross_entropy(logits, target, weight=weight, ignore_index=-100 if ignore_index is None else
                              ignore_index, reduction=reduction, label_smoothing=label_smoothing)

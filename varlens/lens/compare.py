"""Compare: predicted against measured second moments, per tensor, forward and backward.

For each record of a :class:`~varlens.lens.probes.Lens` (modules, ops, taps) this computes

* the *local* prediction: the record's rule applied to its own measured input moments
  (does this layer do what theory says?), with its *local ratio* measured/predicted;
* the *chained* prediction: the rule applied to the producers' chained predictions, so
  errors compound along the network as theory says they should (where does the signal
  leave the theory?); the chain restarts at a tensor with no rule;
* the same two for the cotangent, walking the consumers backwards (an addition sends its
  output's cotangent to both inputs: the skip path is part of the sum);
* calibrated intervals for both ratios, from the measured sampling noise of the statistic
  itself: the standard error of the second moment over batch rows (per sample, so a conv's
  C*H*W entries are not taken as independent units) and, for Linear/conv layers, the spread
  over output units (channels) of measured/predicted per unit.  A chained interval adds the
  local log-variances along the chain;
* a verdict: ``non-finite`` (NaN/Inf counted in the tensor), ``zero-init`` (exactly zero and
  predicted zero from zero parameters: Fixup, SkipInit, ReZero, zero-gamma), ``exploding`` /
  ``vanishing`` (second moment over 100x or under 1/100 of the reference signal tensor: the
  first forward, the last backward), ``drift`` (the local ratio outside its interval: this
  layer does not do what its rule says), ``stable``, or ``no rule`` (the note says why).
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from varlens.core import array as _B
from varlens.lens import rules
from varlens.lens.probes import ACT_NAMES, DROPOUT_LIKE, LINEAR_LIKE, NORM_LIKE

Z = 3.0
EXPLODE = 100.0   # a second moment 100x the reference counts as exploding, 1/100 as vanishing
FLAGS = ("drift", "exploding", "vanishing", "non-finite")   # verdicts that count as a warning

SHAPE_OPS = {"reshape", "permute", "expand", "flip", "clone", "cast", "contiguous", "transpose", "view",
             "squeeze", "unsqueeze", "getitem", "flatten", "unflatten", "roll", "repeat", "tile", "copy",
             "identity", "alias", "detach", "to", "narrow", "select", "slice", "unfold"}
ACT_OPS = {"relu", "tanh", "sigmoid", "gelu", "silu", "elu", "softplus", "leaky_relu"}
# kinds whose second moment is not a propagating signal (probabilities, lookups, losses, reductions):
# they get predictions but no exploding/vanishing verdict and are never the reference
NOT_SIGNAL = {"softmax", "log_softmax", "sdpa.softmax", "sdpa.logits", "Softmax", "Softmin", "LogSoftmax",
              "embedding", "Embedding", "sum", "mean", "var", "std", "amax", "log_sum_exp", "cross_entropy",
              "tap"}


@dataclasses.dataclass
class Row:
    key: str
    type: str
    depth: int
    direction: str               # 'forward' or 'backward'
    measured: float | None
    se: float | None
    predicted_local: float | None
    predicted_chain: float | None
    ratio: float | None          # measured / predicted_chain (or local when no chain)
    ci_low: float | None
    ci_high: float | None
    agrees: bool | None          # the local ratio within its interval (the chained one without a local rule)
    relative: float | None       # measured / reference (first forward signal tensor, last backward)
    verdict: str                 # stable / drift / exploding / vanishing / zero-init / non-finite / no rule
    extra: dict
    level: str = "module"        # 'module', 'op' or 'tap'
    path: str = ""
    op: str | None = None
    ratio_local: float | None = None
    local_low: float | None = None
    local_high: float | None = None
    chain_agrees: bool | None = None
    note: str = ""

    def as_dict(self):
        return dataclasses.asdict(self)


# ----------------------------------------------------------------- helpers
def _mom(x):
    return rules.Moments(float(x[0]), float(x[1]))


def _pmoments(arr):
    """Moments of a parameter array (mean, mean square)."""
    a = np.asarray(arr, dtype=np.float64)
    return rules.Moments(float(a.mean()), float((a * a).mean())) if a.size else None


def _scalar(rec, i):
    sc = rec.params.get("scalars")
    return None if not sc else sc.get(i)


def _other_operand(rec, ins, i):
    """The Moments of operand i of a binary op: a tensor input, a parameter, or a Python scalar."""
    c = _scalar(rec, i)
    if c is not None:
        return rules.Moments(c, c * c), "scalar"
    p = rec.param(f"arg{i}")
    if p is not None:
        return _pmoments(p), "param"
    if i < len(ins) and ins[i] is not None:
        return ins[i], "tensor"
    return None, None


def _fmeans(rec, x=None, meas=None):
    """Measured per-feature (per-channel) input means of a Linear/conv record; for a chained
    input ``x`` they are scaled by sqrt(chained q / measured q)."""
    p = rec.params
    n = p.get("in_fmean_n")
    if not n:
        return None
    fm = p["in_fmean_sum"] / n
    if x is not None and meas is not None and meas.q > 0:
        fm = fm * math.sqrt(max(x.q, 0.0) / meas.q)
    return fm


def _profile(rec):
    p = rec.params
    return p["in_profile_sum"] / p["in_profile_n"] if p.get("in_profile_n") else None


def _conv_cfg(rec):
    """(stride, pads, dilation, groups, in_shape) of a conv record (module or op), or None."""
    p = rec.params
    in_shape = p.get("in_shape")
    if in_shape is None:
        return None
    if rec.level == "op":
        return p.get("stride", 1), p.get("pads", 0), p.get("dilation", 1), p.get("groups", 1), in_shape
    m = rec.module
    W = rec.param("weight")
    nd = W.ndim - 2
    pad = getattr(m, "padding", 0)
    if getattr(m, "padding_mode", "zeros") != "zeros":
        pad = 0              # reflect/circular padding repeats real inputs: no zero border
    dil = getattr(m, "dilation", 1)
    dl = tuple(dil) if np.ndim(dil) else (int(dil),) * nd
    if isinstance(pad, str):
        if pad == "valid":
            pads = (0,) * (2 * nd)
        else:                # 'same'
            pads = []
            for d in range(nd):
                tot = dl[d] * (W.shape[2 + d] - 1)
                pads += [tot // 2, tot - tot // 2]
            pads = tuple(pads)
    else:
        pp = tuple(pad) if np.ndim(pad) else (int(pad),) * nd
        pads = tuple(x for v in pp for x in (v, v))
    return getattr(m, "stride", 1), pads, dl, getattr(m, "groups", 1), in_shape


def _companion(lens, rec, suffix):
    """The sdpa sub-record of the same call (``path:sdpa#k`` -> ``path:sdpa.<suffix>#k``)."""
    base, _, k = rec.key.partition("#")
    root = base.rsplit(":", 1)[0] if ":" in base else base
    key = f"{root}:sdpa.{suffix}" + (f"#{k}" if k else "")
    return lens.records.get(key)


def _row_var(rec, chain_in=None, meas_in=None):
    p = rec.params
    n = p.get("row_var_n", 0)
    if not n:
        return None
    rv = p["row_var_sum"] / n
    if chain_in is not None and meas_in is not None:   # the between-row part kept, the rest scaled
        rv = max(chain_in.q - (meas_in.q - rv), 0.0)
    return rv


# ----------------------------------------------------------------- forward rules
def _forward_rule(rec, ins, lens, chain=False, meas_ins=None):
    """(predicted output Moments, note) of one record from its input Moments ``ins`` (a list;
    None where unknown).  The note says why there is no rule when the Moments are None."""
    t = rec.kind
    x = ins[0] if ins else None
    if rec.level == "module" and rec.inputs and rec.inputs[0].n and not math.isfinite(rec.inputs[0].q):
        return None, "no rule: the input is not finite (NaN/Inf)"
    if rec.level == "module":
        m = rec.module
        if t in LINEAR_LIKE and rec.param("weight") is not None and x is not None:
            W, b = rec.param("weight"), rec.param("bias")
            fm = _fmeans(rec, x, meas_ins[0] if meas_ins else None)
            if t.startswith("Conv"):
                cfg = _conv_cfg(rec)
                if cfg is not None:
                    st, pads, dl, _, in_shape = cfg
                    return rules.conv_forward(x, W, b, in_shape, st, pads, dl, channel_means=fm,
                                              profile=_profile(rec)), None
            return rules.linear_forward(x, W, b, feature_means=fm), None
        if t in ACT_NAMES and x is not None:
            name = ACT_NAMES[t]
            act = rules.leaky_relu(getattr(m, "negative_slope", 0.01)) if name == "leaky_relu" else name
            return _act_forward(rec, x, act, meas_ins[0] if meas_ins else None), None
        if t in DROPOUT_LIKE and x is not None:
            return (rules.dropout_forward(x, float(m.p)) if m.training else x), None
        if t in NORM_LIKE and x is not None:
            if t.startswith("BatchNorm") and not m.training:
                return _bn_eval(rec, x, meas_ins[0] if meas_ins else x, m.running_mean, m.running_var,
                                float(getattr(m, "eps", 1e-5)))
            var = rec.inp_var_group or x.var
            shrink = None if chain else rec.params.get("shrink")
            if chain and meas_ins:
                var = max(var + x.var - meas_ins[0].var, 0.0) if rec.inp_var_group else x.var
            return rules.norm_forward(var, rec.param("weight"), rec.param("bias"),
                                      float(getattr(m, "eps", 1e-5) or 1e-5), shrink), None
        if t in ("Flatten", "Unflatten", "Identity") and x is not None:
            return x, None
        if rec.source is not None:
            return None, "source"        # resolved by the caller: the op that produced the output
        if x is None:
            return None, f"no rule: the input of {rec.cls} was not recorded"
        return None, f"no rule for module {rec.cls} (its computation was not seen at op level)"
    if rec.level == "tap":
        return None, "source" if rec.source else "no rule: a tapped tensor (no op recorded it)"
    if rec.inputs and any(im.n and not math.isfinite(im.q) for im in rec.inputs):
        return None, "no rule: an input is not finite (NaN/Inf)"
    return _op_forward(rec, ins, lens, chain, meas_ins)


def _channel_inputs(rec, x=None, meas=None):
    """Per-channel input Moments of an activation (measured on detail steps), scaled to a chained
    input ``x`` (second moments by x.q/meas.q), or None."""
    p = rec.params
    n = p.get("in_c_n")
    if not n:
        return None
    cm, cq = p["in_cmean_sum"] / n, p["in_cq_sum"] / n
    c3 = p["in_c3_sum"] / n if p.get("in_c3_sum") is not None else None
    if c3 is not None:
        v = np.maximum(cq - cm * cm, 1e-300)
        with np.errstate(invalid="ignore", divide="ignore"):
            sk = (c3 - 3 * cm * v - cm ** 3) / v ** 1.5
        sk = np.where(np.isfinite(sk), np.clip(sk, -2.0, 2.0), 0.0)   # the expansion holds for moderate skew
    else:
        sk = np.zeros_like(cm)
    if x is not None and meas is not None and meas.q > 0 and (x.q != meas.q or x.mean != meas.mean):
        r = max(x.q, 0.0) / meas.q
        cm, cq = cm * math.sqrt(r), cq * r
    return cm, cq, sk


def _act_forward(rec, x, act, meas):
    """An activation's output Moments: averaged over channels from each channel's own Gaussian
    (mean and variance measured per channel) where those were recorded, else from the pooled input.
    A residual sum entering a ReLU (a BN output plus a rectified skip) is far from one Gaussian
    pooled over channels, but close to one per channel."""
    ch = _channel_inputs(rec, x, meas)
    if ch is None:
        return rules.activation_forward(x, act)
    a = rules.activation(act)
    cm, cq, sk = ch
    vv = np.maximum(cq - cm * cm, 0.0)
    if not np.any(np.abs(sk) > 0.05):
        if a.name == "relu":
            m1, m2, _ = rules.relu_moments_array(cm, vv)
            return rules.Moments(float(np.mean(m1)), float(np.mean(m2)))
        ms = [a.mean(float(m), float(v)) for m, v in zip(cm, vv)]
        qs = [a.second_moment(float(m), float(v)) for m, v in zip(cm, vv)]
        return rules.Moments(float(np.mean(ms)), float(np.mean(qs)))
    f = a.f
    ms = [rules.gauss_expect_skewed(f, float(m), float(v), float(k)) for m, v, k in zip(cm, vv, sk)]
    qs = [rules.gauss_expect_skewed(lambda z: f(z) ** 2, float(m), float(v), float(k)) for m, v, k in zip(cm, vv, sk)]
    return rules.Moments(float(np.mean(ms)), float(np.mean(qs)))


def _act_backward(c, gq, x, act):
    ch = _channel_inputs(c)
    if ch is None:
        return rules.activation_backward(gq, x, act)
    a = rules.activation(act)
    cm, cq, sk = ch
    vv = np.maximum(cq - cm * cm, 0.0)
    if not np.any(np.abs(sk) > 0.05):
        if a.name == "relu":
            return gq * float(np.mean(rules.relu_moments_array(cm, vv)[2]))
        return gq * float(np.mean([a.deriv_second_moment(float(m), float(v)) for m, v in zip(cm, vv)]))
    df = a.df
    return gq * float(np.mean([rules.gauss_expect_skewed(lambda z: df(z) ** 2, float(m), float(v), float(k))
                               for m, v, k in zip(cm, vv, sk)]))


def _bn_eval(rec, x, meas, rm, rv, eps):
    p = rec.params
    cm, cq = p.get("channel_mean"), p.get("channel_q")
    if cm is None:
        return None, "no rule: per-channel input moments of an eval-mode BatchNorm were not recorded"
    scale_q = x.q / meas.q if meas.q > 0 else 1.0
    scale_m = x.mean / meas.mean if meas.mean else 1.0
    rm = _B.to_host(rm._data if hasattr(rm, "_data") else rm)     # (a device buffer: copied)
    rv = _B.to_host(rv._data if hasattr(rv, "_data") else rv)
    return rules.batchnorm_eval_forward(cm * scale_m, cq * scale_q, np.asarray(rm, dtype=np.float64),
                                        np.asarray(rv, dtype=np.float64), rec.param("weight"),
                                        rec.param("bias"), eps), None


def _op_forward(rec, ins, lens, chain, meas_ins):
    op = rec.kind
    p = rec.params
    x = ins[0] if ins else None
    if op in ("add", "sub"):
        sign = 1.0 if op == "add" else -1.0
        a, ka = _other_operand(rec, ins, 0)
        b, kb = _other_operand(rec, ins, 1)
        if a is None or b is None:
            return None, f"no rule: an operand of {op} was not recorded"
        if ka == "tensor" and kb == "tensor" and rec.cross_n:
            cross = rec.cross / rec.cross_n
            if chain and meas_ins and meas_ins[0] is not None and meas_ins[1] is not None:
                qa, qb = meas_ins[0].q, meas_ins[1].q
                rho = cross / math.sqrt(qa * qb) if qa > 0 and qb > 0 else 0.0
                cross = rho * math.sqrt(max(a.q, 0.0) * max(b.q, 0.0))
            return rules.residual_forward_measured(a, b, cross, sign), None
        return rules.Moments(a.mean + sign * b.mean, max(a.q + b.q + 2 * sign * a.mean * b.mean, 0.0)), None
    if op == "mul":
        a, ka = _other_operand(rec, ins, 0)
        b, kb = _other_operand(rec, ins, 1)
        if a is None or b is None:
            return None, "no rule: an operand of mul was not recorded"
        if ka == "scalar" or kb == "scalar":
            c = _scalar(rec, 0) if ka == "scalar" else _scalar(rec, 1)
            y = b if ka == "scalar" else a
            return rules.Moments(c * y.mean, c * c * y.q), None
        if ka == "tensor" and kb == "tensor" and rec.cross_n and meas_ins:
            qa, qb = meas_ins[0].q, meas_ins[1].q
            c = rec.cross / rec.cross_n
            if qa > 0 and qb > 0 and c / math.sqrt(qa * qb) > 0.999:      # x * x
                return rules.gaussian_power_forward(a, 2), None
        return rules.product_forward(a, b), None
    if op == "div":
        c = _scalar(rec, 1)
        if c is not None and x is not None and c != 0:
            return rules.Moments(x.mean / c, x.q / (c * c)), None
        return None, "no rule: division by a tensor (the ratio of random tensors has no closed form here)"
    if op == "neg" and x is not None:
        return rules.Moments(-x.mean, x.q), None
    if op == "linear":
        W = rec.param("weight")
        if W is not None and x is not None:
            fm = _fmeans(rec, x, meas_ins[0] if meas_ins else None)
            return rules.linear_forward(x, W, rec.param("bias"), feature_means=fm), None
        if x is not None and len(ins) > 1 and ins[1] is not None:
            return rules.matmul_forward(x, ins[1], (p.get("in_shape") or (1,))[-1]), None
        return None, "no rule: linear without a recorded weight"
    if op == "matmul":
        W = rec.param("arg1")
        if W is not None and x is not None:
            return rules.linear_forward(x, np.swapaxes(np.asarray(W), -1, -2).reshape(W.shape[-1], -1)), None
        if x is not None and len(ins) > 1 and ins[1] is not None:
            k = (rec.inputs[0].shape or (1,))[-1]
            return rules.matmul_forward(x, ins[1], k), None
        return None, "no rule: an operand of matmul was not recorded"
    if op in ACT_OPS and x is not None:
        act = rules.leaky_relu(p.get("negative_slope", p.get("slope", 0.01))) if op == "leaky_relu" else op
        return _act_forward(rec, x, act, meas_ins[0] if meas_ins else None), None
    if op in rules.UNARY and x is not None:
        return rules.unary_forward(rules.UNARY[op], x), None
    if op == "pow" and x is not None:
        e = _scalar(rec, 1)
        if e is not None and float(e).is_integer() and 1 <= e <= 8:
            return rules.gaussian_power_forward(x, int(e)), None
        return None, "no rule: pow with a non-integer or tensor exponent"
    if op in ("softmax", "log_softmax"):
        rv = _row_var(rec, x if chain else None, meas_ins[0] if (chain and meas_ins) else None)
        n = p.get("n")
        if rv is None or not n:
            return None, "no rule: the logits' row variance was not recorded"
        if op == "softmax":
            return rules.softmax_forward(rv, (np.array([n]), np.array([1]))), None
        return rules.log_softmax_forward(rv, n), None
    if op == "sdpa.logits":
        if len(ins) > 1 and ins[0] is not None and ins[1] is not None:
            return rules.attention_logits_moments(p["d"], ins[0], ins[1], p["scale"]), None
        return None, "no rule: q or k not recorded"
    if op == "sdpa.softmax":
        lg = _companion(lens, rec, "logits")
        if lg is None:
            return None, "no rule: the logits of this attention call were not recorded"
        rv = _row_var(lg)
        if chain:
            lc = getattr(lg, "_chain", None)
            if lc is not None:
                rv = _row_var(lg, lc, rules.Moments(lg.out.mean, lg.out.second_moment))
        return rules.softmax_forward(rv, p["n_valid"]), None
    if op == "sdpa":
        sm = _companion(lens, rec, "softmax")
        if sm is None or len(ins) < 3 or ins[2] is None:
            return None, "no rule: the attention probabilities or v were not recorded"
        qp = sm.out.second_moment
        if chain and getattr(sm, "_chain", None) is not None:
            qp = sm._chain.q
        n = sm.params.get("n", 1)
        v = ins[2]
        return rules.Moments(v.mean, n * qp * v.var + v.mean * v.mean), None
    if op == "dropout" and x is not None:
        pp = p.get("p")
        return (rules.dropout_forward(x, pp) if pp else x), None
    if op in ("layer_norm", "rms_norm", "batch_norm") and x is not None:
        if op == "batch_norm" and not p.get("batch_stats", True):
            return _bn_eval(rec, x, meas_ins[0] if meas_ins else x, p["running_mean"], p["running_var"],
                            float(p.get("eps", 1e-5)))
        var = rec.inp_var_group or (x.q if op == "rms_norm" else x.var)
        shrink = None if chain else p.get("shrink")
        if op == "rms_norm":
            return rules.norm_forward(var, rec.param("weight"), None, float(p.get("eps") or 1e-6), shrink), None
        return rules.norm_forward(var, rec.param("weight"), rec.param("bias"), float(p.get("eps", 1e-5)),
                                  shrink), None
    if op == "embedding":
        W = rec.param("weight")
        if W is not None:
            return rules.embedding_forward(W), None
        return None, "no rule: the embedding table is not a parameter"
    if op == "conv":
        W = rec.param("weight")
        if W is not None and x is not None and p.get("in_shape") is not None:
            return rules.conv_forward(x, W, rec.param("bias"), p["in_shape"], p.get("stride", 1),
                                      p.get("pads", 0), p.get("dilation", 1),
                                      channel_means=_fmeans(rec, x, meas_ins[0] if meas_ins else None),
                                      profile=_profile(rec)), None
        return None, "no rule: conv without a recorded weight"
    if op == "avg_pool" and x is not None:
        k = p.get("kernel_size", 2)
        K = int(np.prod(k)) if np.ndim(k) else int(k) ** 2
        return rules.avg_pool_forward(x, K, float(p.get("lag_corr", 0.0))), None
    if op == "max_pool":
        return None, ("no rule: the maximum of spatially correlated, non-Gaussian inputs has no closed form "
                      "(backward: each gradient goes to one input)")
    if op in ("cat", "stack"):
        parts = [(i, m) for i, m in enumerate(ins) if m is not None]
        sizes = [float(np.prod(rec.inputs[i].shape or (1,))) for i, _ in parts]
        if not parts or len(parts) < len(rec.inputs):
            return None, f"no rule: an input of {op} was not recorded"
        tot = sum(sizes)
        return rules.Moments(sum(s * m.mean for s, (_, m) in zip(sizes, parts)) / tot,
                             sum(s * m.q for s, (_, m) in zip(sizes, parts)) / tot), None
    if op == "pad" and x is not None:
        fr = float(np.prod(p.get("in_shape", (1,)))) / float(np.prod(p.get("out_shape", (1,))))
        return rules.Moments(x.mean * fr, x.q * fr), None
    if op in SHAPE_OPS and x is not None:
        return x, None
    if op in ("sum", "mean"):
        return None, f"no rule: {op} over correlated entries (the result depends on their correlation)"
    if x is None and rec.inputs:
        return None, f"no rule: the input of {op} was not recorded"
    return None, f"no rule for op '{op}'"


# ----------------------------------------------------------------- backward rules
def _backward_rule(c, i, gq, lens):
    """Predicted E[g^2] that record ``c`` sends to its input ``i`` from its output cotangent's
    second moment ``gq`` (None: no rule; the note is returned second)."""
    t = c.kind
    inp = c.inputs[i] if i < len(c.inputs) else None
    x = rules.Moments(inp.mean, inp.q) if inp is not None and inp.n else None
    if c.level == "module":
        m = c.module
        W = c.param("weight")
        if t.startswith("Conv") and W is not None:
            cfg = _conv_cfg(c)
            if cfg is not None:
                st, pads, dl, groups, in_shape = cfg
                return rules.conv_backward_padded(gq, W, in_shape, st, pads, dl, groups), None
            return rules.conv_backward(gq, W, getattr(m, "stride", 1)), None
        if t in LINEAR_LIKE and W is not None:
            return rules.linear_backward(gq, W), None
        if t in ACT_NAMES and x is not None:
            name = ACT_NAMES[t]
            act = rules.leaky_relu(getattr(m, "negative_slope", 0.01)) if name == "leaky_relu" else name
            return _act_backward(c, gq, x, act), None
        if t in DROPOUT_LIKE:
            return (rules.dropout_backward(gq, float(m.p)) if m.training else gq), None
        if t in NORM_LIKE and x is not None:
            if t.startswith("BatchNorm") and not m.training:
                rv = _B.to_host(m.running_var._data if hasattr(m.running_var, "_data") else m.running_var)
                return rules.batchnorm_eval_backward(gq, np.asarray(rv, dtype=np.float64), c.param("weight"),
                                                     float(getattr(m, "eps", 1e-5))), None
            return rules.norm_backward(gq, c.inp_var_group or x.var, c.param("weight")), None
        if t in ("Flatten", "Unflatten", "Identity"):
            return gq, None
        return None, f"no backward rule for module {c.cls}"
    op = t
    p = c.params
    if op in ("add", "sub", "mul") and inp is not None and inp.shape is not None and p.get("out_shape"):
        # an input broadcast over the output gets the sum of its copies' cotangents (independent terms)
        bc = float(np.prod(p["out_shape"])) / max(float(np.prod(inp.shape)), 1.0)
    else:
        bc = 1.0
    if bc != 1.0:
        return None, ("no backward rule: the input was broadcast, and the sum of its copies' cotangents "
                      "depends on their correlation across the broadcast dimensions")
    if op in ("add", "sub"):
        return gq, None
    if op in ("neg", "cat", "stack", "pad", "sum"):
        return gq, None
    if op == "mul":
        j = 1 - i
        o, k = _other_operand(c, [rules.Moments(im.mean, im.q) if im.n else None for im in c.inputs], j)
        if o is None:
            return None, "no backward rule: the other factor of mul was not recorded"
        return gq * o.q, None
    if op == "div":
        s = _scalar(c, 1)
        if i == 0 and s:
            return gq / (s * s), None
        return None, "no backward rule: division by a tensor"
    if op == "linear" and i == 0:
        W = c.param("weight")
        return (rules.linear_backward(gq, W), None) if W is not None else (None, "no weight")
    if op == "matmul":
        W = c.param("arg1")
        if W is not None and i == 0:
            return rules.linear_backward(gq, np.swapaxes(np.asarray(W), -1, -2).reshape(W.shape[-1], -1)), None
        if len(c.inputs) > 1 and c.inputs[0].n and c.inputs[1].n:
            A, B = c.inputs[0], c.inputs[1]
            if i == 0:
                return gq * (B.shape[-1] if B.shape else 1) * B.q, None
            return gq * (A.shape[-2] if A.shape and len(A.shape) > 1 else 1) * A.q, None
        return None, "no backward rule: an operand of matmul was not recorded"
    if op in ACT_OPS and x is not None:
        act = rules.leaky_relu(p.get("negative_slope", 0.01)) if op == "leaky_relu" else op
        return _act_backward(c, gq, x, act), None
    if op in rules.UNARY and x is not None:
        return rules.unary_backward(gq, rules.UNARY[op], x), None
    if op == "softmax":
        rv = _row_var(c)
        return (rules.softmax_backward(gq, rv, p["n"]), None) if rv is not None else (None, "no row variance")
    if op == "log_softmax":
        rv = _row_var(c)
        if rv is None:
            return None, "no row variance"
        n = p["n"]
        _, p2, _ = rules.softmax_moments(rv, n)
        return gq * max(1 - 2.0 / n + n * p2, 0.0), None
    if op == "sdpa":
        sm, lg = _companion(lens, c, "softmax"), _companion(lens, c, "logits")
        if sm is None or lg is None or len(c.inputs) < 3:
            return None, "no backward rule: attention internals not recorded"
        qq, qk, qv = c.inputs[0], c.inputs[1], c.inputs[2]
        L, S = qq.shape[-2], qk.shape[-2]
        qp = sm.out.second_moment
        if i == 2:
            return gq * L * qp, None
        gp = gq * qv.shape[-1] * qv.q
        gs = rules.softmax_backward(gp, _row_var(lg), S)
        sc = lg.params["scale"]
        return (sc * sc * S * gs * qk.q, None) if i == 0 else (sc * sc * L * gs * qq.q, None)
    if op == "dropout" and i == 0:
        pp = p.get("p")
        return (rules.dropout_backward(gq, pp) if pp else gq), None
    if op in ("layer_norm", "rms_norm", "batch_norm") and i == 0 and x is not None:
        if op == "batch_norm" and not p.get("batch_stats", True):
            return rules.batchnorm_eval_backward(gq, p["running_var"], c.param("weight"), float(p.get("eps", 1e-5))), None
        var = c.inp_var_group or (x.q if op == "rms_norm" else x.var)
        return rules.norm_backward(gq, var, c.param("weight")), None
    if op == "conv" and i == 0:
        W = c.param("weight")
        if W is None or p.get("in_shape") is None:
            return None, "no weight"
        return rules.conv_backward_padded(gq, W, p["in_shape"], p.get("stride", 1), p.get("pads", 0),
                                          p.get("dilation", 1), p.get("groups", 1)), None
    if op == "avg_pool":
        k = p.get("kernel_size", 2)
        s = p.get("stride") or k
        K = int(np.prod(k)) if np.ndim(k) else int(k) ** 2
        S = int(np.prod(s)) if np.ndim(s) else int(s) ** 2
        return rules.avg_pool_backward(gq, K, S), None
    if op in SHAPE_OPS | {"max_pool", "mean"}:
        ins, outs = p.get("in_shape"), p.get("out_shape")
        if ins is None or outs is None:
            return None, "no shapes"
        r = float(np.prod(outs)) / max(float(np.prod(ins)), 1.0)
        if op == "mean":
            return gq * r * r, None
        return gq * r, None
    return None, f"no backward rule for op '{op}'"


# ----------------------------------------------------------------- calibration
def _rel_var_rows(st):
    q = st.second_moment if st.n else float("nan")
    se = st.q_se
    if st.n and q > 0 and math.isfinite(se):
        return (se / q) ** 2
    return 0.0


def _rel_var_units(measured, predicted):
    """Relative variance of sum(measured)/sum(predicted) from the spread over units of
    measured_j - R predicted_j (independent units under the rule)."""
    if measured is None or predicted is None or len(measured) != len(predicted) or len(measured) < 3:
        return 0.0
    u = np.asarray(measured, dtype=np.float64)
    pr = np.asarray(predicted, dtype=np.float64)
    if not (np.all(np.isfinite(u)) and np.all(np.isfinite(pr))) or pr.sum() <= 0 or u.sum() <= 0:
        return 0.0
    R = u.sum() / pr.sum()
    e = u - R * pr
    n = len(u)
    return float((e @ e) / (n * (n - 1))) / float(u.mean()) ** 2


def _logit_kurtosis_term(rec, lens):
    """Model tolerance of the softmax rule for attention: a logit q.k summed over d products is
    not Gaussian (excess kurtosis 6/d for Gaussian q, k), which moves E[e^{2z}] by a relative
    4 v^2/d at logit variance v (the first cumulant beyond the variance); its square is added
    to the local relative variance."""
    lg = _companion(lens, rec, "logits")
    if lg is None:
        return 0.0
    rv = _row_var(lg)
    d = lg.params.get("d")
    if rv is None or not d:
        return 0.0
    return (4.0 * rv * rv / d) ** 2


def _forward_units_var(rec, x, lens):
    """The units term of a Linear/conv record's local interval (0 if it does not apply)."""
    src = lens.records.get(rec.source) if rec.source else None
    meas = rec.unit_second_moments if rec.unit_q is not None else (
        src.unit_second_moments if src is not None else None)
    if meas is None or x is None:
        return 0.0
    W, b = rec.param("weight"), rec.param("bias")
    if W is None:
        return 0.0
    if W.ndim > 2:
        cfg = _conv_cfg(rec) if rec.level == "module" else (
            (rec.params.get("stride", 1), rec.params.get("pads", 0), rec.params.get("dilation", 1), 1,
             rec.params.get("in_shape")))
        if cfg is None or cfg[4] is None:
            return 0.0
        pred = rules.conv_forward(x, W, b, cfg[4], cfg[0], cfg[1], cfg[2], units=True, channel_means=_fmeans(rec),
                                  profile=_profile(rec))
    else:
        pred = rules.linear_forward_units(x, W, b, feature_means=_fmeans(rec))
    return _rel_var_units(meas, pred)


def _backward_units_var(rec, edges, lens):
    """Units term of a tensor's backward local interval when its one consumer is a Linear/conv:
    per input unit i, measured E[g_i^2] against (sum_j W_ji^2) E[gy^2]."""
    if len(edges) != 1:
        return 0.0
    c, i = edges[0]
    if i != 0 or not (c.kind in LINEAR_LIKE or c.kind in ("linear", "conv")):
        return 0.0
    src = lens.records.get(rec.source) if rec.source else None
    meas = rec.grad_unit_second_moments if rec.grad_unit_q is not None else (
        src.grad_unit_second_moments if src is not None else None)
    W = c.param("weight")
    if meas is None or W is None:
        return 0.0
    W = np.asarray(W, dtype=np.float64)
    col = (W * W).sum(axis=tuple(d for d in range(W.ndim) if d != 1))
    return _rel_var_units(meas, col)


# ----------------------------------------------------------------- compare
def _edges(recs, lens):
    """producer key -> [(consumer record, input index)], deduplicated between views: where ops
    were recorded, a module consumer whose own ops read the same tensor is left out (the ops
    carry the data flow), and a container never consumes its own child's output."""
    by = {}
    for c in recs:
        for i, im in enumerate(c.inputs):
            if im.producer is not None and im.producer in lens.records:
                by.setdefault(im.producer, []).append((c, i))
    out = {}
    for key, es in by.items():
        prod = lens.records[key]
        ops = [(c, i) for c, i in es if c.level == "op"]
        keep = []
        for c, i in es:
            if c.level == "module" and c.source is not None and c.source in (key, prod.source):
                continue              # a pass-through module (Identity): a view of this very tensor
            if c.level == "module":
                if prod.path.startswith(c.path + ".") or c.path == "(model)" or (
                        prod.level == "op" and prod.path == c.path):
                    continue
                if any(o.path == c.path or o.path.startswith(c.path + ".") for o, _ in ops):
                    continue
            if c.level == "tap":
                continue
            keep.append((c, i))
        out[key] = keep
    # a module that returned an op's output is a view of the same tensor: its readers read the op's
    for r in recs:
        if r.source is not None and r.level != "op" and r.key in out:
            out.setdefault(r.source, [])
            out[r.source] = out[r.source] + [e for e in out[r.key] if e not in out[r.source]]
    return out


TRUNK_DEPTH = 2


def _signal(rec):
    """A tensor of the network's trunk: a module output at most TRUNK_DEPTH names deep (the
    layers of a Sequential, the blocks of a ModuleList, a wrapper's children), not a
    probability, lookup or loss.  Only these get the exploding/vanishing verdicts: a tensor
    inside a residual branch is small by design (attention averages its gradient over the
    tokens; a zero-initialised branch is zero), and the skip path carries the signal."""
    if rec.level != "module" or rec.kind in NOT_SIGNAL or rec.path == "(model)":
        return False
    return rec.path.count(".") + 1 <= TRUNK_DEPTH


def compare(lens, modules=None, level="module"):
    """Rows for every record (forward and backward), in order of execution.

    ``level``: 'module' (default: module calls and taps; op records that no module returned
    are included where no module records were made, e.g. ops=True with modules='leaves'
    still shows module rows only), 'op' (op records and taps), 'all', or a predicate
    ``f(record) -> bool``.  ``modules='ruled'`` keeps only records with a rule.
    Predictions use every record whatever the view (a module's chain runs through the ops).
    """
    recs = lens.ordered()
    for r in recs:
        r._chain = r._local = None
        r._tied = False
    fw_vloc, fw_vch, notes = {}, {}, {}
    # ---- forward
    for rec in recs:
        meas_ins = [rules.Moments(im.mean, im.q) if im.n and math.isfinite(im.q) else None for im in rec.inputs]
        chain_ins, vin = [], 0.0
        for im, mi in zip(rec.inputs, meas_ins):
            pr = lens.records.get(im.producer) if im.producer else None
            if pr is not None and pr._chain is not None:
                chain_ins.append(pr._chain)
                vin = max(vin, fw_vch.get(pr.key, 0.0))
            else:
                chain_ins.append(mi)
        local, note = _forward_rule(rec, meas_ins, lens, False, meas_ins)
        if note == "source":
            src = lens.records[rec.source]
            rec._local, rec._chain = src._local, src._chain
            fw_vloc[rec.key], fw_vch[rec.key] = fw_vloc.get(src.key, 0.0), fw_vch.get(src.key, 0.0)
            notes[rec.key] = notes.get(src.key, "")
            continue
        chain = None
        if local is not None:
            chain, _ = _forward_rule(rec, chain_ins, lens, True, meas_ins)
        vl = _rel_var_rows(rec.out)
        if local is not None and (rec.kind in LINEAR_LIKE or rec.kind in ("linear", "conv")):
            vl += _forward_units_var(rec, meas_ins[0] if meas_ins else None, lens)
        if local is not None and rec.kind == "sdpa.softmax":
            vl += _logit_kurtosis_term(rec, lens)
        rec._local, rec._chain = local, chain
        fw_vloc[rec.key] = vl
        fw_vch[rec.key] = vin + vl if chain is not None else 0.0
        notes[rec.key] = note or ""
    # ---- backward: per tensor, the sum over its consumer edges
    edges = _edges(recs, lens)
    bw_ch, bw_vch, bw_vloc, bnotes = {}, {}, {}, {}
    for rec in reversed(recs):
        rec._glocal = rec._gchain = None
    for rec in reversed(recs):
        if rec.source is not None and rec.level != "op":
            continue                                       # resolved from the source below
        es = [(c, i) for c, i in edges.get(rec.key, []) if c.grad.n or c.grad.nan or c.grad.inf]
        if not es:
            if rec.grad.n:
                bw_ch[rec.key] = rec.grad.second_moment
                bw_vch[rec.key] = 0.0
            bnotes[rec.key] = ("no rule: nothing recorded consumes this tensor (the model's output, or a tensor "
                               "read outside the model: the backward chain starts here)")
            continue
        loc = ch = 0.0
        ok_loc = ok_ch = True
        vch = 0.0
        why = ""
        for c, i in es:
            gq_c = c.grad.second_moment if c.grad.n else float("nan")
            a, w1 = _backward_rule(c, i, gq_c, lens)
            b, _ = _backward_rule(c, i, bw_ch.get(c.key, gq_c), lens)
            if a is None:
                ok_loc, why = False, w1 or why
            else:
                loc += a
            if b is None:
                ok_ch = False
            else:
                ch += b
            vch = max(vch, bw_vch.get(c.key, 0.0))
        vl = _rel_var_rows(rec.grad) + _backward_units_var(rec, es, lens)
        rec._glocal = loc if ok_loc else None
        rec._gchain = ch if ok_ch else None
        bw_vloc[rec.key] = vl
        bnotes[rec.key] = "" if ok_loc else why
        if rec._gchain is not None and math.isfinite(rec._gchain):
            bw_ch[rec.key], bw_vch[rec.key] = rec._gchain, vch + vl
        elif rec.grad.n:
            bw_ch[rec.key], bw_vch[rec.key] = rec.grad.second_moment, 0.0
    for rec in recs:                                       # module views of an op's tensor
        if rec.source is not None and rec.level != "op":
            src = lens.records[rec.source]
            rec._glocal, rec._gchain = src._glocal, src._gchain
            for d in (bw_ch, bw_vch, bw_vloc, bnotes):
                if src.key in d:
                    d[rec.key] = d[src.key]

    # forward: E[x^2] against the first trunk tensor; a normalisation sets the scale anew (its
    # output's level does not depend on its input's), so it becomes the reference from there on
    fwd_rel, ref_q = {}, None
    for r in recs:
        if not (_signal(r) and r.out.n and r.out.second_moment > 0):
            continue
        if ref_q is None or _is_norm(r, lens):
            ref_q = r.out.second_moment
        fwd_rel[r.key] = r.out.second_moment / ref_q
    fwd_ref = fwd_rel
    # backward: E[g^2] relative to the next signal tensor (in backward order) of the same size per
    # sample, multiplied along; a change of size (a classifier head, a pooling, a flatten) carries
    # the level over unchanged, so it is not read as growth or decay
    bwd_rel, prev, level_ = {}, None, 1.0
    for r in reversed(recs):
        if not (_signal(r) and r.grad.n and r.grad.second_moment > 0 and r.grad.shape is not None):
            continue
        size = int(np.prod(r.grad.shape[1:])) if len(r.grad.shape) > 1 else 1
        if prev is not None and prev[0] == size and prev[1] > 0 and not prev[2]:
            level_ *= r.grad.second_moment / prev[1]
        bwd_rel[r.key] = level_
        prev = (size, r.grad.second_moment, _is_norm(r, lens))     # through a norm: the level carries over
    for r in recs:
        if r.source is not None and r.source in bwd_rel and r.key not in bwd_rel:
            bwd_rel[r.key] = bwd_rel[r.source]
    bwd_ref = bwd_rel
    emb = {id(a) for a in (r.param("weight") for r in recs if r.kind in ("Embedding", "embedding")) if a is not None}
    for r in recs:
        base = lens.records.get(r.source, r) if r.source else r
        if base.kind in ("Linear", "linear") and emb and id(base.param("weight")) in emb:
            r._tied = True
    rows = []
    shown = [r for r in recs if _in_view(r, level, lens)]
    for depth, rec in enumerate(shown):
        if modules == "ruled" and rec._local is None and rec._chain is None:
            continue
        if rec.out.calls:
            rows.append(_row(rec, depth, "forward", rec.out, rec._local.q if rec._local is not None else None,
                             rec._chain.q if rec._chain is not None else None, fw_vloc.get(rec.key, 0.0),
                             fw_vch.get(rec.key, 0.0), fwd_ref, notes.get(rec.key, "")))
        if rec.grad.calls:
            rows.append(_row(rec, depth, "backward", rec.grad, rec._glocal, rec._gchain, bw_vloc.get(rec.key, 0.0),
                             bw_vch.get(rec.key, 0.0), bwd_ref, bnotes.get(rec.key, "")))
    return rows


NORM_OPS = {"layer_norm", "batch_norm", "rms_norm", "group_norm", "instance_norm"}


def _is_norm(rec, lens):
    """A normalisation layer (module kind, or the op a module's output came from)."""
    if rec.kind in NORM_LIKE or rec.kind in NORM_OPS:
        return True
    src = lens.records.get(rec.source) if rec.source else None
    return src is not None and src.kind in NORM_OPS


def _in_view(rec, level, lens):
    if callable(level):
        return bool(level(rec))
    if level == "all":
        return True
    if level == "op":
        return rec.level in ("op", "tap")
    return rec.level in ("module", "tap")


# relative variance floor: float32 statistics and the O(eps/var) terms of normalisation make a
# ratio exact only to about 1e-4
FLOOR = 1e-4 ** 2


def _interval(measured, predicted, var):
    var = var + FLOOR
    if measured is None or predicted is None or not math.isfinite(predicted) or predicted <= 0 \
            or not math.isfinite(measured):
        return None, None, None, None
    ratio = measured / predicted
    half = Z * math.sqrt(max(var, 0.0))
    lo, hi = ratio * math.exp(-half), ratio * math.exp(half)    # symmetric on the log scale
    return ratio, lo, hi, bool(lo <= 1.0 <= hi)


def _zero_params(rec):
    """True if a parameter of the record is exactly zero everywhere (a zero-initialised branch)."""
    names = ["weight"] + [k for k in rec.arrays if k.startswith("arg")]
    for n in names:
        a = rec.param(n)
        if a is not None and a.size and not np.any(a):
            return True
    return False


def _row(rec, depth, direction, st, pred_l, pred_c, v_loc, v_ch, ref, note):
    meas = st.second_moment if st.n else None
    rl, llo, lhi, lok = _interval(meas, pred_l, v_loc)
    rc, clo, chi, cok = _interval(meas, pred_c, v_ch)
    ratio, lo, hi = (rc, clo, chi) if rc is not None else (rl, llo, lhi)
    nonfin = st.nan + st.inf
    rel = ref.get(rec.key) if meas else (0.0 if meas == 0.0 else None)
    extra = {"mean": st.mean if st.n else None, "var": st.var if st.n else None, "max_abs": st.amax,
             "frac_zero": st.zeros / st.n if st.n else None, "nan": st.nan, "inf": st.inf}
    if direction == "forward":
        if st.sat_n:
            extra["frac_saturated"] = st.sat / st.sat_n
        if st.entropy_n:
            extra["mean_entropy"] = st.entropy_sum / st.entropy_n
        if rec.kind in ("conv",) or rec.kind.startswith("Conv"):
            cfg = _conv_cfg(rec)
            W = rec.param("weight")
            if cfg is not None and W is not None and cfg[4] is not None:
                extra["padding_fraction"] = rules.padding_fraction(W.shape, cfg[4], cfg[0], cfg[1], cfg[2])
    else:
        if rec.weight_grad.n:
            extra["weight_grad_second_moment"] = rec.weight_grad.second_moment
            extra["weight_second_moment"] = rec.weight.second_moment
            if rec.kind == "Linear" and rec.inp_n and rec.out.n and rec.out.shape:
                # gW sums gy x^T over every row of every leading axis of one call
                rows_n = rec.out.n / rec.out.calls / max(rec.out.shape[-1], 1)
                extra["weight_grad_predicted"] = rules.linear_weight_grad(rec.grad.second_moment, rec.inp_q, rows_n)
    h = st.headroom()
    if h is not None:
        extra["headroom"] = h
    zero_pred = (pred_l == 0.0) or (pred_l is None and pred_c == 0.0)
    if nonfin or (st.calls and not st.n):
        verdict = "non-finite"
        note = note or f"{st.nan} NaN, {st.inf} Inf"
    elif meas == 0.0 and (zero_pred or _zero_params(rec)):
        verdict = "zero-init"
    elif _signal(rec) and rel is not None and rel > EXPLODE:
        verdict = "exploding"
    elif _signal(rec) and rel is not None and rel < 1.0 / EXPLODE:
        verdict = "vanishing"
    elif meas == 0.0 and direction == "backward":
        verdict = "zero-init" if zero_pred else "vanishing"
    elif lok is False and getattr(rec, "_tied", False) and direction == "forward":
        verdict = "no rule"
        note = ("no rule: the weight is tied to an embedding whose rows are in this layer's input, so input and "
                "weights are not independent as the Linear rule assumes (the ratio is shown)")
    elif lok is False and not rec.params.get("param_derived"):
        verdict = "drift"
    elif pred_l is None and pred_c is None:
        verdict = "no rule"
    else:
        verdict = "stable"
    agrees = lok if lok is not None else cok
    return Row(rec.key, rec.kind, depth, direction, meas, st.q_se if st.n and st.rows >= 2 else None,
               pred_l, pred_c, ratio, lo, hi, agrees, rel, verdict, extra, level=rec.level, path=rec.path,
               op=rec.op, ratio_local=rl, local_low=llo, local_high=lhi, chain_agrees=cok, note=note)


def flagged(rows):
    """Rows with a warning verdict (drift, exploding, vanishing, non-finite)."""
    return [r for r in rows if r.verdict in FLAGS]


def summary(rows, lens=None):
    """Per direction: overall verdict, the first depth where it goes wrong, and the drift count.

    With ``lens``: also the first record that held a NaN/Inf (``first_nonfinite``)."""
    out = {}
    for direction in ("forward", "backward"):
        rs = [r for r in rows if r.direction == direction]
        if not rs:
            continue
        bad = [r for r in rs if r.verdict in ("exploding", "vanishing", "non-finite")]
        order = rs if direction == "forward" else list(reversed(rs))
        first = next((r for r in order if r.verdict in ("exploding", "vanishing", "non-finite")), None)
        rels = [r.relative for r in rs if r.relative]
        out[direction] = {
            "verdict": first.verdict if first else "stable",
            "first_bad_depth": first.depth if first else None,
            "first_bad_tensor": first.key if first else None,
            "n_tensors": len(rs), "n_unstable": len(bad),
            "n_drift": sum(1 for r in rs if r.verdict == "drift"),
            "n_compared": sum(1 for r in rs if r.agrees is not None),
            "n_zero_init": sum(1 for r in rs if r.verdict == "zero-init"),
            "n_no_rule": sum(1 for r in rs if r.verdict == "no rule"),
            "min_relative": min(rels) if rels else None, "max_relative": max(rels) if rels else None,
            "nan_or_inf": sum(r.extra.get("nan", 0) + r.extra.get("inf", 0) for r in rs),
            "n_nonfinite": sum(1 for r in rs if r.verdict == "non-finite"),
        }
        if lens is not None:
            out[direction]["first_nonfinite"] = lens.first_nonfinite.get(direction)
    return out

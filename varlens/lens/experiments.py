"""Small-scale reproductions of published signal-propagation results, with the variance lens.

Each function builds its model, runs it, and returns plain numbers (and the lens rows),
so tests can assert on them and ``varlens lens`` can plot them.  Sizes default to
something that runs in a second or two on a laptop CPU.

* :func:`he_2015`: 30-layer ReLU net, Xavier vs He: pre-activation second moment falls by
  about 2^-29 from the first to the last layer under Xavier (equal widths: Var W = 1/n,
  factor 1/2 per layer) and stays of order one under He (He et al. 2015, §2.2).
* :func:`he_2015_training`: the same depth trained briefly: Xavier stalls, He converges.
* :func:`glorot_bengio_2010`: tanh net with the "standard" U[-1/sqrt(n), 1/sqrt(n)]
  init: the back-propagated gradient shrinks layer by layer towards the input while the
  weight gradient stays roughly flat (Glorot & Bengio 2010, §4.2.2).
* :func:`tanh_order_chaos`: finite tanh networks against the mean-field recursion:
  per-layer gradient factor chi_1 and the phase on each side of sigma_w^2 = 1 (sigma_b = 0)
  (Poole et al. 2016; Schoenholz et al. 2017).
* :func:`xiong_2020`: post-LN vs pre-LN Transformer blocks at initialisation: the last
  layer's weight-gradient norm is O(1) in the depth L for post-LN and shrinks like
  1/sqrt(L) for pre-LN (Xiong et al. 2020, Theorem 1); at 16 layers the post-LN norms
  grow towards the output (about 1.5x from first to last, their Figure 3).  Unlike their
  figure, the pre-LN per-layer norms here are not flat but fall towards the output
  (about 0.35x; see docs/lens.md).
* :func:`attention_scaling`: attention logit variance d (unscaled) vs 1 (with 1/sqrt(d)),
  with softmax entropy and saturation per head.
"""
from __future__ import annotations

import math

import numpy as np

import varlens as vl
from varlens import nn
from varlens.lens import meanfield
from varlens.lens.compare import compare
from varlens.lens.probes import Lens

INITS = ("he", "xavier", "lecun", "glorot_standard", "variance_preserving")


def _wgen(seed):
    """The weight generator for ``seed``: offset so that it never replays the data stream
    (NumPy's default_rng(seed) and varlens.Generator().manual_seed(seed) are the same PCG64
    stream, and weights equal to the inputs would correlate them)."""
    return vl.Generator().manual_seed(1_000_003 + seed)


def init_linear(layer, init, act="relu", sigma_w2=None, sigma_b2=0.0, generator=None):
    """Initialise one Linear in place: he | xavier | lecun | glorot_standard | variance_preserving,
    or the mean-field form W ~ N(0, sigma_w2/fan_in), b ~ N(0, sigma_b2) when sigma_w2 is given."""
    w = layer.weight
    fan_in = w.shape[1]
    if sigma_w2 is not None:
        nn.init.normal_(w, 0.0, math.sqrt(sigma_w2 / fan_in), generator=generator)
        if layer.bias is not None:
            if sigma_b2 > 0:
                nn.init.normal_(layer.bias, 0.0, math.sqrt(sigma_b2), generator=generator)
            else:
                nn.init.zeros_(layer.bias)
        return layer
    if init == "he":
        nn.init.kaiming_normal_(w, nonlinearity="relu", generator=generator)
    elif init == "xavier":
        nn.init.xavier_normal_(w, generator=generator)
    elif init == "lecun":
        nn.init.lecun_normal_(w, generator=generator)
    elif init == "glorot_standard":      # Glorot & Bengio's "standard" heuristic U[-1/sqrt(n), 1/sqrt(n)]
        b = 1.0 / math.sqrt(fan_in)
        nn.init.uniform_(w, -b, b, generator=generator)
    elif init == "variance_preserving":
        nn.init.variance_preserving_relu_(w, generator=generator)
    else:
        raise ValueError(f"init_linear: init must be one of {INITS}, got {init!r}")
    if layer.bias is not None:
        nn.init.zeros_(layer.bias)
    return layer


_ACT = {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "gelu": nn.GELU, "identity": nn.Identity}


def build_mlp(depth=30, width=256, act="relu", init="he", in_features=None, out_features=None, bias=True,
              sigma_w2=None, sigma_b2=0.0, final_act=True, seed=0):
    """A plain MLP: ``depth`` Linear(width, width) layers, each followed by ``act``.

    ``in_features``/``out_features`` default to ``width``.  With ``final_act=False`` the last
    Linear has no activation after it (a readout).
    """
    if act not in _ACT:
        raise ValueError(f"build_mlp: act must be one of {sorted(_ACT)}, got {act!r}")
    if not (isinstance(depth, int) and depth >= 1 and isinstance(width, int) and width >= 1):
        raise ValueError(f"build_mlp: depth and width must be positive ints, got depth={depth!r}, width={width!r}")
    gen = _wgen(seed)
    layers = []
    for i in range(depth):
        fi = in_features if (i == 0 and in_features) else width
        fo = out_features if (i == depth - 1 and out_features) else width
        lin = nn.Linear(fi, fo, bias=bias)
        init_linear(lin, init, act, sigma_w2, sigma_b2, gen)
        layers.append(lin)
        if final_act or i < depth - 1:
            layers.append(_ACT[act]())
    return nn.Sequential(*layers)


def projection_loss(out, seed=1):
    """loss = sum(out * R)/rows with a fixed Gaussian R: its cotangent R/rows does not depend on the
    forward pass, so the backward recursion starts from a known, independent signal."""
    g = np.random.default_rng(seed)
    R = vl.tensor(g.standard_normal(tuple(out.shape)).astype(out.dtype))
    return (out * R).sum() / out.shape[0]


def lens_run(model, x, steps=1, loss="projection", every=1, modules="leaves"):
    """Run ``steps`` forward/backward passes on ``x`` under a Lens; returns (lens, rows)."""
    lens = Lens(model, every=every, modules=modules)
    try:
        for s in range(steps):
            out = model(x)
            l = projection_loss(out, seed=s + 1) if loss == "projection" else loss(out)
            l.backward()
            lens.step()
            model.zero_grad()
    finally:
        lens.detach()
    return lens, compare(lens)


def _linear_rows(rows, direction="forward"):
    return [r for r in rows if r.type == "Linear" and r.direction == direction]


def he_2015(depth=30, width=256, batch=128, seed=0, inits=("xavier", "he")):
    """First-to-last pre-activation second moment ratio per init (He et al. 2015 Fig. / §2.2).

    Returns {init: {"ratio": q_L/q_1, "predicted": chained prediction ratio, "per_layer": ratio^(1/(L-1)),
    "rows": rows}}.  Expected: xavier ~ 2^-(depth-1), he ~ 1.
    """
    x = vl.tensor(np.random.default_rng(seed).standard_normal((batch, width)).astype(np.float32))
    out = {}
    for init in inits:
        model = build_mlp(depth, width, "relu", init, seed=seed)
        _, rows = lens_run(model, x)
        lin = _linear_rows(rows)
        q1, qL = lin[0].measured, lin[-1].measured
        p1 = lin[0].predicted_chain
        pL = lin[-1].predicted_chain
        out[init] = {"ratio": qL / q1, "predicted": pL / p1 if p1 else None,
                     "per_layer": (qL / q1) ** (1.0 / (depth - 1)), "rows": rows}
    return out


def he_2015_training(depth=30, width=64, batch=64, steps=60, lr=0.01, seed=0):
    """Train the deep ReLU net briefly on a fixed regression task; returns loss curves per init.

    Target: a random linear map of the input (learnable).  SGD with momentum.  Xavier's
    signal reaches the output shrunk by ~2^-depth, so its gradients are tiny and it stalls;
    He's converges.  Returns {init: [loss at each step]}.
    """
    from varlens import optim
    from varlens.train.loop import train_loop
    g = np.random.default_rng(seed)
    X = vl.tensor(g.standard_normal((batch, width)).astype(np.float32))
    T = vl.tensor((g.standard_normal((batch, width)) @ g.standard_normal((width, 1)) / math.sqrt(width))
                  .astype(np.float32))
    curves = {}
    for init in ("xavier", "he"):
        model = build_mlp(depth, width, "relu", init, out_features=1, final_act=False, seed=seed)
        opt = optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        curves[init] = train_loop(model, lambda _, model=model: ((model(X) - T) ** 2).mean(), range(steps), opt)
    return curves


def glorot_bengio_2010(depth=5, width=256, batch=256, seed=0):
    """Tanh net with U[-1/sqrt(n), 1/sqrt(n)]: per layer (input to output), the second moment of the
    back-propagated gradient at each Linear output and of each weight gradient.

    Returns {"grad": [...], "weight_grad": [...], "grad_factor": geometric mean of grad[l]/grad[l+1],
    "weight_grad_spread": max/min of weight_grad, "predicted_grad_factor": 1/(n Var W E[tanh'^2])}.
    """
    x = vl.tensor(np.random.default_rng(seed).standard_normal((batch, width)).astype(np.float32))
    model = build_mlp(depth, width, "tanh", "glorot_standard", seed=seed)
    lens, rows = lens_run(model, x)
    back = _linear_rows(rows, "backward")
    grads = [r.measured for r in back]
    wgrads = [lens.records[r.key].weight_grad.second_moment for r in back]
    factors = [grads[i] / grads[i + 1] for i in range(len(grads) - 1)]
    gf = float(np.exp(np.mean(np.log(factors))))
    return {"grad": grads, "weight_grad": wgrads, "grad_factor": gf,
            "weight_grad_spread": max(wgrads) / min(wgrads), "grad_spread": max(grads) / min(grads),
            "rows": rows}


def _pair_inputs(batch, width, c0, g):
    """Two batches of inputs with per-pair correlation c0 and unit second moment."""
    a = g.standard_normal((batch, width))
    b = c0 * a + math.sqrt(1 - c0 * c0) * g.standard_normal((batch, width))
    return np.concatenate([a, b]).astype(np.float64)


def tanh_order_chaos(sigma_w2s=(0.5, 0.9, 1.1, 1.5, 2.5), sigma_b2=0.0, depth=30, width=256, batch=32, seed=0,
                     c0=0.6):
    """Finite tanh networks against the mean-field recursion, per sigma_w^2.

    For each sigma_w^2: chi_1 predicted, the measured per-layer factor of the back-propagated
    gradient's second moment (geometric mean over the last half of the layers), the
    correlation of paired inputs after ``depth`` layers measured vs the recursion, and the
    predicted phase.  Returns a list of dicts.
    """
    g = np.random.default_rng(seed)
    X = vl.tensor(_pair_inputs(batch, width, c0, g))
    out = []
    for s2 in sigma_w2s:
        model = build_mlp(depth, width, "tanh", sigma_w2=s2, sigma_b2=sigma_b2, seed=seed).double()
        lens, rows = lens_run(model, X)
        lin_b = _linear_rows(rows, "backward")
        gq = [r.measured for r in lin_b]
        half = len(gq) // 2
        fac = float(np.exp(np.mean(np.log([gq[i + 1] / gq[i] for i in range(half, len(gq) - 1)]))))
        # correlation of the paired inputs at the last layer's post-activation
        with vl.no_grad():
            h = model(X).numpy()
        a, b = h[:batch], h[batch:]
        c_meas = float(np.mean(np.sum(a * b, 1) / np.sqrt(np.sum(a * a, 1) * np.sum(b * b, 1))))
        # recursion for (q, c) of the pre-activations, then the post-activation correlation
        q, c = s2 * 1.0 + sigma_b2, c0          # first pre-activation: inputs have unit second moment
        for _ in range(depth - 1):
            q_next = meanfield.q_map(q, "tanh", s2, sigma_b2)
            c = (s2 * meanfield._pair_expectation(np.tanh, q, c) + sigma_b2) / q_next
            q = q_next
        num = meanfield._pair_expectation(np.tanh, q, c)
        den = meanfield._pair_expectation(np.tanh, q, 1.0)
        c_pred = num / den if den > 0 else float("nan")
        qs = meanfield.q_star("tanh", s2, sigma_b2)
        out.append({"sigma_w2": s2, "chi1": meanfield.chi1("tanh", s2, sigma_b2, qs),
                    "chi1_at_depth": s2 * meanfield.activation("tanh").deriv_second_moment(0.0, q),
                    "measured_factor": 1.0 / fac, "phase": meanfield.phase("tanh", s2, sigma_b2),
                    "c_measured": c_meas, "c_predicted": c_pred, "q_star": qs})
    return out


class _Attention(nn.Module):
    """Single multi-head self-attention from tensor ops (optionally without the 1/sqrt(d) scale)."""

    def __init__(self, dim, heads, scaled=True):
        super().__init__()
        self.heads, self.dh, self.scaled = heads, dim // heads, scaled
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim, bias=False)
        self.lens = None

    def forward(self, x):
        B, T, D = x.shape
        qkv = self.qkv(x).reshape(B, T, 3, self.heads, self.dh).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        s = q @ k.transpose(-2, -1)
        if self.scaled:
            s = s / math.sqrt(self.dh)
        if self.lens is not None:
            s = self.lens.tap("attn.logits", s)
        p = s.softmax(-1)
        if self.lens is not None:
            p = self.lens.tap("attn.probs", p, kind="softmax")
        y = (p @ v).permute(0, 2, 1, 3).reshape(B, T, D)
        return self.proj(y)


class _Block(nn.Module):
    """Transformer block (attention + 4x ReLU MLP), post-LN or pre-LN (Xiong et al. 2020)."""

    def __init__(self, dim, heads, pre_ln, hidden_mult=4):
        super().__init__()
        self.pre_ln = pre_ln
        self.attn = _Attention(dim, heads)
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.fc1, self.fc2 = nn.Linear(dim, hidden_mult * dim), nn.Linear(hidden_mult * dim, dim)
        self.act = nn.ReLU()

    def forward(self, x):
        if self.pre_ln:
            x = x + self.attn(self.ln1(x))
            return x + self.fc2(self.act(self.fc1(self.ln2(x))))
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.fc2(self.act(self.fc1(x))))


def _xavier_all(model, gen):
    for m in model.modules():
        if isinstance(m, nn.Linear):
            nn.init.xavier_normal_(m.weight, generator=gen)
            if m.bias is not None:
                nn.init.zeros_(m.bias)


def _transformer(layers, dim, heads, pre, hidden_mult, seed):
    gen = _wgen(seed)
    blocks = [_Block(dim, heads, pre, hidden_mult) for _ in range(layers)]
    model = nn.Sequential(*(blocks + ([nn.LayerNorm(dim)] if pre else [])))
    _xavier_all(model, gen)
    return model, blocks


def xiong_2020(depths=(2, 4, 8, 16), dim=32, heads=4, seq_len=16, batch=8, seeds=(0, 1), hidden_mult=1):
    """Weight-gradient norms at initialisation, post-LN vs pre-LN Transformer blocks (Xiong et al. 2020).

    Xavier init, a final LayerNorm for pre-LN (as in the paper), the FFN simplified to
    dim -> hidden_mult*dim -> dim, a random-projection loss on the outputs.  For each
    number of layers L: the Frobenius norm of the last block's second FFN weight gradient
    (Xiong's Theorem 1: O(1) in L for post-LN, O(1/sqrt(L)) for pre-LN), averaged over
    ``seeds``, and the per-layer norms (input to output) at the largest L.
    Returns {"depths", "post_last", "pre_last", "post_layers", "pre_layers"}.
    """
    out = {"depths": list(depths), "post_last": [], "pre_last": []}
    for L in depths:
        acc = {"post": [], "pre": []}
        for seed in seeds:
            g = np.random.default_rng(seed)
            x = vl.tensor(g.standard_normal((batch, seq_len, dim)).astype(np.float32))
            for name, pre in (("post", False), ("pre", True)):
                model, blocks = _transformer(L, dim, heads, pre, hidden_mult, seed)
                projection_loss(model(x), seed=seed + 1).backward()
                norms = [float(np.linalg.norm(b.fc2.weight.grad.numpy())) for b in blocks]
                acc[name].append(norms)
        for name in ("post", "pre"):
            arr = np.array(acc[name])
            out[name + "_last"].append(float(arr[:, -1].mean()))
            if L == max(depths):
                out[name + "_layers"] = arr.mean(0).tolist()
    return out


def attention_scaling(d=64, heads=4, seq_len=32, batch=16, seed=0):
    """Logit variance, softmax entropy and saturation per head, with and without 1/sqrt(d).

    q and k come from a bias-free Linear with LeCun init on unit-variance inputs, so each
    entry has unit variance and the unscaled logit variance is predicted to be d_head
    (seed 000 Costume 1, seed 002), 1 with the scale.
    """
    g = np.random.default_rng(seed)
    x = vl.tensor(g.standard_normal((batch, seq_len, d)).astype(np.float32))
    res = {"d": d, "d_head": d // heads, "seq_len": seq_len, "max_entropy": math.log(seq_len), "by_scale": {}}
    for label, scaled in (("with 1/sqrt(d)", True), ("without", False)):
        gen = _wgen(seed)
        att = _Attention(d, heads, scaled)
        nn.init.lecun_normal_(att.qkv.weight, generator=gen)
        nn.init.lecun_normal_(att.proj.weight, generator=gen)
        lens = Lens(att, grads=False)
        att.lens = lens
        with vl.no_grad():
            att(x)
        att.lens = None
        lens.detach()
        # per head statistics from the raw taps (recomputed per head for clarity)
        with vl.no_grad():
            B, T, D = x.shape
            qkv = att.qkv(x).reshape(B, T, 3, heads, D // heads).permute(2, 0, 3, 1, 4).numpy()
        q, k = qkv[0], qkv[1]
        s = np.einsum("bhtd,bhsd->bhts", q, k) / (math.sqrt(D // heads) if scaled else 1.0)
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        per_head = []
        for h in range(heads):
            qq = float(np.mean(q[:, h] ** 2))
            kk = float(np.mean(k[:, h] ** 2))
            ent = -(p[:, h] * np.log(np.maximum(p[:, h], 1e-300))).sum(-1)
            from varlens.lens.rules import attention_logits
            per_head.append({"logit_var": float(s[:, h].var()),
                             "logit_var_predicted": attention_logits(D // heads, qq, kk,
                                                                     math.sqrt(D // heads) if scaled else None),
                             "entropy": float(ent.mean()),
                             "frac_saturated": float(np.mean(p[:, h].max(-1) > 0.99))})
        res["by_scale"][label] = per_head
        res.setdefault("lens", {})[label] = {k2: lens.records[k2].out.as_dict() for k2 in lens.records
                                             if k2.startswith("attn.")}
    return res

"""Pictures for sequence models: a hidden unit's activation over a passage (seed 003 §6.2,
Karpathy-style), an attention matrix as a heatmap, and per-time-step gradient norms."""
from __future__ import annotations

import html as _html

import numpy as np


def _colour(v):
    """Activation in [-1, 1] -> background colour: blue for negative, red for positive."""
    v = float(np.clip(v, -1.0, 1.0))
    a = abs(v)
    if v >= 0:
        r, g, b = 255, int(255 * (1 - a)), int(255 * (1 - a))
    else:
        r, g, b = int(255 * (1 - a)), int(255 * (1 - a)), 255
    return f"#{r:02x}{g:02x}{b:02x}"


def neuron_html(text, activations, path=None, title="hidden unit", top=None):
    """An HTML page colouring each character of ``text`` by ``activations`` (one value in
    [-1, 1] per character, e.g. a tanh hidden unit).  ``top``: optional list (per character)
    of (char, prob) pairs, shown as a tooltip (the notes' top-5 next-character view)."""
    acts = np.asarray(activations, dtype=np.float64).reshape(-1)
    if len(acts) != len(text):
        raise ValueError(f"neuron_html: need one activation per character: text has {len(text)} "
                         f"characters, activations has {len(acts)}")
    spans = []
    for i, (ch, v) in enumerate(zip(text, acts)):
        tip = f"{v:+.3f}"
        if top is not None:
            tip += " | next: " + " ".join(f"{c!r}:{p:.2f}" for c, p in top[i])
        shown = "&#8629;<br>" if ch == "\n" else _html.escape(ch).replace(" ", "&nbsp;")
        spans.append(f'<span title="{_html.escape(tip)}" style="background:{_colour(v)}">{shown}</span>')
    page = ("<!doctype html><html><head><meta charset='utf-8'><title>" + _html.escape(title) +
            "</title></head><body style='font-family:monospace;font-size:15px;line-height:1.6'>"
            f"<h3>{_html.escape(title)}</h3><p>red = positive, blue = negative (range -1..1)</p><div>"
            + "".join(spans) + "</div></body></html>")
    if path is not None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(page)
    return page


def attention_heatmap(weights, src_tokens, tgt_tokens, path, title="attention"):
    """Save a (target x source) attention matrix as a PNG heatmap."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (len(tgt_tokens), len(src_tokens)):
        raise ValueError(f"attention_heatmap: weights have shape {w.shape} but the tokens give "
                         f"({len(tgt_tokens)}, {len(src_tokens)})")
    fig, ax = plt.subplots(figsize=(0.4 * len(src_tokens) + 2, 0.4 * len(tgt_tokens) + 1.5))
    im = ax.imshow(w, cmap="viridis", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(src_tokens)), [repr(t)[1:-1] for t in src_tokens])
    ax.set_yticks(range(len(tgt_tokens)), [repr(t)[1:-1] for t in tgt_tokens])
    ax.set_xlabel("source")
    ax.set_ylabel("output")
    ax.set_title(title)
    fig.colorbar(im, ax=ax)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_gradient_norms(curves, path, title="||dL/dx_t|| for a loss at the last step"):
    """Line plot (log scale) of gradient norm against time step, one curve per model."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.5, 4))
    pos = [v[v > 0].min() for v in map(np.asarray, curves.values()) if np.any(np.asarray(v) > 0)]
    floor = min(pos) if pos else 1e-300
    for name, vals in curves.items():
        vals = np.asarray(vals, dtype=np.float64)
        ax.semilogy(np.arange(len(vals)), np.maximum(vals, floor), label=name)
    ax.set_xlabel("time step t of the input")
    ax.set_ylabel("gradient norm")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def input_gradient_norms(rnn, T=100, batch=16, seed=0):
    """||dL/dx_t|| for every input step t, where L is the sum of the last step's output of the
    recurrent module ``rnn`` (input_size taken from it) on N(0, 1) inputs.

    This is the backward view over time of seed 003 §6.1.2-§6.1.3: in a plain RNN the
    cotangent reaching x_t is multiplied by W_hh^T diag(f') once per step between t and T,
    so it shrinks (or grows) roughly geometrically; the LSTM's additive cell path
    (c_t = f*c_{t-1} + ...) lets it survive much longer.  Mean over the batch."""
    import varlens as vl
    rng = np.random.default_rng(seed)
    dt = rnn.weight_ih_l0.dtype
    x = vl.tensor(rng.standard_normal((T, batch, rnn.input_size)).astype(dt), requires_grad=True)
    out = rnn(x)[0]
    out[-1].sum().backward()
    g = x.grad.numpy()
    return np.sqrt((g * g).sum(-1)).mean(-1)

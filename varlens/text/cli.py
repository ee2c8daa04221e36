"""``varlens seq ...``: the sequence-model experiments of issue 7 (seed 003 §6), each writing
its numbers to stdout and its pictures to ``--out``.

* ``varlens seq seq2seq``   date rewriting, encoder-decoder without and with Bahdanau attention:
  exact match and BLEU on held-out dates, greedy and beam search, attention heatmap PNG.
* ``varlens seq charlm``    character-level LSTM on the King James Bible: validation bits per
  character, samples at several temperatures, one hidden unit coloured over a passage (HTML).
* ``varlens seq vanishing`` ||dL/dx_t|| against t for a tanh RNN and an LSTM (PNG).
"""
from __future__ import annotations

import os


def add_arguments(p):
    p.add_argument("experiment", choices=["seq2seq", "charlm", "vanishing"])
    p.add_argument("--out", default="runs/seq", help="folder for the PNG/HTML outputs")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--steps", type=int, default=1500, help="char-LM optimiser steps")
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)


def _seq2seq(args):
    from varlens.text.translation import evaluate, train_seq2seq, translate
    from varlens.text.tasks import date_pairs
    from varlens.text.visualize import attention_heatmap
    pairs = date_pairs(6000, seed=args.seed)
    train, test = pairs[:5000], pairs[5000:]
    res = {}
    for att in (False, True):
        r = train_seq2seq(train, test, attention=att, epochs=args.epochs, hidden_size=args.hidden,
                          seed=args.seed)
        res[att] = r
        name = "with Bahdanau attention" if att else "without attention"
        print(f"{name}: {r['steps']} steps in {r['seconds']:.0f} s; held-out ({len(test)} dates) exact match "
              f"{100 * r['exact_match']:.1f}%, BLEU {100 * r['bleu']:.1f} (greedy)")
        small = test[:200]
        b = evaluate(r["model"], r["vocab"], small, beam_size=4)
        print(f"   beam 4 on the first 200: exact {100 * b['exact_match']:.1f}%, BLEU {100 * b['bleu']:.1f}")
        for (s, t), p in list(zip(test, r["predictions"]))[:5]:
            print(f"   {s!r:>28} -> {p!r}  (target {t!r})")
    r = res[True]
    src = test[1][0]
    outs, attns = translate(r["model"], r["vocab"], [src], beam_size=1, record_attention=True)
    tgt_tokens = list(outs[0]) + ["<eos>"]
    path = os.path.join(args.out, "attention_dates.png")
    attention_heatmap(attns[0], list(src), tgt_tokens, path, title=f"{src!r} -> {outs[0]!r}")
    print(f"attention heatmap: {path}")


def _charlm(args):
    import numpy as np

    from varlens.text.char_lm import load_english, train_char_lm
    from varlens.core.tensor import Tensor
    from varlens.text.visualize import neuron_html
    text = load_english(2_000_000)
    r = train_char_lm(text, hidden_size=args.hidden, max_steps=args.steps, epochs=100, lr=3e-3,
                      seed=args.seed)
    print(f"char-LM LSTM({args.hidden}): {r['steps']} steps in {r['seconds']:.0f} s "
          f"({r['chars_per_second']:.0f} chars/s); validation {r['val_bpc']:.3f} bits per character")
    m, vocab = r["model"], r["vocab"]
    for temp in (0.3, 0.7, 1.0):
        print(f"sample at T={temp}: {m.sample(vocab, 'And the LORD', 120, temperature=temp, generator=1)!r}")
    passage = text[-1600:-600]
    hs = m.hidden_states(Tensor._make(vocab.encode(passage)[:, None])).numpy()[:, 0, :]  # (T, H)
    # look for a unit that tracks a simple property of the text (Karpathy-style): the
    # position within the line (verse), the position within the word, or "inside a clause
    # that a comma opened"; keep the best-correlated (unit, property)
    feats = {"position in line": np.zeros(len(passage)), "position in word": np.zeros(len(passage)),
             "after a comma in this verse": np.zeros(len(passage))}
    line_pos = word_pos = comma = 0
    for i, ch in enumerate(passage):
        feats["position in line"][i] = line_pos
        feats["position in word"][i] = word_pos
        feats["after a comma in this verse"][i] = comma
        line_pos = 0 if ch == "\n" else line_pos + 1
        word_pos = 0 if not ch.isalpha() else word_pos + 1
        comma = 0 if ch == "\n" else (1 if ch == "," else comma)
    best = (0.0, 0, "")
    for fname, f in feats.items():
        for j in range(hs.shape[1]):
            c = np.corrcoef(hs[:, j], f)[0, 1]
            if np.isfinite(c) and abs(c) > best[0]:
                best = (abs(c), j, fname)
    corr, unit, fname = best
    for fname2, f in feats.items():
        cs = [abs(np.corrcoef(hs[:, j], f)[0, 1]) for j in range(hs.shape[1])]
        print(f"   best |corr| of a unit with {fname2!r}: {np.nanmax(cs):.2f} (unit {int(np.nanargmax(cs))})")
    path = os.path.join(args.out, f"charlm_unit{unit}.html")
    neuron_html(passage, hs[:, unit], path, title=f"LSTM unit {unit}: |corr| {corr:.2f} with {fname}")
    print(f"hidden unit {unit} over a passage: {path}")


def _vanishing(args):
    import varlens as vl
    from varlens import nn
    from varlens.text.visualize import input_gradient_norms, plot_gradient_norms
    vl.manual_seed(args.seed)
    T = 100
    curves = {}
    models = [("tanh RNN", nn.RNN(16, 64).double())]
    for bf in (0.0, 1.0, 3.0):
        vl.manual_seed(args.seed)
        m = nn.LSTM(16, 64).double()  # float64 so the tiny norms do not underflow
        m.bias_hh_l0.data[64:128] += bf  # forget-gate bias (gate order i, f, g, o)
        models.append((f"LSTM, forget bias +{bf:g}", m))
    for name, m in models:
        g = input_gradient_norms(m, T=T)
        curves[name] = g
        print(f"{name:>24} (H=64): ||dL/dx_t|| at t=T-1 {g[-1]:.2e}, T-10 {g[-10]:.2e}, T-50 {g[-50]:.2e}, "
              f"t=0 {g[0]:.2e}")
    path = os.path.join(args.out, "vanishing_gradients.png")
    plot_gradient_norms(curves, path)
    print(f"plot: {path}")


def run(args):
    os.makedirs(args.out, exist_ok=True)
    {"seq2seq": _seq2seq, "charlm": _charlm, "vanishing": _vanishing}[args.experiment](args)
    return 0

"""The encoder-decoder Transformer on the date-rewriting task of issue 7 (same 5,000 training
and 1,000 held-out pairs as ``varlens seq seq2seq``: date_pairs(6000, seed=0)), greedy exact
match and BLEU; compare with the RNN encoder-decoder's numbers in docs/sequence.md.

    python -m varlens.examples.transformer_dates [--epochs 3] [--lr 2e-3] [--rnn]
"""
from __future__ import annotations

import argparse


def run(epochs=3, lr=2e-3, rnn=False, seed=0, log=print):
    from varlens.text.translation import train_transformer_seq2seq
    from varlens.text.tasks import date_pairs
    pairs = date_pairs(6000, seed=seed)
    train, test = pairs[:5000], pairs[5000:]
    out = {}
    r = train_transformer_seq2seq(train, test, epochs=epochs, lr=lr, seed=seed)
    n = sum(p.numel() for p in r["model"].parameters())
    out["transformer"] = {"params": n, "steps": r["steps"], "seconds": r["seconds"],
                          "exact_match": r["exact_match"], "bleu": r["bleu"]}
    log(f"Transformer ({n} params): {r['steps']} steps in {r['seconds']:.0f} s, exact match "
        f"{100 * r['exact_match']:.1f}%, BLEU {100 * r['bleu']:.1f}")
    wrong = [(s, t, p) for (s, t), p in zip(test, r["predictions"]) if p != t][:5]
    for s, t, p in wrong:
        log(f"   {s!r} -> {p!r} (want {t!r})")
    if rnn:
        from varlens.text.translation import train_seq2seq
        q = train_seq2seq(train, test, attention=True, epochs=epochs, seed=seed)
        n = sum(p.numel() for p in q["model"].parameters())
        out["rnn_attention"] = {"params": n, "steps": q["steps"], "seconds": q["seconds"],
                                "exact_match": q["exact_match"], "bleu": q["bleu"]}
        log(f"GRU + Bahdanau ({n} params): exact match {100 * q['exact_match']:.1f}%")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--rnn", action="store_true")
    a = ap.parse_args(argv)
    run(a.epochs, a.lr, a.rnn)


if __name__ == "__main__":
    main()

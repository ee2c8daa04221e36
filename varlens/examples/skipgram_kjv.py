"""Skip-gram word vectors on the King James Bible, with nearest-neighbour queries.

    python -m varlens.examples.skipgram_kjv [--epochs 1] [--dim 64]
"""
from __future__ import annotations

import argparse
import time

QUERIES = ("god", "king", "water", "son", "gold", "sheep", "jerusalem", "sin")


def run(epochs=1, dim=64, window=4, min_count=5, seed=0, log=print):
    from varlens.datasets import load_kjv
    from varlens.text.embeddings import WordVocab, nearest, tokenize_words, train_skipgram
    t0 = time.time()
    words = tokenize_words(load_kjv())
    vocab = WordVocab(words, min_count=min_count)
    ids = vocab.encode(words)
    model, losses = train_skipgram(ids, len(vocab), vocab.counts, dim=dim, window=window, epochs=epochs,
                                   batch_size=1024, lr=0.005, subsample=1e-4, seed=seed, log=log)
    vec = model.vectors()
    res = {"words": len(words), "vocab": len(vocab), "loss_first": losses[0],
           "loss_last100": sum(losses[-100:]) / 100, "seconds": time.time() - t0,
           "neighbours": {q: nearest(vec, vocab, q, 5) for q in QUERIES if q in vocab.stoi}}
    for q, nb in res["neighbours"].items():
        log(f"{q:10s} " + ", ".join(f"{w} ({s:.2f})" for w, s in nb))
    log({k: v for k, v in res.items() if k != "neighbours"})
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--dim", type=int, default=64)
    a = ap.parse_args(argv)
    run(epochs=a.epochs, dim=a.dim)


if __name__ == "__main__":
    main()

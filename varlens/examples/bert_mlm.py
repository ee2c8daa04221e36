"""BERT-style MLM pre-training (word tokens) on the King James Bible, then fine-tuning to tell a real verse
from the same words shuffled; compared with the same model fine-tuned from scratch.

    python -m varlens.examples.bert_mlm [--steps 600] [--seed 0]

Prints the MLM loss, both test accuracies and the wall time (numbers in docs/transformers.md).
"""
from __future__ import annotations

import argparse
import time


def run(steps=800, n_train=3000, n_test=1000, epochs=3, seq_len=24, seed=0, log=print):
    import varlens as vl
    from varlens.datasets import load_kjv
    from varlens.models.bert import BERT
    from varlens.text.mlm import WordVocabBERT, corpus_lines, finetune, pretrain_mlm, shuffled_verse_task
    text = load_kjv()
    # word tokens (seen >= 3 times); clauses of 6 to seq_len - 1 words
    lines = [s for s in corpus_lines(text, min_words=6) if len(s.split()) <= seq_len - 1]
    vocab = WordVocabBERT(text, min_count=3)
    # pre-train on the first 80% of the lines, classify lines from the last 20%
    cut = int(0.8 * len(lines))
    pairs = shuffled_verse_task(lines[cut:], n_train + n_test, seed=seed)
    train, test = pairs[:n_train], pairs[n_train:]
    res = {}
    t0 = time.time()
    vl.manual_seed(seed)
    model = BERT(len(vocab), max_len=seq_len, d_model=64, n_layer=2, n_head=4)
    losses = pretrain_mlm(model, vocab, lines[:cut], steps, lr=2e-3, seed=seed, log=log)
    res["mlm_loss_first"], res["mlm_loss_last50"] = losses[0], sum(losses[-50:]) / 50
    res["pretrain_s"] = time.time() - t0
    res["acc_pretrained"] = finetune(model, vocab, train, test, epochs=epochs, seed=seed)
    vl.manual_seed(seed)
    scratch = BERT(len(vocab), max_len=seq_len, d_model=64, n_layer=2, n_head=4)
    res["acc_scratch"] = finetune(scratch, vocab, train, test, epochs=epochs, seed=seed)
    res["total_s"] = time.time() - t0
    log(res)
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=800)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    run(steps=a.steps, seed=a.seed)


if __name__ == "__main__":
    main()

"""The character-level LSTM language model trained in varlens and in PyTorch with the same
model, initial weights, batches, optimiser (Adam), gradient clipping and step budget;
prints both validation bits-per-character (issue 7 target: within 0.05 BPC) and a sample.

    .venv/bin/python benchmarks/char_lm_vs_torch.py [--steps 1500] [--chars 2000000]
"""
from __future__ import annotations

import argparse
import math
import os
import time

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = os.environ.get("VARLENS_BENCH_THREADS", "1")  # see bench_rnn.py

import torch  # noqa: E402

import varlens as vl  # noqa: E402
from varlens.models.char_rnn import CharRNN  # noqa: E402
from varlens.text.char_lm import (evaluate_bpc, iterate_chunks, load_english, make_streams, split_text,  # noqa: E402
                                  train_char_lm)


class TorchCharRNN(torch.nn.Module):
    def __init__(self, V, H, E, L):
        super().__init__()
        self.embed = torch.nn.Embedding(V, E)
        self.rnn = torch.nn.LSTM(E, H, num_layers=L)
        self.head = torch.nn.Linear(H, V)

    def forward(self, x, state=None):
        out, state = self.rnn(self.embed(x), state)
        return self.head(out), state


def train_torch(model, tr, va, seq_len, steps, lr, clip, epochs=100):
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    step, t0, chars = 0, time.perf_counter(), 0
    for _ in range(epochs):
        state = None
        for x, y in iterate_chunks(tr, seq_len):
            if state is not None:
                state = tuple(s.detach() for s in state)
            logits, state = model(torch.from_numpy(x), state)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                     torch.from_numpy(y.reshape(-1)))
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            opt.step()
            chars += y.size
            step += 1
            if step >= steps:
                break
        if step >= steps:
            break
    secs = time.perf_counter() - t0
    model.eval()
    total, count, state = 0.0, 0, None
    with torch.no_grad():
        for x, y in iterate_chunks(va, 200):
            logits, state = model(torch.from_numpy(x), state)
            total += float(torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), torch.from_numpy(y.reshape(-1)), reduction="sum"))
            count += y.size
    return total / count / math.log(2), secs, chars / secs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--chars", type=int, default=2_000_000)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--seq-len", type=int, default=50)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3)
    args = ap.parse_args()
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    text = load_english(args.chars)
    from varlens.datasets.text import CharVocab
    vocab = CharVocab(text)
    vl.manual_seed(0)
    init = CharRNN(vocab.size, args.hidden, args.layers)
    init_sd = {k: v.numpy().copy() for k, v in init.state_dict().items()}
    tmodel = TorchCharRNN(vocab.size, args.hidden, args.hidden, args.layers)
    tmodel.load_state_dict({k: torch.from_numpy(v) for k, v in init_sd.items()})
    res = train_char_lm(text, vocab=vocab, seq_len=args.seq_len, batch_size=args.batch,
                        max_steps=args.steps, epochs=100, lr=args.lr, clip=5.0, model=init)
    train_txt, val_txt = split_text(text, 0.05)
    tr = make_streams(vocab.encode(train_txt), args.batch)
    va = res["val_streams"]
    t_bpc, t_secs, t_cps = train_torch(tmodel, tr, va, args.seq_len, args.steps, args.lr, 5.0)
    print(f"corpus: KJV, {len(text)} chars ({len(train_txt)} train / {len(val_txt)} val), vocab {vocab.size}")
    print(f"model: Embedding({vocab.size},{args.hidden}) -> LSTM({args.hidden}, layers={args.layers}) -> "
          f"Linear; Adam lr={args.lr}, clip 5, seq_len {args.seq_len}, batch {args.batch}, {args.steps} steps")
    print(f"varlens: val {res['val_bpc']:.4f} bpc, {res['seconds']:.1f} s, {res['chars_per_second']:.0f} chars/s")
    print(f"pytorch: val {t_bpc:.4f} bpc, {t_secs:.1f} s, {t_cps:.0f} chars/s")
    print(f"|difference| = {abs(res['val_bpc'] - t_bpc):.4f} bpc (target <= 0.05)")
    print("varlens sample (T=0.7):", repr(res["model"].sample(vocab, "And God said", 160, temperature=0.7,
                                                             generator=0)))
    assert evaluate_bpc(res["model"], va) == res["val_bpc"]


if __name__ == "__main__":
    main()

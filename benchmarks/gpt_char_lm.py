"""GPT character language model on the English corpus (the King James Bible), against
(a) the LSTM char-LM of varlens.models.char_rnn at (nearly) the same parameter count and the
same training budget (steps x batch x context characters, Adam-family optimiser), and
(b) the same GPT trained in PyTorch from the same initial weights on the same batches.

Issue 8's targets: GPT's validation loss below the LSTM's, and within 0.05 nats of PyTorch's.
Losses are in nats per character on the held-out last 5% of the text.  The GPT is scored on
consecutive 64-character windows (each character predicted from the ones before it in its
window); the LSTM carries its state through the whole validation text, so it sees *more*
context than the GPT does: the comparison is, if anything, tilted toward the LSTM.

    .venv/bin/python benchmarks/gpt_char_lm.py [--steps 1000] [--chars 1000000] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = os.environ.get("VARLENS_BENCH_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

import varlens as vl  # noqa: E402
from varlens.datasets.text import CharVocab  # noqa: E402
from varlens.text.char_lm import load_english, split_text, train_char_lm  # noqa: E402
from varlens.models.gpt import GPT, GPTConfig  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # (also when loaded by a test)
from _common import torch_gpt  # noqa: E402  (benchmarks/_common.py)


STRIDE = [32]


def batches(ids, steps, batch, T, seed):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        s = rng.integers(0, len(ids) - T - 1, batch)
        x = np.stack([ids[i:i + T] for i in s])
        y = np.stack([ids[i + 1:i + T + 1] for i in s])
        yield x, y


def lr_at(step, steps, lr, warmup=50):
    return lr * min(1.0, (step + 1) / warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / steps)))


def windows(ids, T, stride=None):
    """Evaluation windows of T characters every ``stride`` characters, and a (n, T) weight mask
    that scores each character once: all of the first window, then only the last ``stride``
    positions of each later window, so every scored character has at least T - stride
    characters of context (stride = T: disjoint windows)."""
    stride = stride or T
    starts = np.arange(0, len(ids) - T - 1, stride)
    x = np.stack([ids[s:s + T] for s in starts])
    y = np.stack([ids[s + 1:s + T + 1] for s in starts])
    w = np.zeros((len(starts), T))
    w[:, T - stride:] = 1.0
    w[0] = 1.0
    return x, y, w


def eval_nats(logits_fn, va, T, stride):
    x, y, w = windows(va, T, stride)
    tot = 0.0
    for i in range(0, len(x), 256):
        lg = logits_fn(x[i:i + 256]).astype(np.float64)
        lg = lg - lg.max(-1, keepdims=True)
        lp = lg - np.log(np.exp(lg).sum(-1, keepdims=True))
        nll = -np.take_along_axis(lp, y[i:i + 256][..., None], -1)[..., 0]
        tot += (nll * w[i:i + 256]).sum()
    return tot / w.sum()


def train_gpt_varlens(cfg, tr, va, steps, batch, lr, seed):
    vl.manual_seed(seed)
    m = GPT(cfg)
    init = {k: v.numpy().copy() for k, v in m.state_dict().items()}
    opt = vl.optim.AdamW(m.parameters(), lr=lr, weight_decay=0.01)
    t0 = time.perf_counter()
    for i, (x, y) in enumerate(batches(tr, steps, batch, cfg.block_size, seed)):
        for g in opt.param_groups:
            g["lr"] = lr_at(i, steps, lr)
        opt.zero_grad()
        _, loss = m(vl.tensor(x), vl.tensor(y))
        loss.backward()
        vl.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
    sec = time.perf_counter() - t0
    m.eval()
    with vl.no_grad():
        loss = eval_nats(lambda x: m(vl.tensor(x)).numpy(), va, cfg.block_size, STRIDE[0])
    return loss, sec, init, m


def train_gpt_torch(cfg, init, tr, va, steps, batch, lr, seed):
    torch.manual_seed(seed)
    m = torch_gpt(cfg.vocab_size, cfg.block_size, cfg.n_layer, cfg.n_head, cfg.n_embd)
    m.load_state_dict({k: torch.from_numpy(v) for k, v in init.items()})
    opt = torch.optim.AdamW(m.parameters(), lr=lr, weight_decay=0.01)
    t0 = time.perf_counter()
    for i, (x, y) in enumerate(batches(tr, steps, batch, cfg.block_size, seed)):
        for g in opt.param_groups:
            g["lr"] = lr_at(i, steps, lr)
        opt.zero_grad()
        logits = m(torch.from_numpy(x))
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, cfg.vocab_size), torch.from_numpy(y).reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
    sec = time.perf_counter() - t0
    m.eval()
    with torch.no_grad():
        loss = eval_nats(lambda x: m(torch.from_numpy(x)).numpy(), va, cfg.block_size, STRIDE[0])
    return loss, sec


def lstm_hidden_for(n_params, V):
    """Hidden size H of a 1-layer CharRNN (embed = H) whose parameter count is closest to n_params:
    V H (embedding) + 4 (2 H^2 + 2 H) (LSTM, two bias vectors) + H V + V (head)."""
    best = min(range(16, 1024), key=lambda H: abs(V * H + 8 * H * H + 8 * H + H * V + V - n_params))
    return best


def run(steps=1000, chars=1_000_000, batch=32, T=64, d=64, n_layer=2, n_head=4, lr=3e-3, seed=0, log=print,
        torch_run=True, lstm_run=True, stride=32, gpt_run=True):
    STRIDE[0] = stride
    text = load_english(max_chars=chars)
    vocab = CharVocab(text)
    train_txt, val_txt = split_text(text, 0.05)
    tr, va = vocab.encode(train_txt), vocab.encode(val_txt)
    cfg = GPTConfig(vocab_size=vocab.size, block_size=T, n_layer=n_layer, n_head=n_head, n_embd=d)
    res = {"steps": steps, "batch": batch, "context": T, "chars": len(text), "n_layer": n_layer, "n_embd": d,
           "eval_stride": stride, "lr": lr}
    if gpt_run:
        vloss, vsec, init, m = train_gpt_varlens(cfg, tr, va, steps, batch, lr, seed)
        res.update(gpt_val_nats=vloss, gpt_seconds=vsec)
        log(f"varlens GPT: val {vloss:.4f} nats/char in {vsec:.0f} s")
    else:  # the same initial weights, without training
        vl.manual_seed(seed)
        m = GPT(cfg)
        init = {k: v.numpy().copy() for k, v in m.state_dict().items()}
    n_gpt = sum(p.numel() for p in m.parameters())
    res.update(gpt_params=n_gpt)
    if torch_run:
        tloss, tsec = train_gpt_torch(cfg, init, tr, va, steps, batch, lr, seed)
        res.update(torch_val_nats=tloss, torch_seconds=tsec)
        log(f"PyTorch GPT: val {tloss:.4f} nats/char in {tsec:.0f} s")
    if not lstm_run:
        return res
    H = lstm_hidden_for(n_gpt, vocab.size)
    r = train_char_lm(text, vocab=vocab, hidden_size=H, seq_len=T, batch_size=batch, max_steps=steps,
                      epochs=1000, lr=lr, clip=1.0, val_fraction=0.05, seed=seed)
    n_lstm = sum(p.numel() for p in r["model"].parameters())
    res.update(lstm_hidden=H, lstm_params=n_lstm, lstm_val_nats=r["val_bpc"] * math.log(2),
               lstm_seconds=r["seconds"])
    log(f"varlens LSTM (hidden {H}, {n_lstm} params): val {res['lstm_val_nats']:.4f} nats/char "
        f"in {r['seconds']:.0f} s")
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--chars", type=int, default=1_000_000)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--stride", type=int, default=32, help="evaluation stride (64 = disjoint windows)")
    ap.add_argument("--no-gpt", action="store_true", help="skip the varlens GPT (run parts in parallel)")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--no-lstm", action="store_true")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    res = run(steps=a.steps, chars=a.chars, n_layer=a.layers, d=a.d, lr=a.lr, stride=a.stride,
              gpt_run=not a.no_gpt, torch_run=not a.no_torch, lstm_run=not a.no_lstm, log=lambda *s: print(*s, flush=True))
    print(json.dumps(res, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()

"""Recurrent layers and the character-level LM beside PyTorch 2.13, in one run.

    .venv/bin/python benchmarks/bench_rnn.py [--rounds 5] [--seconds 1.5] [--no-write]

(1) Training step of one layer, hidden 128, input 128, sequence 50, batch 32, float32:
    forward, loss = mean of squared outputs, backward, SGD step.  LSTM (the issue's
    target) and, for information, GRU.
(2) The char-LM end to end: Embedding(V,128) -> LSTM(128) -> Linear(128,V), cross-entropy,
    backward, gradient clipping at 5, Adam, truncated BPTT (state detached between chunks)
    over the King James Bible, sequence 50, batch 32: characters per second.

Both libraries run on one BLAS/OpenMP thread and the clock is process CPU time, with
rounds interleaved and the best round kept, because the 2-core machine is shared (with
2 threads each library's pool stalls whenever a neighbour takes a core, which measures the
neighbours).  Ratio = varlens / PyTorch throughput (> 1: varlens faster).  Rewrites the
"recurrent" section of benchmarks/RESULTS.md.
"""
from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import platform
import subprocess
import time
import warnings

warnings.filterwarnings("ignore", message=".*TF32.*")

THREADS = os.environ.get("VARLENS_BENCH_THREADS", "1")
for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = THREADS

import numpy as np  # noqa: E402
import torch  # noqa: E402

import varlens as vl  # noqa: E402
from varlens import nn  # noqa: E402
from _common import machine  # noqa: E402  (benchmarks/_common.py)

torch.set_num_threads(int(THREADS))
RESULTS = pathlib.Path(__file__).with_name("RESULTS.md")
SECTION = "## recurrent (bench_rnn.py)"
_clock = time.process_time
T, B, I, H = 50, 32, 128, 128


def _timed(fn, seconds):
    """Run fn repeatedly for about ``seconds`` of CPU time; return calls per second."""
    fn()  # warm-up
    n, t0 = 0, _clock()
    while True:
        fn()
        n += 1
        dt = _clock() - t0
        if dt >= seconds:
            return n / dt


def layer_steps(kind, onednn=True):
    rng = np.random.default_rng(0)
    xa = rng.standard_normal((T, B, I)).astype(np.float32)
    vcls, tcls = (nn.LSTM, torch.nn.LSTM) if kind == "lstm" else (nn.GRU, torch.nn.GRU)
    tm = tcls(I, H)
    vm = vcls(I, H)
    vm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    vopt = vl.optim.SGD(vm.parameters(), lr=1e-3)
    topt = torch.optim.SGD(tm.parameters(), lr=1e-3)
    vx, tx = vl.tensor(xa), torch.from_numpy(xa)

    def vstep():
        out, _ = vm(vx)
        loss = (out * out).mean()
        vopt.zero_grad()
        loss.backward()
        vopt.step()

    def tstep():
        with torch.backends.mkldnn.flags(enabled=onednn):
            out, _ = tm(tx)
            loss = (out * out).mean()
            topt.zero_grad()
            loss.backward()
            topt.step()
    return vstep, tstep


def charlm_steps():
    from varlens.datasets.text import CharVocab, load_kjv
    from varlens.models.char_rnn import CharRNN, detach_state, iterate_chunks, make_streams
    from varlens.nn import functional as F
    from varlens.nn.utils import clip_grad_norm_
    text = load_kjv()[:400_000]
    vocab = CharVocab(text)
    streams = make_streams(vocab.encode(text), B)
    chunks = list(iterate_chunks(streams, T))
    vl.manual_seed(0)
    vm = CharRNN(vocab.size, H)
    V = vocab.size

    class TorchCharRNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(V, H)
            self.rnn = torch.nn.LSTM(H, H)
            self.head = torch.nn.Linear(H, V)

        def forward(self, x, state=None):
            out, state = self.rnn(self.embed(x), state)
            return self.head(out), state
    tm = TorchCharRNN()
    tm.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in vm.state_dict().items()})
    vopt = vl.optim.Adam(vm.parameters(), lr=2e-3)
    topt = torch.optim.Adam(tm.parameters(), lr=2e-3)
    vs = {"i": 0, "state": None}
    ts = {"i": 0, "state": None}

    def vstep():
        x, y = chunks[vs["i"] % len(chunks)]
        vs["i"] += 1
        st = detach_state(vs["state"])
        logits, vs["state"] = vm(vl.Tensor._make(x), st)
        loss = F.cross_entropy(logits.reshape(-1, V), vl.Tensor._make(y.reshape(-1)))
        vopt.zero_grad()
        loss.backward()
        clip_grad_norm_(vm.parameters(), 5.0)
        vopt.step()

    def tstep():
        x, y = chunks[ts["i"] % len(chunks)]
        ts["i"] += 1
        st = ts["state"]
        if st is not None:
            st = tuple(s.detach() for s in st)
        logits, ts["state"] = tm(torch.from_numpy(x), st)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), torch.from_numpy(y.reshape(-1)))
        topt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(tm.parameters(), 5.0)
        topt.step()
    return vstep, tstep


def measure(pair, rounds, seconds):
    vstep, tstep = pair
    vr, tr = [], []
    for _ in range(rounds):
        vr.append(_timed(vstep, seconds))
        tr.append(_timed(tstep, seconds))
    ratios = [a / b for a, b in zip(vr, tr)]
    return max(vr), max(tr), float(np.median(ratios)), min(ratios), max(ratios)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    rows = []
    for name, pair, unit, per in (
            ("LSTM(128, 128) training step, seq 50, batch 32", layer_steps("lstm"), "steps/s", 1),
            ("LSTM step as above, PyTorch with oneDNN off (info)", layer_steps("lstm", False), "steps/s", 1),
            ("GRU(128, 128) training step, seq 50, batch 32", layer_steps("gru"), "steps/s", 1),
            ("char-LM (LSTM 128) end to end, seq 50, batch 32", charlm_steps(), "chars/s", T * B)):
        v, t, med, lo, hi = measure(pair, args.rounds, args.seconds)
        rows.append((name, v * per, t * per, med, lo, hi, unit))
        print(f"{name}: varlens {v * per:,.0f} {unit}, torch {t * per:,.0f} {unit}, ratio {med:.2f} "
              f"({lo:.2f}-{hi:.2f})", flush=True)
    load = os.getloadavg()[0]
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [SECTION, "",
             f"{stamp}; {machine()}; NumPy {np.__version__}, PyTorch {torch.__version__} "
             f"({THREADS} thread(s), OpenBLAS likewise); float32; process CPU time, best of "
             f"{args.rounds} interleaved rounds of {args.seconds} s; load average {load:.1f}. "
             "Ratio = varlens / PyTorch throughput (median over rounds; range).", "",
             "| workload | varlens | PyTorch | ratio (median; range) | target |",
             "|---|---:|---:|---:|---:|"]
    for name, v, t, med, lo, hi, unit in rows:
        target = "info" if ("GRU" in name or "info" in name) else ">= 1 (" + ("met" if med >= 1 else "not met") + ")"
        lines.append(f"| {name} | {v:,.0f} {unit} | {t:,.0f} {unit} | {med:.2f} ({lo:.2f}-{hi:.2f}) | {target} |")
    lines += ["", "Each LSTM/GRU layer direction is one fused op (varlens/ops/rnn_ops.py): the input "
              "GEMM for all 50 steps at once, one small GEMM per step, cached gate activations, and the "
              "weight gradients as one GEMM each after the backward loop. The step is GEMM-bound "
              "(about 1 GFLOP of float32 GEMMs per step). PyTorch's CPU LSTM (not its GRU) runs "
              "oneDNN's fused LSTM kernel, whose GEMMs are faster than NumPy's OpenBLAS ones; with "
              "oneDNN switched off (torch.backends.mkldnn.flags(enabled=False)) PyTorch falls back "
              "to per-step autograd ops, the 'info' row.", ""]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        old = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
        if SECTION in old:
            start = old.index(SECTION)
            nxt = old.find("\n## ", start + len(SECTION))
            old = old[:start] + text + ("\n" + old[nxt + 1:] if nxt != -1 else "")
            RESULTS.write_text(old.rstrip() + "\n")
        else:
            RESULTS.write_text(old.rstrip() + "\n\n" + text)


if __name__ == "__main__":
    main()

"""Programs as users write them, timed for varlens and PyTorch in the same process.

Every program is written ONCE as a function of the framework module (``def make_x(torch)``,
called with ``varlens`` and with ``torch``): the same source, only the import differs, as a
user who writes ``import varlens as torch`` would run it.  Each ``make_*`` builds its model
and data and returns a zero-argument ``step`` callable (one training step, one generated
token batch, or one micro op forward + backward).

Timing: one row at a time, alternating blocks of steps between the two libraries (the order
flips every round), process CPU time per block, median over rounds; the ratio is
``torch time / varlens time`` (> 1: varlens faster).  Both run single-threaded.

    python benchmarks/bench_user_programs.py                 # all rows; refreshes its RESULTS.md section
    python benchmarks/bench_user_programs.py --no-write      # print only
    python benchmarks/bench_user_programs.py --only x3,gelu  # some rows, printed (names: see ROWS)
    python benchmarks/bench_user_programs.py --profile nanogpt  # cProfile of varlens's step
    python benchmarks/bench_user_programs.py --gemms nanogpt    # that step's GEMMs alone, both libraries
    python benchmarks/bench_user_programs.py --first-call       # compile / cache-load time of the kernels
"""
from __future__ import annotations

import argparse
import datetime
import math
import os
import statistics
import sys
import time

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    # one thread for both libraries (as the other benchmarks): the machine is shared
    os.environ[_v] = os.environ.get("VARLENS_BENCH_THREADS", "1")

import numpy as np  # noqa: E402
from _common import machine, write_section  # noqa: E402  (benchmarks/_common.py)

SECTION = "## User-style programs (bench_user_programs.py)"


# --------------------------------------------------------------------------------------------
# nanoGPT-style character GPT: exact nn.GELU(), fused QKV Linear, causal SDPA, AdamW with
# weight-decay parameter groups, clip_grad_norm_, LayerNorm, tied embedding.

def _nanogpt_model(torch, vocab=65, block=64, n_layer=2, n_head=4, n_embd=128, dropout=0.0):
    nn = torch.nn
    F = torch.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.c_proj = nn.Linear(n_embd, n_embd)
            self.resid_dropout = nn.Dropout(dropout)

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(n_embd, dim=2)
            k = k.view(B, T, n_head, C // n_head).transpose(1, 2)
            q = q.view(B, T, n_head, C // n_head).transpose(1, 2)
            v = v.view(B, T, n_head, C // n_head).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True)
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.resid_dropout(self.c_proj(y))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(n_embd, 4 * n_embd)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * n_embd, n_embd)
            self.dropout = nn.Dropout(dropout)

        def forward(self, x):
            return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(n_embd)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(n_embd)
            self.mlp = MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(vocab, n_embd), wpe=nn.Embedding(block, n_embd),
                drop=nn.Dropout(dropout), h=nn.ModuleList([Block() for _ in range(n_layer)]),
                ln_f=nn.LayerNorm(n_embd)))
            self.lm_head = nn.Linear(n_embd, vocab, bias=False)
            self.transformer.wte.weight = self.lm_head.weight
            self.apply(self._init_weights)
            for pn, p in self.named_parameters():
                if pn.endswith("c_proj.weight"):
                    torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    torch.nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

        def forward(self, idx, targets=None):
            b, t = idx.size()
            pos = torch.arange(0, t, dtype=torch.long)
            x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
            for blk in self.transformer.h:
                x = blk(x)
            x = self.transformer.ln_f(x)
            if targets is not None:
                logits = self.lm_head(x)
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
            else:
                logits = self.lm_head(x[:, [-1], :])
                loss = None
            return logits, loss

        def configure_optimizers(self, weight_decay, learning_rate, betas):
            param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
            decay = [p for n, p in param_dict.items() if p.dim() >= 2]
            nodecay = [p for n, p in param_dict.items() if p.dim() < 2]
            groups = [{"params": decay, "weight_decay": weight_decay},
                      {"params": nodecay, "weight_decay": 0.0}]
            return torch.optim.AdamW(groups, lr=learning_rate, betas=betas)

        @torch.no_grad()
        def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
            for _ in range(max_new_tokens):
                idx_cond = idx if idx.size(1) <= block else idx[:, -block:]
                logits, _ = self(idx_cond)
                logits = logits[:, -1, :] / temperature
                if top_k is not None:
                    v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                    logits[logits < v[:, [-1]]] = -float("Inf")
                probs = F.softmax(logits, dim=-1)
                idx_next = torch.multinomial(probs, num_samples=1)
                idx = torch.cat((idx, idx_next), dim=1)
            return idx

    return GPT()


def _char_batches(torch, vocab, batch, block, n=4, seed=0):
    rng = np.random.default_rng(seed)
    data = rng.integers(0, vocab, 20000)
    out = []
    for _ in range(n):
        ix = rng.integers(0, len(data) - block - 1, batch)
        x = np.stack([data[i:i + block] for i in ix])
        y = np.stack([data[i + 1:i + 1 + block] for i in ix])
        out.append((torch.from_numpy(x), torch.from_numpy(y)))
    return out


def make_nanogpt(torch):
    torch.manual_seed(1337)
    model = _nanogpt_model(torch)
    opt = model.configure_optimizers(0.1, 1e-3, (0.9, 0.99))
    batches = _char_batches(torch, 65, 32, 64)
    it = [0]

    def step():
        x, y = batches[it[0] % len(batches)]
        it[0] += 1
        logits, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return step


def make_generate(torch):
    """nanoGPT's sample.py loop: top-k 20, temperature 0.8, multinomial, cat one token; 16 tokens."""
    torch.manual_seed(1337)
    model = _nanogpt_model(torch)
    model.eval()
    start = torch.zeros((1, 1), dtype=torch.long)

    def step():
        model.generate(start, 16, temperature=0.8, top_k=20)
    return step


# --------------------------------------------------------------------------------------------
# minimal GPT (minGPT-style): hand-written tanh-GELU with torch.pow, separate attention maths
# (masked_fill with a tril buffer, softmax), Adam.

def _new_gelu(torch):
    class NewGELU(torch.nn.Module):
        def forward(self, x):
            return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
    return NewGELU


def _mingpt_model(torch, vocab, block, n_layer, n_head, n_embd):
    nn = torch.nn
    F = torch.nn.functional
    NewGELU = _new_gelu(torch)

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.c_proj = nn.Linear(n_embd, n_embd)
            self.register_buffer("bias", torch.tril(torch.ones(block, block)).view(1, 1, block, block))

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(n_embd, dim=2)
            k = k.view(B, T, n_head, C // n_head).transpose(1, 2)
            q = q.view(B, T, n_head, C // n_head).transpose(1, 2)
            v = v.view(B, T, n_head, C // n_head).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(n_embd)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(n_embd)
            self.mlp = nn.ModuleDict(dict(c_fc=nn.Linear(n_embd, 4 * n_embd), c_proj=nn.Linear(4 * n_embd, n_embd),
                                          act=NewGELU()))

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            m = self.mlp
            return x + m.c_proj(m.act(m.c_fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, n_embd)
            self.wpe = nn.Embedding(block, n_embd)
            self.h = nn.ModuleList([Block() for _ in range(n_layer)])
            self.ln_f = nn.LayerNorm(n_embd)
            self.lm_head = nn.Linear(n_embd, vocab, bias=False)

        def forward(self, idx, targets):
            b, t = idx.size()
            pos = torch.arange(0, t, dtype=torch.long).unsqueeze(0)
            x = self.wte(idx) + self.wpe(pos)
            for blk in self.h:
                x = blk(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)

    return GPT()


def make_mingpt(torch):
    torch.manual_seed(0)
    model = _mingpt_model(torch, 65, 64, 2, 4, 128)
    opt = torch.optim.Adam(model.parameters(), lr=3e-4)
    batches = _char_batches(torch, 65, 32, 64)
    it = [0]

    def step():
        x, y = batches[it[0] % len(batches)]
        it[0] += 1
        loss = model(x, y)
        model.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return step


def make_makemore(torch):
    """makemore's Transformer: 27-letter vocabulary, block 16, 4 layers of 64, AdamW(wd 0.01)."""
    torch.manual_seed(3407)
    model = _mingpt_model(torch, 27, 16, 4, 4, 64)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.01, betas=(0.9, 0.99), eps=1e-8)
    batches = _char_batches(torch, 27, 32, 16)
    it = [0]

    def step():
        x, y = batches[it[0] % len(batches)]
        it[0] += 1
        loss = model(x, y)
        model.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return step


# --------------------------------------------------------------------------------------------
# char-LSTM script: Embedding, 2-layer nn.LSTM(batch_first), Linear, CE, Adam, clipping.

def make_char_lstm(torch):
    nn = torch.nn
    torch.manual_seed(0)

    class CharLSTM(nn.Module):
        def __init__(self, vocab=65, emb=64, hidden=128, layers=2):
            super().__init__()
            self.emb = nn.Embedding(vocab, emb)
            self.lstm = nn.LSTM(emb, hidden, num_layers=layers, batch_first=True)
            self.fc = nn.Linear(hidden, vocab)

        def forward(self, x, h=None):
            out, h = self.lstm(self.emb(x), h)
            return self.fc(out.reshape(-1, out.size(2))), h

    model = CharLSTM()
    crit = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    batches = _char_batches(torch, 65, 32, 32)
    it = [0]

    def step():
        x, y = batches[it[0] % len(batches)]
        it[0] += 1
        opt.zero_grad()
        logits, _ = model(x)
        loss = crit(logits, y.reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
    return step


# --------------------------------------------------------------------------------------------
# LeNet-style CNN script (PyTorch's examples/mnist): conv-conv-maxpool-dropout-fc-fc,
# log_softmax + nll_loss, Adadelta(lr=1.0), StepLR(step_size=1, gamma=0.7) per "epoch".

def make_lenet(torch):
    nn = torch.nn
    F = torch.nn.functional
    torch.manual_seed(1)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 32, 3, 1)
            self.conv2 = nn.Conv2d(32, 64, 3, 1)
            self.dropout1 = nn.Dropout(0.25)
            self.dropout2 = nn.Dropout(0.5)
            self.fc1 = nn.Linear(9216, 128)
            self.fc2 = nn.Linear(128, 10)

        def forward(self, x):
            x = F.relu(self.conv1(x))
            x = F.relu(self.conv2(x))
            x = F.max_pool2d(x, 2)
            x = self.dropout1(x)
            x = torch.flatten(x, 1)
            x = F.relu(self.fc1(x))
            x = self.dropout2(x)
            return F.log_softmax(self.fc2(x), dim=1)

    model = Net()
    opt = torch.optim.Adadelta(model.parameters(), lr=1.0)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)
    rng = np.random.default_rng(0)
    batches = [(torch.from_numpy(rng.standard_normal((32, 1, 28, 28)).astype(np.float32)),
                torch.from_numpy(rng.integers(0, 10, 32))) for _ in range(4)]
    it = [0]
    model.train()

    def step():
        data, target = batches[it[0] % len(batches)]
        it[0] += 1
        opt.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        opt.step()
        if it[0] % 8 == 0:
            sched.step()
    return step


# --------------------------------------------------------------------------------------------
# micro rows: one op (or a short chain), forward + backward with a fixed upstream gradient

def _leaf(torch, shape, seed=0, scale=1.0):
    a = (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)
    return torch.from_numpy(a).requires_grad_()


def _grad(torch, shape, seed=1):
    return torch.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _fwd_bwd(torch, shape, f, seed=0):
    x = _leaf(torch, shape, seed)
    g = _grad(torch, shape)

    def step():
        x.grad = None
        f(x).backward(g)
    return step


def make_cube(torch):
    return _fwd_bwd(torch, (32, 64, 512), lambda x: x ** 3)


def make_pow3(torch):
    return _fwd_bwd(torch, (32, 64, 512), lambda x: torch.pow(x, 3.0))


def make_tanh_gelu(torch):
    return _fwd_bwd(torch, (32, 64, 512), _new_gelu(torch)())


def make_gelu(torch):
    return _fwd_bwd(torch, (32, 64, 512), torch.nn.GELU())


def make_softmax(torch):
    return _fwd_bwd(torch, (32, 4, 64, 64), lambda x: torch.softmax(x, dim=-1))


def make_log_softmax(torch):
    return _fwd_bwd(torch, (2048, 65), lambda x: torch.nn.functional.log_softmax(x, dim=-1))


def make_layernorm(torch):
    torch.manual_seed(0)
    ln = torch.nn.LayerNorm(128)
    return _fwd_bwd(torch, (32, 64, 128), ln)


def make_cross_entropy(torch):
    x = _leaf(torch, (2048, 65))
    t = torch.from_numpy(np.random.default_rng(2).integers(0, 65, 2048))

    def step():
        x.grad = None
        torch.nn.functional.cross_entropy(x, t).backward()
    return step


def make_qkv_chain(torch):
    B, T, C, H = 32, 64, 128, 4

    def f(x):
        q, k, v = x.split(C, dim=2)
        q = q.view(B, T, H, C // H).transpose(1, 2)
        k = k.view(B, T, H, C // H).transpose(1, 2)
        v = v.view(B, T, H, C // H).transpose(1, 2)
        y = q + k * v
        return y.transpose(1, 2).contiguous().view(B, T, C)
    x = _leaf(torch, (B, T, 3 * C))
    g = _grad(torch, (B, T, C))

    def step():
        x.grad = None
        f(x).backward(g)
    return step


def _many_params(torch, n_layer=8, d=64):
    torch.manual_seed(0)
    mods = []
    for _ in range(n_layer):
        mods += [torch.nn.LayerNorm(d), torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d),
                 torch.nn.LayerNorm(d), torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)]
    params = [p for m in mods for p in m.parameters()]
    for i, p in enumerate(params):
        p.grad = torch.from_numpy(np.random.default_rng(i).standard_normal(tuple(p.shape)).astype(np.float32))
    return params


def make_clip(torch):
    params = _many_params(torch)

    def step():
        torch.nn.utils.clip_grad_norm_(params, 1.0)
    return step


def make_adamw(torch):
    params = _many_params(torch)
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.1)

    def step():
        opt.step()
    return step


# name: (description, builder, kind, steps per block)
ROWS = {
    "nanogpt": ("nanoGPT char GPT training step (2x128, exact GELU, SDPA, AdamW groups, clip; batch 32x64)",
                make_nanogpt, "train", 2),
    "mingpt": ("minimal GPT training step (2x128, hand-written tanh-GELU with torch.pow, masked softmax, Adam)",
               make_mingpt, "train", 2),
    "makemore": ("makemore Transformer training step (4x64, block 16, batch 32, AdamW)", make_makemore, "train", 4),
    "lstm": ("char-LSTM training step (2-layer LSTM 128, batch 32x32, Adam, clip)", make_char_lstm, "train", 2),
    "lenet": ("LeNet-style CNN training step (MNIST example net, batch 32, Adadelta + StepLR)", make_lenet, "train", 1),
    "generate": ("nanoGPT generation (top-k 20, multinomial, cat; 16 tokens, batch 1)", make_generate, "gen", 1),
    "x3": ("`x ** 3` fwd+bwd, (32, 64, 512) float32", make_cube, "micro", 5),
    "pow3": ("`torch.pow(x, 3.0)` fwd+bwd, (32, 64, 512)", make_pow3, "micro", 5),
    "tanh_gelu": ("hand-written tanh-GELU fwd+bwd, (32, 64, 512)", make_tanh_gelu, "micro", 3),
    "gelu": ("exact `nn.GELU()` fwd+bwd, (32, 64, 512)", make_gelu, "micro", 3),
    "softmax": ("softmax(dim=-1) fwd+bwd, (32, 4, 64, 64)", make_softmax, "micro", 5),
    "log_softmax": ("log_softmax(dim=-1) fwd+bwd, (2048, 65)", make_log_softmax, "micro", 20),
    "layernorm": ("LayerNorm(128) fwd+bwd, (32, 64, 128)", make_layernorm, "micro", 10),
    "cross_entropy": ("cross_entropy fwd+bwd, (2048, 65)", make_cross_entropy, "micro", 20),
    "qkv_chain": ("split/view/transpose/contiguous chain fwd+bwd, (32, 64, 384)", make_qkv_chain, "micro", 5),
    "clip": ("clip_grad_norm_ over 64 params (8 blocks of d 64)", make_clip, "micro", 20),
    "adamw": ("AdamW step over 64 small params (8 blocks of d 64)", make_adamw, "micro", 20),
}


def time_row(name, rounds, target_s=0.25):
    import torch

    import varlens
    libs = {"varlens": varlens, "torch": torch}
    steps = {k: ROWS[name][1](m) for k, m in libs.items()}
    for s in steps.values():  # warm up (compiles, caches, first-call allocations)
        s()
        s()
    # block length: about target_s of torch time
    t0 = time.process_time()
    steps["torch"]()
    one = max(time.process_time() - t0, 1e-5)
    n = max(1, int(target_s / one))
    times = {k: [] for k in libs}
    for r in range(rounds):
        order = ("varlens", "torch") if r % 2 == 0 else ("torch", "varlens")
        for k in order:
            s = steps[k]
            t0 = time.process_time()
            for _ in range(n):
                s()
            times[k].append((time.process_time() - t0) / n)
    v, t = statistics.median(times["varlens"]), statistics.median(times["torch"])
    ratios = sorted(b / a for a, b in zip(times["varlens"], times["torch"]))
    return v, t, statistics.median(ratios), ratios[0], ratios[-1]


def profile_row(name, n=20, sort="tottime", lines=30):
    import cProfile
    import pstats

    import varlens
    step = ROWS[name][1](varlens)
    step()
    step()
    pr = cProfile.Profile(time.process_time)  # CPU time: the machine is shared
    pr.enable()
    for _ in range(n):
        step()
    pr.disable()
    pstats.Stats(pr).sort_stats(sort).print_stats(lines)


def gemm_breakdown(which, rounds=3):
    """The GEMMs of a training step timed alone (NumPy as varlens calls it, PyTorch as it calls
    them), in ms per step: how much of a row's gap is BLAS and not the framework."""
    import torch
    rng = np.random.default_rng(0)

    def t(f, n=10):
        f()
        t0 = time.process_time()
        for _ in range(n):
            f()
        return (time.process_time() - t0) / n * 1e3
    cases = []
    if which == "nanogpt":  # 2 blocks of (c_attn, c_proj, c_fc, mlp c_proj) + lm_head, on 2048 rows
        for i, o, per_step in ((128, 384, 2), (128, 128, 2), (128, 512, 2), (512, 128, 2), (128, 65, 1)):
            x, w, g = (rng.random(s, dtype=np.float32) for s in ((2048, i), (o, i), (2048, o)))
            tx, tw, tg = map(torch.from_numpy, (x, w, g))
            cases += [(f"{i}->{o} forward", per_step, lambda x=x, w=w: x @ w.T,
                       lambda tx=tx, tw=tw: torch.nn.functional.linear(tx, tw)),
                      (f"{i}->{o} dL/dx", per_step, lambda g=g, w=w: g @ w, lambda tg=tg, tw=tw: tg @ tw),
                      (f"{i}->{o} dL/dW", per_step, lambda g=g, x=x: g.T @ x, lambda tg=tg, tx=tx: tg.t() @ tx)]
    elif which == "lstm":  # varlens's fused layer: per step W [x h 1] and W_hh^T dA, then dW and dx
        H, B, T = 128, 32, 32
        for i in (64, 128):
            K = i + H + 1
            w, xh = rng.random((4 * H, K), dtype=np.float32), rng.random((K, T + 1, B), dtype=np.float32)
            a = np.empty((4 * H, B), np.float32)
            whT, dA = rng.random((H, 4 * H), dtype=np.float32), rng.random((4 * H, T, B), dtype=np.float32)
            hw = np.empty((H, B), np.float32)
            dA2, xh2 = dA.reshape(4 * H, T * B), xh[:, :T].reshape(K, T * B)
            wih = rng.random((4 * H, i), dtype=np.float32)

            def fwd(w=w, xh=xh, a=a):
                for s in range(T):
                    np.matmul(w, xh[:, s], out=a)

            def bwd(whT=whT, dA=dA, hw=hw):
                for s in range(T):
                    np.matmul(whT, dA[:, s], out=hw)
            cases += [(f"layer in={i}: {T} step GEMMs forward", 1, fwd, None),
                      (f"layer in={i}: {T} step GEMMs backward", 1, bwd, None),
                      (f"layer in={i}: dW", 1, lambda dA2=dA2, xh2=xh2: dA2 @ xh2.T, None),
                      (f"layer in={i}: dx", 1, lambda wih=wih, dA2=dA2: wih.T @ dA2, None)]
    tot_v = tot_t = 0.0
    for name, k, fv, ft in cases:
        v = min(t(fv) for _ in range(rounds)) * k
        tt = min(t(ft) for _ in range(rounds)) * k if ft is not None else float("nan")
        tot_v += v
        tot_t += tt if ft is not None else 0.0
        print(f"{name:40s} NumPy {v:7.2f} ms/step" + (f"   PyTorch {tt:7.2f}" if ft is not None else ""))
    print(f"{'total':40s} NumPy {tot_v:7.2f} ms/step   PyTorch {tot_t:7.2f}" if which == "nanogpt"
          else f"{'total':40s} NumPy {tot_v:7.2f} ms/step")


def first_call_seconds(cold):
    """CPU seconds (process time: the machine is shared) of the first call of every compiled
    kernel in a fresh process, numba's import included; ``cold``: with an empty numba cache,
    so everything compiles."""
    import subprocess
    import tempfile
    code = (
        "import time, numpy as np, varlens\n"
        "from varlens.ops.kernels import pointwise as P, rows as R, optim as O\n"
        "x = np.ones((4, 8), np.float32); t = np.zeros(4, np.int64); w = np.ones(8, np.float32)\n"
        "t0 = time.process_time()\n"
        "P.gelu(x); P.gelu_grad(x, x); P.int_power(x, 3); P.int_power_grad(x, x, 3)\n"
        "P.relu_grad(x, x); P.tanh_grad(x, x)\n"
        "y = R.softmax(x); R.softmax_grad(x, y); y = R.log_softmax(x); R.log_softmax_grad(x, y)\n"
        "p, _ = R.cross_entropy(x, t); R.cross_entropy_grad(p, t, 1.0)\n"
        "y, m, r = R.layer_norm(x, w, w, 1e-5); R.layer_norm_grad(x, x, w, m, r)\n"
        "O.adadelta_step(x.copy(), x, x.copy(), x.copy(), 1.0, 0.9, 1e-6, 0.0, False)\n"
        "O.adam_step(x.copy(), x, x.copy(), x.copy(), 0.01, 0.9, 0.999, 1e-8, 1.0, 0.0, False, False)\n"
        "O.sgd_momentum_step(x.copy(), x, x.copy(), 0.1, 0.9)\n"
        "from varlens.ops.kernels import recurrent as RK\n"
        "f, b = RK.lstm_step_kernels(x); a = np.zeros((1, 8, 2), np.float32)\n"
        "c = np.zeros((2, 2, 2), np.float32); h = np.zeros((2, 2), np.float32)\n"
        "f(a, c, c[:1], np.zeros((5, 2, 2), np.float32), 0, 0, 1, 1, 1)\n"
        "b(a, c[:1], c, 0, c, 1, h, h.copy(), a.copy(), 0)\n"
        "print(time.process_time() - t0)\n")
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as d:
        if cold:
            env["NUMBA_CACHE_DIR"] = d
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def _load():
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-write", action="store_true", help="print only (all rows refresh RESULTS.md)")
    ap.add_argument("--write", action="store_true", help="refresh RESULTS.md even with --only")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--only", default="", help="comma-separated row names")
    ap.add_argument("--profile", default="", help="cProfile varlens's step of this row")
    ap.add_argument("--gemms", default="", choices=["", "nanogpt", "lstm"],
                    help="time the GEMMs of that row's step alone")
    ap.add_argument("--first-call", action="store_true",
                    help="seconds to the first result of every compiled kernel: warm and cold numba cache")
    a = ap.parse_args()
    if a.first_call:
        warm, cold = first_call_seconds(False), first_call_seconds(True)
        print(f"first call of all kernels: {warm:.2f} CPU s with numba's cache warm, {cold:.2f} CPU s cold "
              f"(load average {_load()})")
        return
    import torch
    torch.set_num_threads(1)
    if a.profile:
        profile_row(a.profile)
        return
    if a.gemms:
        gemm_breakdown(a.gemms)
        return
    names = [n for n in ROWS if not a.only or n in a.only.split(",")]
    load0 = _load()
    rows = []
    for name in names:
        v, t, r, lo, hi = time_row(name, a.rounds)
        unit = "ms per 16 tokens" if ROWS[name][2] == "gen" else "ms"
        rows.append((name, v, t, r, lo, hi))
        print(f"{name:14s} varlens {v * 1e3:9.3f} {unit}  torch {t * 1e3:9.3f}  ratio {r:5.2f} "
              f"({lo:.2f}-{hi:.2f})", flush=True)
    load1 = _load()
    write = a.write or not (a.no_write or a.only)
    cmd = "python benchmarks/bench_user_programs.py" + (f" --only {a.only} --write" if a.only and write else "")
    lines = [SECTION, "",
             f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC on {machine()}, "
             f"NumPy {np.__version__}, PyTorch {torch.__version__} (both 1 thread), Python "
             f"{sys.version.split()[0]}; `{cmd}`; load average before / after: {load0} / {load1} "
             "(shared machine).  Every program is one source run with `varlens` and with `torch` "
             f"as the module; {a.rounds} rounds of alternating blocks (about 0.25 s of PyTorch time each), "
             "process CPU time; ratio = PyTorch time / varlens time (> 1: varlens faster), median over "
             "rounds (range).",
             "", "| program | varlens ms | PyTorch ms | ratio (median; range) |", "|---|---:|---:|---:|"]
    for name, v, t, r, lo, hi in rows:
        lines.append(f"| {ROWS[name][0]} | {v * 1e3:.3f} | {t * 1e3:.3f} | {r:.2f} ({lo:.2f}-{hi:.2f}) |")
    text = "\n".join(lines) + "\n"
    print(text)
    if write:
        write_section(SECTION, text)


if __name__ == "__main__":
    main()

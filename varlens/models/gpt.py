"""GPT: a decoder-only Transformer language model in one file (seed 003 §8; nanoGPT's shape).

tokens -> embedding (+ learned, sinusoidal or rotary positions) -> n_layer pre-LN blocks
[x + attn(LN(x)); x + MLP(LN(x))] -> LN -> logits (output weights tied to the embedding).
Generation keeps a key/value cache, so each new token costs one position's worth of
projections instead of re-running the whole prefix.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import varlens as vl
from varlens import nn
from varlens.core.array import namespace as array_namespace
from varlens.core.array import xp
from varlens.nn import functional as F
from varlens.nn.positional import apply_rotary, rope_angles, sinusoidal_table
from varlens.ops.nn.attention import scaled_dot_product_attention


@dataclass
class GPTConfig:
    vocab_size: int = 256
    block_size: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    bias: bool = True
    pos: str = "learned"  # "learned", "sinusoidal" or "rope"

    def __post_init__(self):
        if self.n_embd % self.n_head:
            raise ValueError(f"GPTConfig: n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head})")
        if self.pos not in ("learned", "sinusoidal", "rope"):
            raise ValueError(f"GPTConfig: pos must be 'learned', 'sinusoidal' or 'rope', got {self.pos!r}")


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=cfg.bias)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.n_head, self.n_embd, self.dropout = cfg.n_head, cfg.n_embd, cfg.dropout
        self.resid_dropout = nn.Dropout(cfg.dropout)
        self.rope = cfg.pos == "rope"

    def forward(self, x, cache=None, rope=None):
        B, T, C = x.shape
        H = self.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.reshape(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))  # (B, H, T, D)
        if self.rope:
            cos, sin = rope
            q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        past = 0
        if cache is not None and cache.get("k") is not None:
            past = cache["k"].shape[2]
            k = vl.cat([cache["k"], k], dim=2)
            v = vl.cat([cache["v"], v], dim=2)
        if cache is not None:
            cache["k"], cache["v"] = k.detach(), v.detach()
        S = k.shape[2]
        lib = array_namespace(x._data)    # the mask is made on the input's device
        mask = None if T == 1 else vl.Tensor._make(lib.tril(lib.ones((T, S), dtype=bool), k=past))
        y = scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                         dropout_p=self.dropout if self.training else 0.0)
        y = y.transpose(1, 2).reshape(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=cfg.bias)
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x), approximate="tanh")))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.mlp = MLP(cfg)

    def forward(self, x, cache=None, rope=None):
        x = x + self.attn(self.ln_1(x), cache, rope)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.config = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        if cfg.pos == "learned":
            self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        elif cfg.pos == "sinusoidal":
            self.register_buffer("pe", sinusoidal_table(cfg.block_size, cfg.n_embd), persistent=False)
        self.drop = nn.Dropout(cfg.dropout)
        self.h = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        self.ln_f = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # weight tying
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):  # residual projections scaled by depth (GPT-2)
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init_weights(m):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def num_params(self, non_embedding=True):
        n = sum(p.numel() for p in self.parameters())
        if non_embedding and self.config.pos == "learned":
            n -= self.wpe.weight.numel()
        return n

    def forward(self, idx, targets=None, caches=None):
        """idx (B, T) int64 -> logits (B, T, vocab); with targets also the mean cross-entropy.
        ``caches``: a list of per-layer dicts, filled and extended in place (generation)."""
        B, T = idx.shape
        past = 0
        if caches is not None and caches[0].get("k") is not None:
            past = caches[0]["k"].shape[2]
        if past + T > self.config.block_size:
            raise ValueError(f"GPT: sequence of {past + T} tokens exceeds block_size "
                             f"{self.config.block_size}")
        x = self.wte(idx)
        rope = None
        if self.config.pos == "learned":
            x = x + self.wpe(vl.arange(past, past + T, device=idx.device))
        elif self.config.pos == "sinusoidal":
            x = x + self.pe[past:past + T]
        else:
            rope = rope_angles(T, self.config.n_embd // self.config.n_head, offset=past, dtype=x.dtype,
                               device=idx.device)
        x = self.drop(x)
        for i, block in enumerate(self.h):
            x = block(x, None if caches is None else caches[i], rope)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits
        loss = F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))
        return logits, loss

    @vl.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, top_p=None,
                 use_cache=True, generator=None):
        """Sample ``max_new_tokens`` tokens after ``idx`` (B, T).  temperature 0 means greedy."""
        was = self.training
        self.eval()
        g = generator or vl.random.default_generator
        caches = [dict() for _ in self.h] if use_cache else None
        out = idx
        step_in = idx
        for _ in range(max_new_tokens):
            if use_cache:
                if caches[0].get("k") is not None and caches[0]["k"].shape[2] + 1 > self.config.block_size:
                    caches = [dict() for _ in self.h]  # window full: restart from the last block
                    step_in = out[:, -self.config.block_size + 1:]
                logits = self(step_in, caches=caches)[:, -1, :]
            else:
                logits = self(out[:, -self.config.block_size:])[:, -1, :]
            nxt = sample_next(logits, temperature, top_k, top_p, g)
            out = vl.cat([out, nxt], dim=1)
            step_in = nxt
        self.train(was)
        return out

    def config_dict(self):
        return asdict(self.config)


def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """One token per row from logits (B, V): greedy at temperature 0, else softmax(logits/T)
    restricted to the top-k tokens and/or the smallest set whose probability reaches top_p.
    The draw is made on the host with the CPU generator (one copy of the logits per token), so a
    seed gives the same tokens on every device; the tokens go back to the logits' device."""
    z = logits.detach().cpu().numpy().astype(xp.float64)
    B, V = z.shape
    if temperature == 0:
        return vl.tensor(z.argmax(-1)[:, None]).to(logits.device)
    z = z / temperature
    if top_k is not None and top_k < V:
        kth = xp.sort(z, axis=-1)[:, -top_k][:, None]
        z = xp.where(z < kth, -xp.inf, z)
    p = xp.exp(z - z.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    if top_p is not None and top_p < 1.0:
        order = xp.argsort(-p, axis=-1)
        ps = xp.take_along_axis(p, order, -1)
        keep = xp.cumsum(ps, -1) - ps < top_p  # keep tokens until the mass reaches top_p
        mask = xp.zeros_like(p, dtype=bool)
        xp.put_along_axis(mask, order, keep, -1)
        p = xp.where(mask, p, 0)
        p /= p.sum(-1, keepdims=True)
    g = generator or vl.random.default_generator
    u = g.random((B, 1))
    idx = (xp.cumsum(p, -1) < u).sum(-1)
    return vl.tensor(xp.minimum(idx, V - 1)[:, None]).to(logits.device)

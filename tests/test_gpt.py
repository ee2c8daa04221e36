"""GPT: KV-cache logits equal full recomputation; sampling rules; a tiny model learns."""
import numpy as np
import pytest

import varlens as vl
from varlens.models.gpt import GPT, GPTConfig, sample_next


@pytest.mark.parametrize("pos", ["learned", "sinusoidal", "rope"])
def test_kv_cache_matches_full_recompute(pos):
    cfg = GPTConfig(vocab_size=20, block_size=16, n_layer=2, n_head=2, n_embd=16, pos=pos)
    m = GPT(cfg).double()
    m.eval()
    idx = vl.randint(0, 20, (2, 9))
    with vl.no_grad():
        full = m(idx).numpy()
        caches = [dict() for _ in m.h]
        parts = [m(idx[:, :5], caches=caches).numpy()]
        for t in range(5, 9):
            parts.append(m(idx[:, t:t + 1], caches=caches).numpy())
    np.testing.assert_allclose(np.concatenate(parts, 1), full, rtol=1e-10, atol=1e-12)


def test_generate_with_and_without_cache_agree_greedy():
    cfg = GPTConfig(vocab_size=11, block_size=12, n_layer=1, n_head=2, n_embd=8)
    m = GPT(cfg)
    start = vl.tensor([[1, 2, 3]])
    a = m.generate(start, 15, temperature=0, use_cache=True)
    b = m.generate(start, 15, temperature=0, use_cache=False)
    assert a.tolist() == b.tolist()
    assert a.shape == (1, 18)


def test_sampling_respects_top_k_and_top_p():
    logits = vl.tensor(np.log(np.array([[0.5, 0.3, 0.15, 0.05]] * 4000)))
    g = vl.Generator().manual_seed(0)
    k = sample_next(logits, 1.0, top_k=2, generator=g).numpy().ravel()
    assert set(k) <= {0, 1} and 0.55 < (k == 0).mean() < 0.70  # 0.5/0.8 = 0.625
    p = sample_next(logits, 1.0, top_p=0.7, generator=g).numpy().ravel()
    assert set(p) <= {0, 1}  # 0.5 < 0.7 needs the second token, then mass 0.8 >= 0.7
    assert (sample_next(logits, 0.0).numpy() == 0).all()


def test_tiny_gpt_learns_a_repeating_sequence():
    vl.manual_seed(0)
    cfg = GPTConfig(vocab_size=8, block_size=16, n_layer=1, n_head=2, n_embd=32)
    m = GPT(cfg)
    opt = vl.optim.AdamW(m.parameters(), lr=3e-3)
    seq = np.tile(np.arange(8), 8)
    losses = []
    for step in range(60):
        starts = np.random.default_rng(step).integers(0, len(seq) - 17, 8)
        x = vl.tensor(np.stack([seq[s:s + 16] for s in starts]))
        y = vl.tensor(np.stack([seq[s + 1:s + 17] for s in starts]))
        _, loss = m(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[0] > 1.8 and losses[-1] < 0.3, (losses[0], losses[-1])
    out = m.generate(vl.tensor([[0, 1, 2]]), 8, temperature=0)
    assert out.tolist()[0] == [0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2]


def test_gpt_refuses_too_long_input():
    m = GPT(GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=1, n_embd=4))
    with pytest.raises(ValueError, match="exceeds block_size 4"):
        m(vl.zeros(1, 5, dtype=vl.int64))

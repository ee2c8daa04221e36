"""Decoding for every sequence model (seed 003 §6.6): greedy, temperature sampling, top-k,
nucleus (top-p) sampling and beam search with length-normalised scores.

A model plugs in through one function, ``step_fn(tokens, state) -> (logits, state)``:
``tokens`` is an int64 array (B,) holding the last emitted token of each running
sequence and ``logits`` is (B, V) (a Tensor or an array).  Beam search also needs to
reorder or repeat the batch of states; by default every array/Tensor leaf of ``state``
(nested tuples, lists and dicts) is indexed on axis 0, and a model with another layout
passes ``reorder_state(state, index)``.

Everything here runs without autograd and returns NumPy int arrays / lists of ints.
"""
from __future__ import annotations

import numpy as np

_NEG_INF = -np.inf


def _to_np(logits):
    a = logits._data if hasattr(logits, "_data") else np.asarray(logits)
    return np.asarray(a, dtype=np.float64)


def _rng(generator):
    """A NumPy Generator: varlens' global stream by default, else the one given
    (a varlens.Generator, a numpy Generator or an int seed)."""
    if generator is None:
        from varlens import random as _r
        return _r.default_generator.rng
    if isinstance(generator, np.random.Generator):
        return generator
    if isinstance(generator, (int, np.integer)):
        return np.random.default_rng(int(generator))
    if hasattr(generator, "rng"):
        return generator.rng
    raise TypeError(f"generator must be None, an int seed, a numpy or a varlens Generator, "
                    f"got {type(generator).__name__}")


def log_softmax_np(logits, temperature=1.0):
    """log SoftMax_tau(a)_i = a_i/tau - log sum_j exp(a_j/tau)  (seed 003 §6.6.1)."""
    a = _to_np(logits) / temperature
    m = np.max(a, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    z = a - m
    with np.errstate(divide="ignore"):
        return z - np.log(np.sum(np.exp(z), axis=-1, keepdims=True))


def softmax_with_temperature(logits, temperature=1.0):
    """SoftMax_tau over the last axis: tau = 1 is the softmax, tau -> 0 tends to argmax,
    tau > 1 flattens the distribution (seed 003 §6.6.1)."""
    if not temperature > 0:
        raise ValueError(f"softmax_with_temperature: temperature must be > 0, got {temperature!r}")
    return np.exp(log_softmax_np(logits, temperature))


def top_k_filter(logits, k):
    """Logits with everything outside the k largest of each row set to -inf."""
    a = _to_np(logits).copy()
    V = a.shape[-1]
    if not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"top_k_filter: k must be a positive int, got {k!r}")
    if k >= V:
        return a
    kth = np.partition(a, V - k, axis=-1)[..., V - k:V - k + 1]
    a[a < kth] = _NEG_INF
    # ties at the k-th value could keep more than k: drop the extra ones deterministically
    keep = np.isfinite(a)
    if np.any(keep.sum(-1) > k):
        order = np.argsort(-a, axis=-1, kind="stable")
        mask = np.zeros_like(keep)
        np.put_along_axis(mask, order[..., :k], True, axis=-1)
        a[~mask] = _NEG_INF
    return a


def top_p_filter(logits, p, temperature=1.0):
    """Nucleus filter (seed 003 §6.6.3): keep the smallest set of most probable tokens whose
    probability mass is at least ``p``; the rest get -inf.  p = 1 keeps every token."""
    if not 0 < p <= 1:
        raise ValueError(f"top_p_filter: p must be in (0, 1], got {p!r}")
    a = _to_np(logits) / temperature
    if p >= 1:
        return a
    probs = np.exp(log_softmax_np(a))
    order = np.argsort(-probs, axis=-1, kind="stable")
    sorted_p = np.take_along_axis(probs, order, axis=-1)
    before = np.cumsum(sorted_p, axis=-1) - sorted_p  # mass strictly before each token
    keep_sorted = before < p  # the token that crosses p is kept, later ones are not
    keep = np.zeros_like(keep_sorted)
    np.put_along_axis(keep, order, keep_sorted, axis=-1)
    return np.where(keep, a, _NEG_INF)


def sample_logits(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """Draw one token per row of ``logits`` (B, V) or (V,).

    ``temperature=0`` is greedy (argmax).  ``top_k`` keeps the k most probable tokens,
    ``top_p`` the nucleus of mass p (applied after temperature and top-k), then the
    renormalised distribution is sampled.
    """
    a = _to_np(logits)
    if temperature == 0:
        return np.argmax(a, axis=-1)
    if temperature < 0:
        raise ValueError(f"sample_logits: temperature must be >= 0, got {temperature!r}")
    a = a / temperature
    if top_k is not None:
        a = top_k_filter(a, top_k)
    if top_p is not None:
        a = top_p_filter(a, top_p)
    probs = np.exp(log_softmax_np(a))
    rng = _rng(generator)
    flat = probs.reshape(-1, probs.shape[-1])
    cdf = np.cumsum(flat, axis=-1)
    u = rng.random((flat.shape[0], 1)) * cdf[:, -1:]
    idx = (cdf <= u).sum(-1)
    idx = np.minimum(idx, flat.shape[-1] - 1)
    # never land on a zero-probability token because of rounding at the top of the cdf
    bad = flat[np.arange(flat.shape[0]), idx] == 0
    if np.any(bad):
        idx[bad] = np.argmax(flat[bad], axis=-1)
    return idx.reshape(probs.shape[:-1])


# ---------------------------------------------------------------------- running a decoder
def _index_state(state, index):
    if state is None:
        return None
    if isinstance(state, tuple):
        return tuple(_index_state(s, index) for s in state)
    if isinstance(state, list):
        return [_index_state(s, index) for s in state]
    if isinstance(state, dict):
        return {k: _index_state(v, index) for k, v in state.items()}
    if hasattr(state, "_data") or isinstance(state, np.ndarray):
        return state[index]
    return state


def _run(step_fn, state, start, eos, max_len, choose):
    from varlens.core.grad_mode import no_grad
    tokens = np.asarray(start, dtype=np.int64).reshape(-1)
    B = tokens.shape[0]
    out = np.full((B, max_len), -1, dtype=np.int64)
    done = np.zeros(B, dtype=bool)
    lengths = np.full(B, max_len, dtype=np.int64)
    with no_grad():
        for t in range(max_len):
            logits, state = step_fn(tokens, state)
            nxt = np.asarray(choose(logits), dtype=np.int64).reshape(B)
            nxt = np.where(done, eos if eos is not None else 0, nxt)
            out[:, t] = nxt
            if eos is not None:
                newly = (nxt == eos) & ~done
                lengths[newly] = t + 1
                done |= newly
                if done.all():
                    out = out[:, :t + 1]
                    break
            tokens = nxt
    return [list(out[b, :lengths[b]]) for b in range(B)]


def greedy_decode(step_fn, state, start, eos=None, max_len=50):
    """Argmax at every step until ``eos`` (kept in the output) or ``max_len`` tokens.

    ``start`` is the <SOS> token(s), one per batch row (seed 003 §6.3).  Greedy need not
    find the most probable sequence (seed 003 §6.6.2); beam search looks further."""
    return _run(step_fn, state, start, eos, max_len, lambda lg: np.argmax(_to_np(lg), axis=-1))


def sample_decode(step_fn, state, start, eos=None, max_len=50, temperature=1.0, top_k=None,
                  top_p=None, generator=None):
    """Ancestral sampling with temperature / top-k / nucleus filtering at every step."""
    rng = _rng(generator)
    return _run(step_fn, state, start, eos, max_len,
                lambda lg: sample_logits(lg, temperature, top_k, top_p, rng))


def beam_search(step_fn, state, start, eos, max_len=50, beam_size=4, length_norm=1.0,
                reorder_state=None, return_all=False):
    """Beam search for one source sequence (``state`` has batch size 1).

    Keeps ``beam_size`` running hypotheses; each step expands every one by its
    ``beam_size`` best next tokens and keeps the best ``beam_size`` of those by summed
    log-probability.  A hypothesis that emits ``eos`` moves to the finished list (so the
    beam shrinks); at the end, finished (and, if none finished, still-running)
    hypotheses are ranked by the length-normalised score ``log p / len**length_norm``
    (``length_norm=1``: the mean log-likelihood per token, seed 003 §6.6.2; 0: raw
    log-probability).  A beam of 1 is exactly greedy decoding.

    Returns the best token list (with its eos), or with ``return_all`` a list of
    ``(tokens, normalised_score, logprob)`` best first.
    """
    from varlens.core.grad_mode import no_grad
    if not isinstance(beam_size, (int, np.integer)) or beam_size < 1:
        raise ValueError(f"beam_search: beam_size must be a positive int, got {beam_size!r}")
    reorder = reorder_state or _index_state
    k = int(beam_size)
    live = [([], 0.0)]
    tokens = np.asarray(start, dtype=np.int64).reshape(1)
    finished = []

    def norm(seq, lp):
        return lp / (max(len(seq), 1) ** length_norm)

    with no_grad():
        for _ in range(max_len):
            logits, state = step_fn(tokens, state)
            lp = log_softmax_np(logits).reshape(len(live), -1)
            kk = min(k, lp.shape[-1])
            cand = []
            for i, (seq, score) in enumerate(live):
                top = np.argsort(-lp[i], kind="stable")[:kk]
                for tok in top:
                    cand.append((score + lp[i, tok], i, int(tok)))
            cand.sort(key=lambda c: -c[0])
            cand = cand[:k]
            new_live, parents, toks = [], [], []
            for sc, i, tok in cand:
                seq = live[i][0] + [tok]
                if tok == eos:
                    finished.append((seq, norm(seq, sc), sc))
                else:
                    new_live.append((seq, sc))
                    parents.append(i)
                    toks.append(tok)
            if not new_live:
                live = []
                break
            live = new_live
            state = reorder(state, np.asarray(parents, dtype=np.int64))
            tokens = np.asarray(toks, dtype=np.int64)
    pool = finished if finished else [(s, norm(s, sc), sc) for s, sc in live]
    pool.sort(key=lambda r: -r[1])
    return pool if return_all else pool[0][0]

"""Training and evaluating the encoder-decoders of varlens.models (the RNN Seq2Seq with and without
Bahdanau attention, seed 003 §6.3-§6.4, and the TransformerSeq2Seq of §7.3) on character
transduction tasks (varlens.text.tasks): batches, the token-averaged loss, greedy / beam
translation, exact match and BLEU.
"""
from __future__ import annotations

import time

import numpy as np

import varlens as vl
from varlens.core.tensor import Tensor
from varlens.models.seq2seq import Seq2Seq
from varlens.models.transformer_seq2seq import TransformerSeq2Seq
from varlens.nn import functional as F
from varlens.train.loop import train_loop


# ====================================================================== training and evaluation
def make_batch(vocab, pairs):
    """Arrays for a list of (source, target) strings: src, src_len, tgt_in, tgt_out."""
    src, src_len = vocab.batch([s for s, _ in pairs], eos=False)
    tgt, _ = vocab.batch([t for _, t in pairs], eos=True)
    tgt_in = np.concatenate([np.full((len(pairs), 1), vocab.SOS, dtype=np.int64), tgt[:, :-1]], axis=1)
    tgt_in[tgt_in == vocab.EOS] = vocab.PAD  # the EOS of shorter targets is never an input
    return src, src_len, tgt_in, tgt


def shuffled_batches(vocab, pairs, batch_size, epochs, rng):
    """``make_batch`` of consecutive slices of a fresh permutation of ``pairs`` each epoch (drawn
    lazily from ``rng``, one permutation at the start of each epoch)."""
    for _ in range(epochs):
        order = rng.permutation(len(pairs))
        for i in range(0, len(order), batch_size):
            yield make_batch(vocab, [pairs[j] for j in order[i:i + batch_size]])


def sequence_loss(logits, tgt_out, pad_idx=0):
    """Mean per-token cross-entropy over non-pad targets (seed 003 eq. 6.4.2, token-averaged)."""
    V = logits.shape[-1]
    return F.cross_entropy(logits.reshape(-1, V), Tensor._make(tgt_out.reshape(-1)), ignore_index=pad_idx)


def translate(model, vocab, sources, beam_size=1, max_len=None, record_attention=False):
    """Decode a list of source strings; greedy (batched) for beam 1, else beam search one by one.
    Returns the output strings (and, with ``record_attention``, one (T', S) matrix each)."""
    from varlens.core.grad_mode import no_grad
    from varlens.text.decoding import beam_search, greedy_decode
    was = model.training
    model.eval()
    max_len = max_len or (max(len(s) for s in sources) + 20)
    outs, attns = [], []
    with no_grad():
        if beam_size == 1 and not record_attention:
            src, src_len = vocab.batch(sources, eos=False)
            state = model.encode(src, src_len)
            seqs = greedy_decode(model.step_fn(), state, [vocab.SOS] * len(sources), vocab.EOS, max_len)
            outs = [vocab.decode(s) for s in seqs]
        else:
            for s in sources:
                src, src_len = vocab.batch([s], eos=False)
                state = model.encode(src, src_len)
                if record_attention:
                    state["attn"] = ()
                seq = beam_search(model.step_fn(record_attention), state, vocab.SOS, vocab.EOS, max_len,
                                  beam_size=beam_size, return_all=record_attention)
                if record_attention:
                    seq = seq[0][0]
                    # replay the chosen sequence to collect its attention rows
                    st = model.encode(src, src_len)
                    st["attn"] = ()
                    step = model.step_fn(True)
                    tok = vocab.SOS
                    for t in seq:
                        _, st = step(np.array([tok]), st)
                        tok = t
                    attns.append(np.concatenate(st["attn"], axis=0) if st["attn"] else np.zeros((0, len(s))))
                outs.append(vocab.decode(seq))
    model.train(was)
    return (outs, attns) if record_attention else outs


def evaluate(model, vocab, pairs, beam_size=1, batch_size=256):
    """Exact-match accuracy and corpus BLEU (characters as tokens) of the decoded outputs."""
    from varlens.text.bleu import corpus_bleu
    preds = []
    for i in range(0, len(pairs), batch_size):
        preds += translate(model, vocab, [s for s, _ in pairs[i:i + batch_size]], beam_size=beam_size)
    refs = [t for _, t in pairs]
    exact = float(np.mean([p == r for p, r in zip(preds, refs)]))
    bleu = corpus_bleu([list(r) for r in refs], [list(p) for p in preds])
    return {"exact_match": exact, "bleu": bleu, "predictions": preds}


def train_seq2seq(train_pairs, val_pairs=None, attention=True, vocab=None, embed_dim=32, hidden_size=128,
                  epochs=5, batch_size=64, lr=3e-3, clip=5.0, seed=0, max_steps=None, log_every=0, log=print):
    """Train a Seq2Seq on (source, target) string pairs with Adam; returns a dict with the model,
    the vocab, the loss history and, if ``val_pairs`` is given, its exact match and BLEU."""
    from varlens.optim import Adam
    from varlens.text.tasks import CharSeqVocab
    from varlens.train.loop import train_loop
    vocab = vocab or CharSeqVocab([s + t for s, t in train_pairs + list(val_pairs or [])])
    vl.manual_seed(seed)
    model = Seq2Seq(len(vocab), len(vocab), embed_dim, hidden_size, attention, vocab.PAD, vocab.SOS, vocab.EOS)
    opt = Adam(model.parameters(), lr=lr)
    t0 = time.perf_counter()

    def logged(step, loss):
        if log_every and step % log_every == 0:
            log(f"step {step}: loss {loss:.4f}")

    history = train_loop(model, lambda b: sequence_loss(model(*b[:3]), b[3], vocab.PAD),
                         shuffled_batches(vocab, train_pairs, batch_size, epochs, np.random.default_rng(seed)),
                         opt, clip_grad_norm=clip, max_steps=max_steps, on_step=logged)
    res = {"model": model, "vocab": vocab, "loss": history, "steps": len(history),
           "seconds": time.perf_counter() - t0}
    if val_pairs:
        res.update(evaluate(model, vocab, val_pairs))
    return res


def sequence_nll(model, vocab, pairs):
    """-log p(y | x) per pair, summed over target tokens (seed 003 eq. 6.4.2)."""
    from varlens.core.grad_mode import no_grad
    src, src_len, tgt_in, tgt_out = make_batch(vocab, pairs)
    with no_grad():
        logits = model(src, src_len, tgt_in)
        logp = F.log_softmax(logits, dim=-1).numpy()
    picked = np.take_along_axis(logp, tgt_out[..., None], axis=-1)[..., 0]
    return -(picked * (tgt_out != vocab.PAD)).sum(axis=1)


def evaluate_transformer(model, vocab, pairs, batch_size=256):
    """Exact match and corpus BLEU of greedy outputs, as ``evaluate`` gives for the RNN Seq2Seq."""
    from varlens.text.bleu import corpus_bleu
    preds = []
    max_len = max(len(t) for _, t in pairs) + 5
    for i in range(0, len(pairs), batch_size):
        src, _ = vocab.batch([s for s, _ in pairs[i:i + batch_size]], eos=False)
        preds += [vocab.decode(r) for r in model.greedy(src, max_len)]
    refs = [t for _, t in pairs]
    return {"exact_match": float(np.mean([p == r for p, r in zip(preds, refs)])),
            "bleu": corpus_bleu([list(r) for r in refs], [list(p) for p in preds]), "predictions": preds}


def train_transformer_seq2seq(train_pairs, val_pairs=None, vocab=None, d_model=64, nhead=4, layers=2,
                              dim_feedforward=128, epochs=3, batch_size=64, lr=1e-3, clip=1.0, seed=0,
                              max_steps=None, warmup=50):
    """Adam (warm-up then constant), teacher forcing, token-averaged cross-entropy; returns a dict
    as ``train_seq2seq`` does (model, vocab, loss, steps, seconds, exact_match, bleu)."""
    from varlens.text.tasks import CharSeqVocab
    vocab = vocab or CharSeqVocab([s + t for s, t in train_pairs + list(val_pairs or [])])
    vl.manual_seed(seed)
    model = TransformerSeq2Seq(len(vocab), len(vocab), d_model, nhead, layers, layers, dim_feedforward,
                               pad_idx=vocab.PAD, sos_idx=vocab.SOS, eos_idx=vocab.EOS)
    opt = vl.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98))
    t0 = time.perf_counter()
    history = train_loop(model, lambda b: sequence_loss(model(*b[:3]), b[3], vocab.PAD),
                         shuffled_batches(vocab, train_pairs, batch_size, epochs, np.random.default_rng(seed)),
                         opt, clip_grad_norm=clip, lr_at=lambda step: lr * min(1.0, (step + 1) / warmup),
                         max_steps=max_steps)
    res = {"model": model, "vocab": vocab, "loss": history, "steps": len(history),
           "seconds": time.perf_counter() - t0}
    if val_pairs:
        res.update(evaluate_transformer(model, vocab, val_pairs))
    return res

"""Training a character-level language model (varlens.models.char_rnn.CharRNN; seed 003 §6.1-§6.2,
§6.6) with truncated back-propagation through time.

``train_char_lm`` cuts the corpus into ``batch_size`` parallel streams; each step sees the next
``seq_len`` characters of every stream, and the hidden state is carried to the next chunk
*detached* (``detach_state``), so gradients flow back at most ``seq_len`` steps while the model
still sees an unbroken stream.  Validation is reported in bits per character.
"""
from __future__ import annotations

import math
import time

import numpy as np

from varlens.core.tensor import Tensor
from varlens.models.char_rnn import CharRNN
from varlens.nn import functional as F


def detach_state(state):
    """Cut the graph behind a recurrent state (a Tensor or a tuple of them) for truncated BPTT."""
    if state is None:
        return None
    if isinstance(state, (tuple, list)):
        return type(state)(detach_state(s) for s in state)
    return state.detach()


def make_streams(ids, batch_size):
    """Cut a 1-D id array into ``batch_size`` contiguous streams: array (L, batch_size)."""
    ids = np.asarray(ids, dtype=np.int64)
    L = len(ids) // batch_size
    if L < 2:
        raise ValueError(f"make_streams: {len(ids)} ids are too few for batch_size={batch_size}")
    return ids[:L * batch_size].reshape(batch_size, L).T.copy()


def iterate_chunks(streams, seq_len):
    """Yield (input (T, B), target (T, B)) chunks walking down the streams."""
    L = streams.shape[0]
    for s in range(0, L - 1, seq_len):
        T = min(seq_len, L - 1 - s)
        yield streams[s:s + T], streams[s + 1:s + 1 + T]


def evaluate_bpc(model, streams, seq_len=200):
    """Bits per character of ``model`` on ``streams`` (state carried through the whole text)."""
    from varlens.core.grad_mode import no_grad
    was = model.training
    model.eval()
    total, count, state = 0.0, 0, None
    with no_grad():
        for x, y in iterate_chunks(streams, seq_len):
            logits, state = model(Tensor._make(x), state)
            V = logits.shape[-1]
            loss = F.cross_entropy(logits.reshape(-1, V), Tensor._make(y.reshape(-1)), reduction="sum")
            total += float(loss.item())
            count += y.size
    model.train(was)
    return total / count / math.log(2)


def split_text(text, val_fraction=0.05, max_chars=None):
    """(train, validation) strings: the last ``val_fraction`` of the (truncated) text is validation."""
    if max_chars is not None:
        text = text[:max_chars]
    n_val = max(int(len(text) * val_fraction), 2)
    return text[:-n_val], text[-n_val:]


def train_char_lm(text, vocab=None, hidden_size=128, num_layers=1, embed_dim=None, cell="lstm",
                  seq_len=50, batch_size=32, epochs=1, max_steps=None, lr=2e-3, clip=5.0,
                  val_fraction=0.05, max_chars=None, seed=0, log_every=0, log=print, model=None):
    """Train a CharRNN with Adam and truncated BPTT; returns a dict with the model, the vocab,
    ``val_bpc``, ``train_loss`` history, ``steps``, ``seconds`` and ``chars_per_second``."""
    import varlens as vl
    from varlens.datasets.text import CharVocab
    from varlens.optim import Adam
    from varlens.train.loop import train_loop
    train_txt, val_txt = split_text(text, val_fraction, max_chars)
    vocab = vocab or CharVocab(text if max_chars is None else text[:max_chars])
    vl.manual_seed(seed)
    if model is None:
        model = CharRNN(vocab.size, hidden_size, num_layers, embed_dim, cell=cell)
    opt = Adam(model.parameters(), lr=lr)
    tr = make_streams(vocab.encode(train_txt), batch_size)
    va = make_streams(vocab.encode(val_txt), min(batch_size, max(1, len(val_txt) // 200)))
    t0, carried = time.perf_counter(), {"state": None, "chars": 0}

    def chunks():
        for _ in range(epochs):
            carried["state"] = None          # each epoch starts the streams from a zero state
            yield from iterate_chunks(tr, seq_len)

    def chunk_loss(chunk):
        x, y = chunk
        logits, carried["state"] = model(Tensor._make(x), detach_state(carried["state"]))
        carried["chars"] += y.size
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), Tensor._make(y.reshape(-1)))

    def logged(step, loss):
        if log_every and step % log_every == 0:
            log(f"step {step}: train loss {loss:.4f} ({loss / math.log(2):.3f} bpc)")

    history = train_loop(model, chunk_loss, chunks(), opt, clip_grad_norm=clip, max_steps=max_steps,
                         on_step=logged)
    step, chars = len(history), carried["chars"]
    seconds = time.perf_counter() - t0
    val = evaluate_bpc(model, va)
    return {"model": model, "vocab": vocab, "val_bpc": val, "train_loss": history, "steps": step,
            "seconds": seconds, "chars_per_second": chars / max(seconds, 1e-9),
            "val_streams": va}


def load_english(max_chars=None):
    """The English corpus of varlens.datasets (the King James Bible), optionally truncated."""
    from varlens.datasets.text import load_kjv
    text = load_kjv()
    return text[:max_chars] if max_chars else text

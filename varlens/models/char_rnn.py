"""A character-level language model (Karpathy's char-RNN; seed 003 §6.1-§6.2, §6.6).

``CharRNN``: Embedding -> LSTM (or GRU / RNN) -> Linear to next-character logits.
``train_char_lm`` trains it with truncated back-propagation through time: the corpus is
cut into ``batch_size`` parallel streams, each step sees the next ``seq_len`` characters of
every stream, and the hidden state is carried to the next chunk *detached*
(``detach_state``), so gradients flow back at most ``seq_len`` steps while the model
still sees an unbroken stream.  Validation is reported in bits per character,
``mean cross-entropy / ln 2``.

``make_streams`` / ``iterate_chunks`` are plain NumPy so the PyTorch comparison
(benchmarks/char_lm_vs_torch.py) feeds exactly the same batches.
"""
from __future__ import annotations

import math
import time

import numpy as np

from varlens import nn
from varlens.nn import functional as F
from varlens.core.tensor import Tensor


class CharRNN(nn.Module):
    """Embedding(V, embed_dim) -> {LSTM, GRU, RNN}(embed_dim, hidden, num_layers) -> Linear(hidden, V)."""

    def __init__(self, vocab_size, hidden_size=128, num_layers=1, embed_dim=None, dropout=0.0, cell="lstm"):
        super().__init__()
        if cell not in ("lstm", "gru", "rnn"):
            raise ValueError(f"CharRNN: cell must be 'lstm', 'gru' or 'rnn', got {cell!r}")
        embed_dim = embed_dim or hidden_size
        self.vocab_size, self.hidden_size, self.cell = vocab_size, hidden_size, cell
        self.embed = nn.Embedding(vocab_size, embed_dim)
        rnn_cls = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}[cell]
        self.rnn = rnn_cls(embed_dim, hidden_size, num_layers=num_layers, dropout=dropout)
        self.head = nn.Linear(hidden_size, vocab_size)

    def forward(self, idx, state=None):
        """``idx`` int (T, B) -> logits (T, B, V), new state."""
        out, state = self.rnn(self.embed(idx), state)
        return self.head(out), state

    def hidden_states(self, idx, state=None):
        """Top-layer hidden states (T, B, H) for ``idx`` (T, B), e.g. for neuron pictures."""
        from varlens.core.grad_mode import no_grad
        with no_grad():
            out, _ = self.rnn(self.embed(idx), state)
        return out

    def step_fn(self):
        """The ``step_fn(tokens, state) -> (logits, state)`` of varlens.text.decoding."""
        def step(tokens, state):
            logits, state = self(Tensor._make(np.asarray(tokens, dtype=np.int64)[None, :]), state)
            return logits[0], state
        return step

    def sample(self, vocab, prefix, n_chars=200, temperature=1.0, top_k=None, top_p=None, generator=None):
        """Continue ``prefix`` by ``n_chars`` characters sampled at ``temperature`` (0 = greedy)."""
        from varlens.core.grad_mode import no_grad
        from varlens.text.decoding import sample_logits
        from varlens.text.decoding import _rng
        if not prefix:
            raise ValueError("CharRNN.sample: prefix must be a non-empty string")
        rng = _rng(generator)
        was = self.training
        self.eval()
        ids = vocab.encode(prefix)
        out = []
        with no_grad():
            logits, state = self(Tensor._make(np.asarray(ids, dtype=np.int64)[:, None]))
            last = logits[-1]
            for _ in range(n_chars):
                tok = int(sample_logits(last, temperature, top_k, top_p, rng)[0])
                out.append(tok)
                logits, state = self(Tensor._make(np.array([[tok]], dtype=np.int64)), state)
                last = logits[0]
        self.train(was)
        return vocab.decode(out)


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
    from varlens.nn.utils import clip_grad_norm_
    from varlens.optim import Adam
    train_txt, val_txt = split_text(text, val_fraction, max_chars)
    vocab = vocab or CharVocab(text if max_chars is None else text[:max_chars])
    vl.manual_seed(seed)
    if model is None:
        model = CharRNN(vocab.size, hidden_size, num_layers, embed_dim, cell=cell)
    opt = Adam(model.parameters(), lr=lr)
    tr = make_streams(vocab.encode(train_txt), batch_size)
    va = make_streams(vocab.encode(val_txt), min(batch_size, max(1, len(val_txt) // 200)))
    history, step, t0, chars = [], 0, time.perf_counter(), 0
    model.train()
    done = False
    for _ in range(epochs):
        state = None
        for x, y in iterate_chunks(tr, seq_len):
            state = detach_state(state)
            logits, state = model(Tensor._make(x), state)
            V = logits.shape[-1]
            loss = F.cross_entropy(logits.reshape(-1, V), Tensor._make(y.reshape(-1)))
            opt.zero_grad()
            loss.backward()
            if clip:
                clip_grad_norm_(model.parameters(), clip)
            opt.step()
            history.append(float(loss.item()))
            chars += y.size
            step += 1
            if log_every and step % log_every == 0:
                log(f"step {step}: train loss {history[-1]:.4f} ({history[-1] / math.log(2):.3f} bpc)")
            if max_steps is not None and step >= max_steps:
                done = True
                break
        if done:
            break
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

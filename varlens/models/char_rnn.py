"""A character-level language model (Karpathy's char-RNN; seed 003 §6.1-§6.2, §6.6).

``CharRNN``: Embedding -> LSTM (or GRU / RNN) -> Linear to next-character logits.
``varlens.text.char_lm.train_char_lm`` trains it with truncated back-propagation through time: the corpus is
cut into ``batch_size`` parallel streams, each step sees the next ``seq_len`` characters of
every stream, and the hidden state is carried to the next chunk *detached*
(``detach_state``), so gradients flow back at most ``seq_len`` steps while the model
still sees an unbroken stream.  Validation is reported in bits per character,
``mean cross-entropy / ln 2``.

``varlens.text.char_lm``'s ``make_streams`` / ``iterate_chunks`` are plain NumPy so the PyTorch comparison
(benchmarks/char_lm_vs_torch.py) feeds exactly the same batches.
"""
from __future__ import annotations

import numpy as np

from varlens import nn
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

"""Probability models that drive the arithmetic coder (seed 003 §2.5.3: a generative sequence
model P(x_n | x_{1:n-1}) gives the coding intervals).

The interface, :class:`Model`, is a byte-level next-symbol predictor with state:

* ``frequencies()`` -> int64 array of length 256, every entry >= 1, the integer frequency
  table for the next byte given everything seen so far;
* ``update(symbol)`` tells it which byte came;
* ``reset()`` returns it to its initial state;
* ``spec()`` -> a small JSON-able dict naming the model and its settings; ``from_spec``
  rebuilds an identical model, so the decompressor can recreate what the compressor used.

Encoder and decoder call exactly the same sequence of ``frequencies``/``update``, so any
model whose outputs are a deterministic function of the history round-trips exactly.

**The trained char-LSTM** is :class:`varlens.info.neural.LSTMModel` (registered here as
``"lstm"``): it steps the recurrent state one byte at a time instead of recomputing the
prefix, and has an escape for bytes outside its vocabulary.

**Plugging in another neural character model** (e.g. the GPT): wrap a
function that maps the history (bytes) to a float64 probability vector over the 256 byte
values in :class:`ProbabilityModel`.  It quantises with :func:`quantize`
(``1 + floor(p * (total - 256))`` in float64, so every byte keeps frequency >= 1 and the
table sums to at most ``total``).  The two sides must compute bit-identical float64
probabilities: run the network in float64 on the same machine/library build, in
inference mode, feeding the same context window, e.g.::

    def probs(history):
        x = varlens.tensor(list(history[-128:]) or [0]).reshape(1, -1)
        with varlens.no_grad():
            logits = net(x)[0, -1].double()
        return varlens.softmax(logits, 0).numpy()
    model = ProbabilityModel(probs, name="char-gpt", settings={"checkpoint": "runs/gpt.npz"})

(then register a factory for ``name`` in ``MODELS`` so ``from_spec`` can rebuild it).  A
float32 network or a different BLAS between compressor and decompressor may change a
probability in its last bit, and one different frequency desynchronises the decoder.
"""
from __future__ import annotations

import numpy as np

__all__ = ["Model", "UniformModel", "StaticModel", "AdaptiveOrder0Model", "PPMModel",
           "ProbabilityModel", "MixtureModel", "quantize", "MODELS", "from_spec", "DEFAULT_TOTAL"]

ALPHABET = 256
DEFAULT_TOTAL = 1 << 24     # frequency tables sum to at most this (coder limit 2**30 at 32 bits)


def quantize(probs, total=DEFAULT_TOTAL):
    """Integer frequencies ``1 + floor(p * (total - K))`` of a float64 probability vector of
    length K: every symbol keeps frequency >= 1 (so it stays codable) and the sum is at most
    ``total``.  The coding cost of the rounding is at most about K/total per symbol."""
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 1 or p.size == 0:
        raise ValueError(f"probs: expected a 1-D probability vector, got shape {p.shape}")
    if not np.all(np.isfinite(p)) or p.min() < 0:
        raise ValueError("probs: expected finite non-negative probabilities")
    s = p.sum()
    if s <= 0:
        raise ValueError("probs: expected a positive total probability")
    k = p.size
    if total < 2 * k:
        raise ValueError(f"total: expected at least 2 * len(probs) = {2 * k}, got {total}")
    return 1 + np.floor(p / s * (total - k)).astype(np.int64)


class Model:
    """Base class of byte models for the arithmetic coder (see the module docstring)."""

    name = "model"
    alphabet_size = ALPHABET

    def reset(self):
        raise NotImplementedError

    def frequencies(self):
        raise NotImplementedError

    def update(self, symbol):
        raise NotImplementedError

    def settings(self):
        return {}

    def spec(self):
        return {"name": self.name, **self.settings()}

    def probabilities(self):
        """The model's next-byte distribution as the coder sees it (frequencies / total)."""
        f = self.frequencies().astype(np.float64)
        return f / f.sum()


class UniformModel(Model):
    """Every byte equally likely: 8 bits per byte, the no-model baseline."""

    name = "uniform"

    def __init__(self):
        self._f = np.ones(ALPHABET, dtype=np.int64)

    def reset(self):
        pass

    def frequencies(self):
        return self._f

    def update(self, symbol):
        pass


class StaticModel(Model):
    """A fixed integer frequency table (every entry must be >= 1)."""

    name = "static"

    def __init__(self, freqs):
        f = np.asarray(freqs, dtype=np.int64)
        if f.shape != (ALPHABET,) or f.min() < 1:
            raise ValueError(f"freqs: expected 256 integer frequencies >= 1, got shape {f.shape}")
        self._f = f

    def reset(self):
        pass

    def frequencies(self):
        return self._f

    def update(self, symbol):
        pass

    def settings(self):
        return {"freqs": self._f.tolist()}


class AdaptiveOrder0Model(Model):
    """Adaptive byte counts (Laplace's add-one rule): P(b) = (c_b + 1) / (n + 256)."""

    name = "order0"

    def __init__(self):
        self.reset()

    def reset(self):
        self._c = np.ones(ALPHABET, dtype=np.int64)

    def frequencies(self):
        return self._c

    def update(self, symbol):
        self._c[symbol] += 1
        if self._c.sum() > DEFAULT_TOTAL:
            self._c = (self._c + 1) // 2


class PPMModel(Model):
    """Adaptive order-k context model in the spirit of PPM, with interpolated absolute
    discounting instead of escape symbols.

    For contexts of length o = 0..k (the last o bytes), counts c_o(b) of the byte that
    followed are kept.  The prediction is built from the shortest context up:

        P_{-1}(b) = 1/256,
        P_o(b) = (max(c_o(b) - d, 0) + d * u_o * P_{o-1}(b)) / n_o,

    with n_o the total count in the context and u_o the number of distinct bytes that
    followed it (a context never seen leaves P_{o-1} unchanged).  This is PPM's "escape"
    probability d*u_o/n_o spread over the lower order rather than coded as a separate symbol.

    ``exclusion=True`` (default) uses PPM's *update exclusion*: after a byte, counts are
    raised from the longest context down, stopping below the first context that had already
    seen that byte, so lower orders count "new in a longer context" events (the idea behind
    Kneser-Ney smoothing).  On English text this saves about 0.3 bits per character.
    The result is quantised with :func:`quantize`.

    Its code length per byte is the model's cross-entropy on the text (003 Remark 2.5.7).
    """

    name = "ppm"

    def __init__(self, order=6, discount=0.75, exclusion=True):
        if not isinstance(order, int) or isinstance(order, bool) or order < 0 or order > 16:
            raise ValueError(f"order: expected an integer context length in [0, 16], got {order!r}")
        if not 0 < discount < 1:
            raise ValueError(f"discount: expected a number in (0, 1), got {discount!r}")
        self.order = order
        self.discount = float(discount)
        self.exclusion = bool(exclusion)
        self.reset()

    def settings(self):
        return {"order": self.order, "discount": self.discount, "exclusion": self.exclusion}

    def reset(self):
        # tables[o]: context bytes -> [n, {byte: count}]
        self._tables = [dict() for _ in range(self.order + 1)]
        self._hist = b""
        self._uniform = np.full(ALPHABET, 1.0 / ALPHABET)

    def _nodes(self):
        h = self._hist
        nodes = []
        for o in range(0, min(self.order, len(h)) + 1):
            ctx = h[len(h) - o:] if o else b""
            nodes.append((o, ctx, self._tables[o].get(ctx)))
        return nodes

    def frequencies(self):
        d = self.discount
        p = self._uniform
        for _, _, node in self._nodes():
            if node is None:
                continue
            n, counts = node
            c = np.zeros(ALPHABET)
            c[list(counts)] = list(counts.values())
            p = (np.maximum(c - d, 0.0) + (d * len(counts)) * p) / n
        return quantize(p)

    def update(self, symbol):
        symbol = int(symbol)
        if not 0 <= symbol < ALPHABET:
            raise ValueError(f"symbol: expected a byte value in [0, 255], got {symbol}")
        for o, ctx, node in reversed(self._nodes()):
            if node is None:
                self._tables[o][ctx] = [1, {symbol: 1}]
            else:
                node[0] += 1
                cnt = node[1]
                old = cnt.get(symbol, 0)
                cnt[symbol] = old + 1
                if old and self.exclusion:
                    break
        h = self._hist + bytes((symbol,))
        self._hist = h[-self.order:] if self.order else b""


class ProbabilityModel(Model):
    """Adapter for any deterministic next-byte predictor (e.g. a trained varlens character
    model): ``prob_fn(history: bytes) -> 256 float64 probabilities``, quantised with
    :func:`quantize`.  See the module docstring for the determinism requirements."""

    def __init__(self, prob_fn, name="callable", settings=None, total=DEFAULT_TOTAL):
        if not callable(prob_fn):
            raise TypeError(f"prob_fn: expected a callable history -> probabilities, got {type(prob_fn).__name__}")
        self.prob_fn = prob_fn
        self.name = name
        self._settings = dict(settings or {})
        self.total = total
        self.reset()

    def settings(self):
        return dict(self._settings)

    def reset(self):
        self._hist = bytearray()

    def frequencies(self):
        p = np.asarray(self.prob_fn(bytes(self._hist)), dtype=np.float64)
        if p.shape != (ALPHABET,):
            raise ValueError(f"prob_fn: expected 256 probabilities, got shape {p.shape}")
        return quantize(p, self.total)

    def update(self, symbol):
        self._hist.append(int(symbol))


class MixtureModel(Model):
    """Mix the next-byte distributions of several models: P(b) = sum_k w_k P_k(b), with the
    weights a Bayesian posterior over "which model is right" with forgetting: after byte b,
    log w_k <- decay * log w_k + log P_k(b), then normalise (decay = 1: the plain posterior,
    which ends up following one model; decay < 1 lets it switch as the text changes).  All in
    float64 from the members' integer tables, so the decoder reproduces it exactly.  Used to
    combine the trained LSTM with the adaptive PPM model.  Returns :func:`quantize`'d
    frequencies."""

    name = "mix"

    def __init__(self, models, decay=0.99):
        models = list(models)
        if len(models) < 2 or not all(isinstance(m, Model) for m in models):
            raise ValueError(f"models: expected at least two varlens.info.models.Model instances, got {models!r}")
        if not 0 < float(decay) <= 1:
            raise ValueError(f"decay: expected a number in (0, 1], got {decay!r}")
        self.models, self.decay = models, float(decay)
        self.reset()

    def settings(self):
        return {"models": [m.spec() for m in self.models], "decay": self.decay}

    def reset(self):
        for m in self.models:
            m.reset()
        self._logw = np.zeros(len(self.models))
        self._probs = None

    def weights(self):
        w = np.exp(self._logw - self._logw.max())
        return w / w.sum()

    def frequencies(self):
        ps = [m.frequencies().astype(np.float64) for m in self.models]
        ps = [f / f.sum() for f in ps]
        self._probs = ps
        w = self.weights()
        p = w[0] * ps[0]
        for k in range(1, len(ps)):
            p = p + w[k] * ps[k]
        return quantize(p)

    def update(self, symbol):
        if self._probs is None:
            self.frequencies()
        lp = np.log(np.array([p[symbol] for p in self._probs]))
        self._logw = self.decay * self._logw + lp
        self._logw -= self._logw.max()
        self._probs = None
        for m in self.models:
            m.update(symbol)


# name -> factory(**settings); the compressor writes spec() into its header
MODELS = {
    "uniform": lambda: UniformModel(),
    "order0": lambda: AdaptiveOrder0Model(),
    "ppm": lambda order=6, discount=0.75, exclusion=True: PPMModel(order, discount, exclusion),
    "static": lambda freqs: StaticModel(freqs),
    "lstm": lambda **kw: _lstm_model(**kw),
    "mix": lambda models, decay=0.99: MixtureModel([from_spec(m) for m in models], decay),
}


def _lstm_model(**kw):
    from varlens.info.neural import LSTMModel   # loaded only when a file names it
    return LSTMModel(**kw)


def from_spec(spec):
    """Rebuild a model from ``Model.spec()``."""
    if not isinstance(spec, dict) or "name" not in spec:
        raise ValueError(f"spec: expected a dict with a 'name' key, got {spec!r}")
    kw = dict(spec)
    name = kw.pop("name")
    if name not in MODELS:
        raise ValueError(f"spec: unknown model name {name!r}; known models: {sorted(MODELS)}")
    return MODELS[name](**kw)

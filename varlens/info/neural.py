"""A trained character LSTM as the probability model of the arithmetic coder (seed 003 §2.5.3:
a sequence model P(x_n | x_{1:n-1}) gives the coding intervals; the code length is the model's
cross-entropy on the text, Remark 2.5.7).

Pieces:

* :func:`kjv_split` -- the King James Bible (``varlens.datasets.text.load_kjv``) as UTF-8
  bytes, cut at a line break into the first 90 % (training) and the last 10 % (held-out test
  text, never seen in training).
* :func:`train_lstm` -- trains a :class:`varlens.models.char_rnn.CharRNN` (LSTM) on bytes
  with truncated BPTT and Adam under a CPU-time budget, and :func:`save_checkpoint` writes it
  (weights, byte vocabulary, settings) to an ``.npz`` file.
* :class:`LSTMModel` -- the coder's :class:`~varlens.info.models.Model`.  It loads the
  checkpoint into float64 NumPy arrays and steps the LSTM **one byte at a time**, carrying
  (h, c), so each prediction costs one cell step, never a recomputation of the prefix.

Determinism (the decoder must see bit-identical frequencies): every step runs the same fixed
sequence of float64 NumPy operations (one ``W_hh @ h`` product per layer, elementwise gates,
a max-shifted softmax, :func:`~varlens.info.models.quantize`); the coder holds the BLAS
thread pool at one thread while it runs (``threadpoolctl``), so no reduction is split across
a thread-count-dependent number of partial sums.  The file header stores the checkpoint's
SHA-256, and decoding refuses any other checkpoint.  Compressor and decompressor must still
run on the same NumPy/BLAS build and CPU family (a different SIMD kernel may round the last
bit differently); the CRC32 in the header catches that case.

Escape: the model predicts only the bytes of its training vocabulary.  Any other byte is
coded as an escape event of probability ``escape`` (default 2**-12) followed by the byte
itself, uniform over the ``256 - V`` bytes outside the vocabulary; both steps are folded
into one 256-entry frequency table (the out-of-vocabulary bytes share the escape mass
equally), so the byte coder of :mod:`varlens.info.compress` is used unchanged.  After an
escaped byte the LSTM state is left as it was (the network has no input for it).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import time

import numpy as np

from varlens.info.models import ALPHABET, Model, quantize

__all__ = ["LSTMModel", "kjv_split", "train_lstm", "save_checkpoint", "load_checkpoint",
           "file_sha256", "single_blas_thread", "CHECKPOINT_FORMAT"]

CHECKPOINT_FORMAT = "varlens-char-lstm-1"
DEFAULT_ESCAPE = 2.0 ** -12


def file_sha256(path):
    """SHA-256 hex digest of a regular file (devices such as /dev/zero, FIFOs and directories are
    refused with a ValueError: hashing them would never end or block)."""
    from varlens.serialization import open_regular_file
    h = hashlib.sha256()
    fh, _ = open_regular_file(path, "checkpoint")
    with fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class single_blas_thread:
    """Context manager: the BLAS thread pool limited to one thread (threadpoolctl), so matrix
    products reduce in one fixed order on both the encoding and the decoding side."""

    def __enter__(self):
        from threadpoolctl import threadpool_limits
        self._lim = threadpool_limits(limits=1, user_api="blas")
        return self

    def __exit__(self, *exc):
        self._lim.restore_original_limits()
        return False


# ----------------------------------------------------------------------------------- data

def kjv_split(test_fraction=0.1):
    """(train, test) bytes of the King James Bible: the last ``test_fraction`` of the UTF-8
    text, starting after a line break, is the held-out test text."""
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction: expected a number in (0, 1), got {test_fraction!r}")
    from varlens.datasets.text import load_kjv
    data = load_kjv().encode("utf-8")
    cut = data.index(b"\n", int(len(data) * (1 - test_fraction))) + 1
    return data[:cut], data[cut:]


# ------------------------------------------------------------------------------ checkpoint

def save_checkpoint(path, model, vocab, meta=None):
    """Write a trained CharRNN (LSTM) and its byte vocabulary (the sorted byte values it
    predicts, id i <-> byte vocab[i]) to ``path`` (.npz).  Returns the file's SHA-256."""
    vocab = bytes(vocab)
    if model.cell != "lstm":
        raise ValueError(f"model: expected a CharRNN with cell='lstm', got cell={model.cell!r}")
    if len(vocab) != model.vocab_size:
        raise ValueError(f"vocab: expected {model.vocab_size} byte values (the model's vocab_size), got {len(vocab)}")
    arrays = {f"w/{k}": np.asarray(v.numpy()) for k, v in model.state_dict().items()}
    config = {"format": CHECKPOINT_FORMAT, "hidden_size": model.hidden_size,
              "num_layers": model.rnn.num_layers, "vocab_size": model.vocab_size,
              "embed_dim": int(model.embed.weight.shape[1]), **(meta or {})}
    arrays["vocab"] = np.frombuffer(vocab, dtype=np.uint8)
    arrays["config"] = np.array(json.dumps(config, sort_keys=True))
    tmp = str(path) + ".tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, path)
    return file_sha256(path)


def load_checkpoint(path):
    """(float64 weights dict, vocab bytes, config dict) of a checkpoint by :func:`save_checkpoint`."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"checkpoint: no such file {path!r}")
    import zipfile
    size = os.path.getsize(path)
    try:   # entries may not inflate beyond the file (np.savez writes them uncompressed)
        with zipfile.ZipFile(path) as zf:
            if sum(zi.file_size for zi in zf.infolist()) > size:
                raise ValueError("its entries declare more bytes than the file holds")
    except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError, RuntimeError) as e:
        raise ValueError(f"checkpoint: {path!r} is not a varlens char-LSTM checkpoint ({e})") from None
    try:
        with np.load(path, allow_pickle=False) as z:
            config = json.loads(str(z["config"]))
            vocab = z["vocab"].tobytes()
            w = {k[2:]: z[k].astype(np.float64) for k in z.files if k.startswith("w/")}
    except (ValueError, KeyError, OSError, TypeError, AttributeError, zipfile.BadZipFile) as e:
        raise ValueError(f"checkpoint: {path!r} is not a varlens char-LSTM checkpoint ({e})") from None
    if not isinstance(config, dict):
        raise ValueError(f"checkpoint: {path!r} is not a varlens char-LSTM checkpoint (its config is not a dict)")
    if config.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"checkpoint: expected format {CHECKPOINT_FORMAT!r} in {path!r}, got {config.get('format')!r}")
    return w, vocab, config


# ------------------------------------------------------------------------------- the model

def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


class LSTMModel(Model):
    """Next-byte frequencies from a trained char-LSTM checkpoint, one cell step per byte.

    ``checkpoint``: path of a :func:`save_checkpoint` file.  ``sha256``: if given, the file
    must have this hash (the decompressor passes the one in the header).  ``escape``: the
    probability of a byte outside the model's vocabulary (see the module docstring).
    """

    name = "lstm"

    def __init__(self, checkpoint, sha256=None, escape=DEFAULT_ESCAPE):
        if not isinstance(checkpoint, (str, os.PathLike)):
            raise TypeError(f"checkpoint: expected a path, got {type(checkpoint).__name__}")
        if sha256 is not None and not isinstance(sha256, str):
            raise TypeError(f"sha256: expected a hex string, got {type(sha256).__name__}")
        if not isinstance(escape, (int, float)) or isinstance(escape, bool):
            raise TypeError(f"escape: expected a number, got {type(escape).__name__}")
        if not 0 < float(escape) < 0.5:
            raise ValueError(f"escape: expected a probability in (0, 0.5), got {escape!r}")
        digest = file_sha256(checkpoint) if os.path.exists(checkpoint) else None
        if digest is None:
            raise FileNotFoundError(f"checkpoint: no such file {checkpoint!r}"
                                    + (" (the compressed file was made with a checkpoint of sha256 "
                                       f"{sha256}; pass its path with --checkpoint)" if sha256 else ""))
        if sha256 is not None and digest != sha256:
            raise ValueError(f"checkpoint: {checkpoint!r} has sha256 {digest}, but the data was coded with a "
                             f"checkpoint of sha256 {sha256}; decoding with another model cannot work")
        w, vocab, cfg = load_checkpoint(checkpoint)
        self.checkpoint, self.sha256, self.escape = str(checkpoint), digest, float(escape)
        self.config = cfg
        self.vocab = vocab
        V, H, L = len(vocab), int(cfg["hidden_size"]), int(cfg["num_layers"])
        self.V, self.H, self.L = V, H, L
        self.n_parameters = int(sum(a.size for a in w.values()))
        self.n_bytes = os.path.getsize(checkpoint)
        self._id = np.full(ALPHABET, -1, dtype=np.int64)
        self._id[np.frombuffer(vocab, dtype=np.uint8)] = np.arange(V)
        self._vocab_idx = np.frombuffer(vocab, dtype=np.uint8).astype(np.int64)
        n_oov = ALPHABET - V
        self._oov_p = self.escape / n_oov if n_oov else 0.0
        self._keep = 1.0 - self.escape if n_oov else 1.0
        with single_blas_thread():
            # layer 0 sees one of V embeddings: fold embedding, W_ih and both biases into a
            # (V, 4H) table of input contributions, computed once
            self._in0 = (w["embed.weight"] @ w["rnn.weight_ih_l0"].T
                         + w["rnn.bias_ih_l0"] + w["rnn.bias_hh_l0"])
        self._whh = [np.ascontiguousarray(w[f"rnn.weight_hh_l{l}"]) for l in range(L)]
        self._wih = [None] + [np.ascontiguousarray(w[f"rnn.weight_ih_l{l}"]) for l in range(1, L)]
        self._b = [None] + [w[f"rnn.bias_ih_l{l}"] + w[f"rnn.bias_hh_l{l}"] for l in range(1, L)]
        self._head_w = np.ascontiguousarray(w["head.weight"])
        self._head_b = w["head.bias"]
        nl = vocab.find(b"\n")
        self._start = nl if nl >= 0 else 0
        self.reset()

    def settings(self):
        return {"checkpoint": self.checkpoint, "sha256": self.sha256, "escape": self.escape}

    def size_report(self):
        return {"parameters": self.n_parameters, "checkpoint_bytes": self.n_bytes,
                "hidden_size": self.H, "num_layers": self.L, "vocab_size": self.V}

    def reset(self):
        self._h = [np.zeros(self.H) for _ in range(self.L)]
        self._c = [np.zeros(self.H) for _ in range(self.L)]
        # the state before the first byte: the network has read one line break
        self._step(self._start)

    def _step(self, i):
        """Feed vocabulary id ``i``; the LSTM cell of seed 003 eq. 6.1.3 (gate order i, f, g, o)."""
        H = self.H
        x = None
        for l in range(self.L):
            if l == 0:
                g = self._in0[i] + self._whh[0] @ self._h[0]
            else:
                g = self._wih[l] @ x + self._whh[l] @ self._h[l] + self._b[l]
            ig = _sigmoid(g[:H])
            fg = _sigmoid(g[H:2 * H])
            gg = np.tanh(g[2 * H:3 * H])
            og = _sigmoid(g[3 * H:])
            c = fg * self._c[l] + ig * gg
            h = og * np.tanh(c)
            self._c[l], self._h[l] = c, h
            x = h
        z = self._head_w @ x + self._head_b
        z = z - z.max()
        e = np.exp(z)
        p = np.full(ALPHABET, self._oov_p)
        p[self._vocab_idx] = (self._keep / e.sum()) * e
        self._freqs = quantize(p)

    def frequencies(self):
        return self._freqs

    def update(self, symbol):
        i = self._id[symbol]
        if i >= 0:
            self._step(int(i))
        # escaped byte: the state is left unchanged (the model has no input for it)


# -------------------------------------------------------------------------------- training

def train_lstm(data, hidden_size=256, embed_dim=64, num_layers=1, seq_len=100, batch_size=64,
               lr=3e-3, clip=5.0, cpu_seconds=600.0, max_steps=None, epochs=100, seed=0,
               checkpoint=None, save_every=200, log=print, log_every=50):
    """Train a byte-level :class:`~varlens.models.char_rnn.CharRNN` (LSTM) on ``data`` (bytes)
    with Adam, gradient clipping and truncated BPTT (state carried across chunks, detached),
    the learning rate following a cosine from ``lr`` to 0 over the budget.  Stops after
    ``cpu_seconds`` of process CPU time (BLAS held at one thread, so that is one core) or
    ``max_steps``.  Saves to ``checkpoint`` every ``save_every`` steps and at the end if
    given.  Returns a dict: model, vocab (bytes), steps, chars, cpu_seconds, wall_seconds,
    train_bpc (mean of the last 50 steps), sha256 (if saved)."""
    import varlens as vl
    from varlens.models.char_rnn import CharRNN
    from varlens.text.char_lm import detach_state, iterate_chunks, make_streams
    from varlens.nn import functional as F
    from varlens.optim import Adam
    from varlens.core.tensor import Tensor
    from varlens.train.loop import train_loop
    data = bytes(data)
    if len(data) < 2 * batch_size * (seq_len + 1):
        raise ValueError(f"data: expected at least {2 * batch_size * (seq_len + 1)} bytes for batch_size="
                         f"{batch_size}, seq_len={seq_len}, got {len(data)}")
    if max_steps is None and not cpu_seconds:
        raise ValueError("train_lstm: give cpu_seconds or max_steps")
    vocab = bytes(sorted(set(data)))
    ids = np.full(ALPHABET, -1, dtype=np.int64)
    ids[np.frombuffer(vocab, dtype=np.uint8)] = np.arange(len(vocab))
    streams = make_streams(ids[np.frombuffer(data, dtype=np.uint8)], batch_size)
    vl.manual_seed(seed)
    model = CharRNN(len(vocab), hidden_size, num_layers, embed_dim, cell="lstm")
    opt = Adam(model.parameters(), lr=lr)
    hist, step, chars, digest = [], 0, 0, None
    c0, t0 = time.process_time(), time.perf_counter()
    budget = cpu_seconds if cpu_seconds else math.inf
    meta = {"data_bytes": len(data), "seq_len": seq_len, "batch_size": batch_size, "lr": lr, "seed": seed}

    def save():
        m = {**meta, "steps": step, "chars_seen": chars, "cpu_seconds": round(time.process_time() - c0, 1),
             "train_bpc_last50": float(np.mean(hist[-50:]) / math.log(2)) if hist else None}
        return save_checkpoint(checkpoint, model, vocab, m)

    carried = {"state": None}

    def chunks():
        """The chunks of each epoch until the CPU budget or max_steps is spent; ``frac`` (the
        spent fraction) sets the cosine learning rate of the step that follows."""
        for _ in range(epochs):
            carried["state"] = None
            for x, y in iterate_chunks(streams, seq_len):
                carried["used"] = time.process_time() - c0
                carried["frac"] = max(carried["used"] / budget, step / max_steps if max_steps else 0.0)
                if carried["frac"] >= 1.0:
                    return
                yield x, y

    def chunk_loss(chunk):
        nonlocal chars
        x, y = chunk
        logits, carried["state"] = model(Tensor._make(x), detach_state(carried["state"]))
        chars += y.size
        return F.cross_entropy(logits.reshape(-1, len(vocab)), Tensor._make(y.reshape(-1)))

    def after_step(n, loss):
        nonlocal step
        hist.append(loss)
        step = n
        if log and log_every and step % log_every == 0:
            log(f"step {step}: {np.mean(hist[-log_every:]) / math.log(2):.3f} bpc (train), "
                f"{chars} chars, cpu {carried['used']:.0f} s, wall {time.perf_counter() - t0:.0f} s")
        if checkpoint and save_every and step % save_every == 0:
            save()

    with single_blas_thread():
        train_loop(model, chunk_loss, chunks(), opt, clip_grad_norm=clip,
                   lr_at=lambda _: lr * 0.5 * (1 + math.cos(math.pi * carried["frac"])), on_step=after_step)
    if checkpoint:
        digest = save()
    return {"model": model, "vocab": vocab, "steps": step, "chars": chars,
            "cpu_seconds": time.process_time() - c0, "wall_seconds": time.perf_counter() - t0,
            "train_bpc": float(np.mean(hist[-50:]) / math.log(2)) if hist else float("nan"),
            "sha256": digest}


def main(argv=None):
    """``python -m varlens.info.neural OUT.npz [--cpu-seconds S] [--hidden H]``: train the
    char-LSTM for the coder on the KJV training split (first 90 %)."""
    import argparse
    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("output")
    ap.add_argument("--cpu-seconds", type=float, default=600.0)
    ap.add_argument("--max-steps", type=int, default=None)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--embed", type=int, default=64)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--seq-len", type=int, default=100)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    a = ap.parse_args(argv)
    train, _ = kjv_split()
    r = train_lstm(train, a.hidden, a.embed, a.layers, a.seq_len, a.batch_size, a.lr,
                   cpu_seconds=a.cpu_seconds, max_steps=a.max_steps, checkpoint=a.output,
                   log=lambda s: print(s, flush=True))
    print(f"saved {a.output}: {r['steps']} steps, {r['chars']} chars, cpu {r['cpu_seconds']:.0f} s, "
          f"wall {r['wall_seconds']:.0f} s, train {r['train_bpc']:.3f} bpc, sha256 {r['sha256']}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

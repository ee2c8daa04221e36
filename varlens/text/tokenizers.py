"""Tokenisers for the language models: characters, and byte-level BPE.

Byte-level BPE (Sennrich et al. 2016; GPT-2's byte variant, seed 003 §8): start
from the 256 byte values, then repeatedly merge the most frequent adjacent pair of
tokens into a new token.  Because every string is a byte string, encoding never
fails and decode(encode(s)) == s exactly.
"""
from __future__ import annotations

import json
import os
import re
from collections import Counter

# split text into words with their leading space, runs of digits, punctuation and
# whitespace, so merges never cross a word boundary (keeps training fast and tokens clean)
_PRETOKEN = re.compile(r" ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+")


class CharTokenizer:
    """One token per character seen in training; unknown characters raise a clear error."""

    def __init__(self, chars=None):
        self.itos = list(chars or [])
        self.stoi = {c: i for i, c in enumerate(self.itos)}

    @classmethod
    def train(cls, text):
        return cls(sorted(set(text)))

    @property
    def vocab_size(self):
        return len(self.itos)

    def encode(self, text):
        try:
            return [self.stoi[c] for c in text]
        except KeyError as e:
            raise ValueError(f"CharTokenizer.encode: character {e.args[0]!r} was not in the training "
                             f"text (vocabulary of {len(self.itos)} characters)") from None

    def decode(self, ids):
        return "".join(self.itos[int(i)] for i in ids)

    def save(self, path):
        _atomic_write_json(path, {"type": "char", "chars": self.itos})

    @classmethod
    def load(cls, path):
        d = _read_json(path, "char")
        return cls(d["chars"])


class BPETokenizer:
    """Byte-level byte-pair encoding: ids 0..255 are bytes, later ids are learned merges."""

    def __init__(self, merges=None):
        self.merges = [tuple(m) for m in (merges or [])]  # (left id, right id), in learned order
        self.ranks = {m: i for i, m in enumerate(self.merges)}
        self.vocab = [bytes([b]) for b in range(256)]
        for a, b in self.merges:
            self.vocab.append(self.vocab[a] + self.vocab[b])
        self._cache = {}

    @property
    def vocab_size(self):
        return len(self.vocab)

    @classmethod
    def train(cls, text, vocab_size=512, verbose=False):
        """Learn ``vocab_size - 256`` merges from ``text``."""
        if vocab_size < 256:
            raise ValueError(f"BPETokenizer.train: vocab_size must be at least 256 (the bytes), got {vocab_size}")
        words = Counter(_PRETOKEN.findall(text))
        seqs = {w: list(w.encode("utf-8")) for w in words}
        merges = []
        next_id = 256
        while next_id < vocab_size:
            pairs = Counter()
            for w, n in words.items():
                s = seqs[w]
                for a, b in zip(s, s[1:]):
                    pairs[(a, b)] += n
            if not pairs:
                break
            # most frequent pair; ties broken by the smaller pair so training is deterministic
            best = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))[0]
            if pairs[best] < 2:
                break
            merges.append(best)
            for w in words:
                s = seqs[w]
                if len(s) < 2:
                    continue
                out, i = [], 0
                while i < len(s):
                    if i + 1 < len(s) and s[i] == best[0] and s[i + 1] == best[1]:
                        out.append(next_id)
                        i += 2
                    else:
                        out.append(s[i])
                        i += 1
                seqs[w] = out
            if verbose and next_id % 100 == 0:
                print(f"merge {next_id}: {best} x{pairs[best]}")
            next_id += 1
        return cls(merges)

    def _encode_word(self, word):
        ids = self._cache.get(word)
        if ids is not None:
            return ids
        s = list(word.encode("utf-8"))
        ranks = self.ranks
        while len(s) > 1:
            best, best_rank = None, None
            for i in range(len(s) - 1):
                r = ranks.get((s[i], s[i + 1]))
                if r is not None and (best_rank is None or r < best_rank):
                    best, best_rank = i, r
            if best is None:
                break
            new_id = 256 + best_rank
            pair = (s[best], s[best + 1])
            out, i = [], 0
            while i < len(s):
                if i + 1 < len(s) and (s[i], s[i + 1]) == pair:
                    out.append(new_id)
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            s = out
        if len(self._cache) < 100_000:
            self._cache[word] = s
        return s

    def encode(self, text):
        out = []
        for w in _PRETOKEN.findall(text):
            out.extend(self._encode_word(w))
        return out

    def decode(self, ids):
        try:
            data = b"".join(self.vocab[int(i)] for i in ids)
        except IndexError:
            bad = next(int(i) for i in ids if not 0 <= int(i) < len(self.vocab))
            raise ValueError(f"BPETokenizer.decode: id {bad} is outside the vocabulary of "
                             f"{len(self.vocab)} tokens") from None
        return data.decode("utf-8", errors="replace")

    def save(self, path):
        _atomic_write_json(path, {"type": "bpe", "merges": [list(m) for m in self.merges]})

    @classmethod
    def load(cls, path):
        d = _read_json(path, "bpe")
        merges = d["merges"]
        for i, m in enumerate(merges):
            if (not isinstance(m, list) or len(m) != 2 or not all(isinstance(x, int) for x in m)
                    or not all(0 <= x < 256 + i for x in m)):
                raise ValueError(f"BPETokenizer.load: {path}: merge {i} is malformed ({m!r}); expected "
                                 f"two ids below {256 + i}")
        return cls(merges)


def _atomic_write_json(path, obj):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _read_json(path, kind):
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except FileNotFoundError:
        raise FileNotFoundError(f"tokenizer file {path!r} does not exist") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"tokenizer file {path!r} is not valid JSON ({e})") from None
    if not isinstance(d, dict) or d.get("type") != kind:
        raise ValueError(f"tokenizer file {path!r} does not hold a {kind!r} tokenizer "
                         f"(found type {d.get('type') if isinstance(d, dict) else type(d).__name__!r})")
    return d

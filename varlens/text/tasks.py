"""Synthetic transduction tasks a reader can check by eye (seed 003 §6.4 encoder-decoder).

* ``date_pairs``: a date written in one of several human formats -> ISO ``YYYY-MM-DD``
  (``"tue 14 jul 1987"``, ``"07/14/87"``, ``"july 14, 1987"`` -> ``"1987-07-14"``).
* ``reverse_pairs``: a random string -> the same string reversed.

``CharSeqVocab`` maps characters to ids with PAD = 0, SOS = 1, EOS = 2 and builds
padded (batch, length) arrays with lengths, the layout ``Seq2Seq`` expects.
"""
from __future__ import annotations

import datetime as _dt

import numpy as np

MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august",
          "september", "october", "november", "december"]
DAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]


def _fmt(d, style):
    m = MONTHS[d.month - 1]
    if style == 0:
        return f"{d.day} {m[:3]} {d.year}"
    if style == 1:
        return f"{m} {d.day}, {d.year}"
    if style == 2:
        return f"{d.month:02d}/{d.day:02d}/{d.year % 100:02d}"
    if style == 3:
        return f"{DAYS[d.weekday()]} {d.day} {m} {d.year}"
    if style == 4:
        return f"{d.day:02d}.{d.month:02d}.{d.year}"
    return f"{m[:3]} {d.day} {d.year}"


N_DATE_STYLES = 6


def date_pairs(n, seed=0, start_year=1950, end_year=2049):
    """``n`` (source, target) pairs: a random date in a random human format -> ISO format."""
    rng = np.random.default_rng(seed)
    lo = _dt.date(start_year, 1, 1).toordinal()
    hi = _dt.date(end_year, 12, 31).toordinal()
    out = []
    for o, s in zip(rng.integers(lo, hi + 1, n), rng.integers(0, N_DATE_STYLES, n)):
        d = _dt.date.fromordinal(int(o))
        out.append((_fmt(d, int(s)), d.isoformat()))
    return out


def reverse_pairs(n, min_len=3, max_len=10, alphabet="abcdefghijklmnopqrstuvwxyz", seed=0):
    """``n`` (source, target) pairs: a random string and its reverse."""
    rng = np.random.default_rng(seed)
    out = []
    for L in rng.integers(min_len, max_len + 1, n):
        s = "".join(rng.choice(list(alphabet), int(L)))
        out.append((s, s[::-1]))
    return out


class CharSeqVocab:
    """Characters <-> ids with the specials PAD = 0, SOS = 1, EOS = 2."""

    PAD, SOS, EOS = 0, 1, 2

    def __init__(self, texts):
        chars = sorted(set("".join(texts)))
        self.itos = ["<pad>", "<sos>", "<eos>"] + chars
        self.stoi = {c: i for i, c in enumerate(self.itos)}

    def __len__(self):
        return len(self.itos)

    def encode(self, s, eos=True):
        try:
            ids = [self.stoi[c] for c in s]
        except KeyError as e:
            raise ValueError(f"CharSeqVocab.encode: character {e.args[0]!r} is not in the vocabulary") from None
        return ids + [self.EOS] if eos else ids

    def decode(self, ids):
        out = []
        for i in ids:
            i = int(i)
            if i == self.EOS:
                break
            if i >= 3:
                out.append(self.itos[i])
        return "".join(out)

    def batch(self, strings, eos=True):
        """Padded int64 array (B, L_max) and lengths (B,)."""
        seqs = [self.encode(s, eos) for s in strings]
        lengths = np.array([len(s) for s in seqs], dtype=np.int64)
        out = np.full((len(seqs), int(lengths.max())), self.PAD, dtype=np.int64)
        for i, s in enumerate(seqs):
            out[i, :len(s)] = s
        return out, lengths

"""Source coding: Huffman codes, the exact interval picture of arithmetic coding (seed 003
§2.5.2, Example 2.5.4), and a streaming integer arithmetic coder.

The streaming coder is the classic integer range coder with carry-free "pending bit"
(underflow) handling: the current interval [low, high] lives in ``precision``-bit integers
(32 by default, 64 also works; Python integers make any width exact), and every symbol
narrows it in proportion to integer frequencies supplied by a model.  Whenever the
interval's leading bit is settled it is written out; when the interval straddles the
midpoint but has shrunk inside the middle half, the decision is deferred (a pending bit)
and the interval is doubled about the midpoint.  Encoder and decoder run the same integer
arithmetic, so decoding is exact.  The code length of a message is within 2 bits (plus
the rounding loss of the integer frequencies) of the ideal -sum log2 P(x_i) (003 Lemma
2.5.5).
"""
from __future__ import annotations

import heapq
import math
from fractions import Fraction

import numpy as np

__all__ = ["huffman_code", "expected_length", "is_prefix_free", "interval_of", "shortest_binary_inside",
           "arithmetic_code_table", "BitWriter", "BitReader", "ArithmeticEncoder", "ArithmeticDecoder",
           "encode_symbols", "decode_symbols"]


# ----------------------------------------------------------------------------- Huffman
def huffman_code(probs):
    """A binary Huffman code for a distribution given as a dict {symbol: p} or a sequence
    (symbols 0..K-1).  Returns {symbol: "0101..."}; a one-symbol alphabet gets the empty
    word "" (a certain outcome needs no bits: L = H = 0).

    Its expected length L satisfies H <= L < H + 1 (003 §2.5.1, source coding), tested on
    random distributions.  Ties are broken by insertion order, so the code is deterministic."""
    items = list(probs.items()) if isinstance(probs, dict) else list(enumerate(probs))
    if not items:
        raise ValueError("probs: expected at least one symbol, got an empty distribution")
    for s, p in items:
        if not (p >= 0 and math.isfinite(p)):
            raise ValueError(f"probs: expected non-negative finite probabilities, got {p!r} for {s!r}")
    if len(items) == 1:
        return {items[0][0]: ""}
    heap = [(float(p), i, [s]) for i, (s, p) in enumerate(items)]
    heapq.heapify(heap)
    code = {s: "" for s, _ in items}
    counter = len(heap)
    while len(heap) > 1:
        p0, _, g0 = heapq.heappop(heap)
        p1, _, g1 = heapq.heappop(heap)
        for s in g0:
            code[s] = "0" + code[s]
        for s in g1:
            code[s] = "1" + code[s]
        heapq.heappush(heap, (p0 + p1, counter, g0 + g1))
        counter += 1
    return code


def expected_length(code, probs):
    """sum_s P(s) len(code[s]) in bits."""
    items = probs.items() if isinstance(probs, dict) else enumerate(probs)
    return float(sum(p * len(code[s]) for s, p in items))


def is_prefix_free(words):
    """True if no code word is a prefix of another (so the code decodes uniquely)."""
    ws = sorted(words)
    return all(not b.startswith(a) for a, b in zip(ws, ws[1:]))


# ----------------------------------------------------------------------------- exact intervals
def interval_of(outcome, probs):
    """The interval I_x of 003 §2.5.2 for a sequence ``outcome`` of i.i.d. symbols with
    ``probs`` ({symbol: p}, subdivided in dict order, left to right), computed exactly with
    fractions.  Returns (lo, hi) as Fractions; |I_x| = P(X = x)."""
    order = list(probs)
    fr = {s: Fraction(str(probs[s])) if not isinstance(probs[s], Fraction) else probs[s] for s in order}
    if sum(fr.values()) != 1:
        raise ValueError(f"probs: expected probabilities summing to 1, got {sum(fr.values())}")
    lo, width = Fraction(0), Fraction(1)
    for sym in outcome:
        if sym not in fr:
            raise ValueError(f"outcome: symbol {sym!r} is not in probs {order}")
        before = sum((fr[s] for s in order[:order.index(sym)]), Fraction(0))
        lo += width * before
        width *= fr[sym]
    return lo, lo + width


def shortest_binary_inside(lo, hi):
    """The shortest binary fraction .b1b2...bn (n >= 1) lying strictly inside (lo, hi).
    Returns the bit string "b1...bn"."""
    lo, hi = Fraction(lo), Fraction(hi)
    if not (0 <= lo < hi <= 1):
        raise ValueError(f"(lo, hi): expected 0 <= lo < hi <= 1, got ({lo}, {hi})")
    n = 1
    while True:
        k = math.floor(lo * 2 ** n) + 1
        if Fraction(k, 2 ** n) < hi:
            return format(k, "b").zfill(n)
        n += 1


def arithmetic_code_table(probs, n):
    """Every length-n outcome with its interval, its shortest strictly-inside binary code and
    probability (003 Example 2.5.4 with probs={"T": 0.8, "H": 0.2}, n=2 gives TT -> "1",
    TH -> "11", HT -> "111", HH -> "11111", expected length 1.64 bits).

    As the inventory notes, these code words are not prefix-free, so the table illustrates
    interval lengths, not a decodable stream; the streaming coder below is decodable."""
    import itertools
    rows = []
    for out in itertools.product(list(probs), repeat=n):
        lo, hi = interval_of(out, probs)
        rows.append({"outcome": "".join(map(str, out)), "interval": (lo, hi), "prob": hi - lo,
                     "code": shortest_binary_inside(lo, hi)})
    return rows


# ----------------------------------------------------------------------------- bit streams
class BitWriter:
    """Packs bits MSB-first into bytes."""

    __slots__ = ("_out", "_acc", "_n", "nbits")

    def __init__(self):
        self._out = bytearray()
        self._acc = 0
        self._n = 0
        self.nbits = 0

    def write(self, bit):
        self._acc = (self._acc << 1) | bit
        self._n += 1
        self.nbits += 1
        if self._n == 8:
            self._out.append(self._acc)
            self._acc = 0
            self._n = 0

    def getvalue(self):
        """The bytes written so far, the last byte padded with zeros."""
        if self._n:
            return bytes(self._out) + bytes([self._acc << (8 - self._n)])
        return bytes(self._out)


class BitReader:
    """Reads bits MSB-first; past the end it returns zeros (the encoder's padding)."""

    __slots__ = ("_data", "_pos", "_nbits")

    def __init__(self, data):
        self._data = bytes(data)
        self._pos = 0
        self._nbits = 8 * len(self._data)

    @property
    def position(self):
        """Bits read so far (past the end too)."""
        return self._pos

    def read(self):
        p = self._pos
        self._pos = p + 1
        if p >= self._nbits:
            return 0
        return (self._data[p >> 3] >> (7 - (p & 7))) & 1


# ----------------------------------------------------------------------------- arithmetic coder
def _check_precision(precision):
    if not isinstance(precision, int) or not 16 <= precision <= 64:
        raise ValueError(f"precision: expected an integer number of bits in [16, 64], got {precision!r}")


class ArithmeticEncoder:
    """Streaming integer arithmetic encoder.

    ``encode(cum_low, cum_high, total)`` narrows the interval to the symbol whose
    cumulative frequency range is [cum_low, cum_high) out of ``total``.  ``total`` may be at
    most 2**(precision - 2) and every coded symbol needs cum_high > cum_low (frequency >= 1).
    ``finish()`` flushes and returns the bytes."""

    def __init__(self, precision=32, writer=None):
        _check_precision(precision)
        self.precision = precision
        self.full = (1 << precision) - 1
        self.half = 1 << (precision - 1)
        self.quarter = 1 << (precision - 2)
        self.max_total = self.quarter
        self.low = 0
        self.high = self.full
        self.pending = 0
        self.out = writer if writer is not None else BitWriter()
        self._done = False

    def _emit(self, bit):
        w = self.out.write
        w(bit)
        nb = 1 - bit
        for _ in range(self.pending):
            w(nb)
        self.pending = 0

    def encode(self, cum_low, cum_high, total):
        if self._done:
            raise RuntimeError("encode: the encoder is finished")
        if not (0 <= cum_low < cum_high <= total <= self.max_total):
            raise ValueError(f"encode: expected 0 <= cum_low < cum_high <= total <= 2**{self.precision - 2}, "
                             f"got cum_low={cum_low}, cum_high={cum_high}, total={total}")
        low, high = self.low, self.high
        rng = high - low + 1
        high = low + rng * cum_high // total - 1
        low = low + rng * cum_low // total
        half, quarter, full = self.half, self.quarter, self.full
        while True:
            if high < half:
                self._emit(0)
            elif low >= half:
                self._emit(1)
                low -= half
                high -= half
            elif low >= quarter and high < half + quarter:
                self.pending += 1
                low -= quarter
                high -= quarter
            else:
                break
            low = low << 1
            high = (high << 1) | 1
        self.low, self.high = low, high

    def finish(self):
        """Write enough bits to pin a number inside the final interval; return the bytes."""
        if not self._done:
            self.pending += 1
            self._emit(0 if self.low < self.quarter else 1)
            self._done = True
        return self.out.getvalue()


class ArithmeticDecoder:
    """The inverse of :class:`ArithmeticEncoder`: ``target(total)`` gives the cumulative
    frequency the next symbol covers; after looking the symbol up, call
    ``consume(cum_low, cum_high, total)`` with its range."""

    def __init__(self, data, precision=32):
        _check_precision(precision)
        self.precision = precision
        self.full = (1 << precision) - 1
        self.half = 1 << (precision - 1)
        self.quarter = 1 << (precision - 2)
        self.low = 0
        self.high = self.full
        self.inp = BitReader(data)
        v = 0
        for _ in range(precision):
            v = (v << 1) | self.inp.read()
        self.value = v

    def target(self, total):
        rng = self.high - self.low + 1
        return ((self.value - self.low + 1) * total - 1) // rng

    def consume(self, cum_low, cum_high, total):
        low, high, value = self.low, self.high, self.value
        rng = high - low + 1
        high = low + rng * cum_high // total - 1
        low = low + rng * cum_low // total
        half, quarter = self.half, self.quarter
        read = self.inp.read
        while True:
            if high < half:
                pass
            elif low >= half:
                low -= half
                high -= half
                value -= half
            elif low >= quarter and high < half + quarter:
                low -= quarter
                high -= quarter
                value -= quarter
            else:
                break
            low = low << 1
            high = (high << 1) | 1
            value = (value << 1) | read()
        self.low, self.high, self.value = low, high, value


def _cum(freqs):
    f = np.asarray(freqs)
    if f.ndim != 1 or f.size == 0 or f.dtype.kind not in "iu":
        raise ValueError(f"freqs: expected a 1-D array of integer frequencies, got dtype {f.dtype}, shape {f.shape}")
    if f.min() < 0:
        raise ValueError("freqs: expected non-negative integer frequencies")
    c = np.concatenate([[0], np.cumsum(f, dtype=np.int64)])
    return c


def encode_symbols(symbols, freqs_fn, precision=32):
    """Encode a sequence of integer symbols.  ``freqs_fn(i, history)`` returns the integer
    frequency table for position i given the symbols before it (a list); it must be
    deterministic so the decoder can rebuild it."""
    enc = ArithmeticEncoder(precision)
    hist = []
    for i, s in enumerate(symbols):
        c = _cum(freqs_fn(i, hist))
        s = int(s)
        if not 0 <= s < len(c) - 1:
            raise ValueError(f"symbols: symbol {s} at position {i} is outside the alphabet 0..{len(c) - 2}")
        if c[s + 1] == c[s]:
            raise ValueError(f"freqs_fn: symbol {s} at position {i} has frequency 0 and cannot be coded")
        enc.encode(int(c[s]), int(c[s + 1]), int(c[-1]))
        hist.append(s)
    return enc.finish()


def decode_symbols(data, n, freqs_fn, precision=32):
    """Decode ``n`` symbols written by :func:`encode_symbols` with the same ``freqs_fn``."""
    dec = ArithmeticDecoder(data, precision)
    hist = []
    for i in range(n):
        c = _cum(freqs_fn(i, hist))
        total = int(c[-1])
        t = dec.target(total)
        s = int(np.searchsorted(c, t, side="right")) - 1
        dec.consume(int(c[s]), int(c[s + 1]), total)
        hist.append(s)
    return hist

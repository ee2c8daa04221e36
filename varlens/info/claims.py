"""The checkable claims of seed 003 §2 (and the cross-entropy claims of §3.3) as runnable
checks, numbered as in the inventory (notes-inventory-part1-background.md §14.5-14.6).

``CLAIMS`` is a list of (id, description, function).  Each function takes ``seed`` (int)
and returns a dict with ``ok`` (bool), ``measured``, ``expected`` and ``detail``.  Where the
notes print a wrong value, ``expected`` is the corrected one and the description says so.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from scipy import stats

from varlens.info import coding, continuous
import importlib

E = importlib.import_module("varlens.info.entropy")   # the module (the package re-exports the function entropy)

LOG2_365 = math.log2(365)              # -log2(1/365) = 8.5118 (inventory item 45)
LOG2_365_364 = math.log2(365 / 364)     # -log2(364/365) = 0.003958


def _res(ok, measured, expected, detail=""):
    return {"ok": bool(ok), "measured": measured, "expected": expected, "detail": detail}


def _rand_dist(rng, k, zeros=False):
    p = rng.dirichlet(np.full(k, 0.7))
    if zeros and k > 2:
        p[rng.integers(0, k)] = 0.0
        p /= p.sum()
    return p


def c45(seed=0):
    m = (E.information(1 / 365), E.information(364 / 365))
    ok = (abs(m[0] - LOG2_365) < 1e-9 and abs(m[1] - LOG2_365_364) < 1e-12 and min(m) >= 0
          and round(m[0], 4) == 8.5118 and round(m[1], 6) == 0.003958)
    return _res(ok, m, (LOG2_365, LOG2_365_364), "birthday: same day vs different day, bits")


def c46(seed=0):
    rows = [(n, E.entropy(np.full(n, 1 / n)), E.perplexity(np.full(n, 1 / n))) for n in (1, 2, 7, 26, 1000)]
    ok = all(abs(h - math.log2(n)) < 1e-9 and abs(pp - n) < 1e-6 * n for n, h, pp in rows)
    return _res(ok, rows, "H = log2 n, perplexity = n")


def c47(seed=0):
    from varlens.info.compress import default_corpus
    h26 = E.entropy(np.full(26, 1 / 26))
    text = default_corpus()[0].decode("utf-8").lower()
    letters = np.frombuffer("".join(c for c in text if "a" <= c <= "z").encode(), dtype=np.uint8)
    h_en = E.entropy_from_samples(letters)
    ok = abs(h26 - 4.7004397) < 1e-6 and abs(h_en - 4.11) < 0.1
    return _res(ok, (h26, h_en), (4.7004397, 4.11),
                "log2 26; letter entropy of the English corpus (data-dependent, within 0.1 bit)")


def c48(seed=0):
    ps = np.linspace(0, 1, 101)
    h = E.binary_entropy(ps)
    ok = (abs(E.binary_entropy(0.5) - 1) < 1e-12 and abs(E.binary_entropy(0.8) - 0.7219281) < 1e-7
          and h[0] == 0 and h[-1] == 0 and np.allclose(h, h[::-1]) and h[1] < 0.09 and int(np.argmax(h)) == 50)
    return _res(ok, (E.binary_entropy(0.5), E.binary_entropy(0.8)), (1.0, 0.7219281))


def c49(seed=0):
    rng = np.random.default_rng(seed)
    errs = []
    for _ in range(20):
        px, py = _rand_dist(rng, 5), _rand_dist(rng, 4)
        errs.append(E.joint_entropy(np.outer(px, py)) - E.entropy(px) - E.entropy(py))
    return _res(max(map(abs, errs)) < 1e-12, max(map(abs, errs)), 0.0, "H(X,Y) - H(X) - H(Y), independent")


def c50(seed=0):
    rng = np.random.default_rng(seed)
    p = _rand_dist(rng, 9)
    pp = E.perplexity(p)
    ok = abs(pp - 2 ** E.entropy(p, 2)) < 1e-9 and abs(pp - math.exp(E.entropy(p, "e"))) < 1e-9
    return _res(ok, pp, 2 ** E.entropy(p, 2), "perplexity = 2**H_bits = e**H_nats")


def c51(seed=0):
    h = E.entropy([0.5, 0.25, 0.25])
    dec = E.binary_entropy(0.5) + 0.5 * E.entropy([0.5, 0.5])
    return _res(abs(h - 1.5) < 1e-12 and abs(dec - 1.5) < 1e-12, (h, dec), 1.5, "Example 2.3.1")


def c52(seed=0):
    rng = np.random.default_rng(seed)
    worst = 0.0
    for k in (2, 3, 5, 10):
        for _ in range(10):
            p = _rand_dist(rng, k)
            rhs = E.binary_entropy(p[0]) + (1 - p[0]) * E.entropy(p[1:] / (1 - p[0]))
            worst = max(worst, abs(E.entropy(p) - rhs))
    return _res(worst < 1e-12, worst, 0.0, "grouping identity (2.3.1)")


def c53(seed=0):
    worst = 0.0
    for r in (2, 3, 5):
        for n in (1, 2, 3):
            worst = max(worst, abs(E.entropy(np.full(r ** n, 1.0 / r ** n)) - n * E.entropy(np.full(r, 1.0 / r))))
        worst = max(worst, abs(E.entropy(np.full(r, 1.0 / r)) - math.log2(r)))
    a = np.array([3, 1, 4, 1, 5, 9, 2, 6])
    N = a.sum()
    rational = math.log2(N) - np.sum(a / N * np.log2(a))
    worst = max(worst, abs(E.entropy(a / N) - rational))
    return _res(worst < 1e-12, worst, 0.0, "H_{r^n} = n H_r, H_r = log2 r, rational identity")


def c54(seed=0):
    rng = np.random.default_rng(seed)
    px, py = _rand_dist(rng, 6), _rand_dist(rng, 3)
    d = E.conditional_entropy(np.outer(px, py)) - E.entropy(px)
    return _res(abs(d) < 1e-12, d, 0.0, "H(X|Y) = H(X) for independent X, Y")


def c55(seed=0):
    rng = np.random.default_rng(seed)
    worst = 0.0
    for _ in range(20):
        pxy = rng.dirichlet(np.full(12, 0.5)).reshape(4, 3)
        worst = max(worst, abs(E.joint_entropy(pxy) - E.entropy(pxy.sum(0)) - E.conditional_entropy(pxy)))
    return _res(worst < 1e-12, worst, 0.0, "chain rule H(X,Y) = H(Y) + H(X|Y)")


def c56(seed=0):
    rng = np.random.default_rng(seed)
    worst, minimum = 0.0, math.inf
    for _ in range(20):
        pxy = rng.dirichlet(np.full(20, 0.4)).reshape(5, 4)
        vals = [E.mutual_information(pxy, method=m) for m in ("conditional", "joint", "kl")]
        vals.append(E.mutual_information(pxy.T))
        worst = max(worst, max(vals) - min(vals))
        minimum = min(minimum, min(vals))
    prod = E.mutual_information(np.outer(_rand_dist(rng, 5), _rand_dist(rng, 4)))
    ok = worst < 1e-12 and minimum >= 0 and abs(prod) < 1e-12
    return _res(ok, (worst, minimum, prod), (0.0, ">= 0", 0.0),
                "three MI formulas agree, symmetric, non-negative, 0 for product tables")


def c57(seed=0):
    rng = np.random.default_rng(seed)
    kls = []
    for _ in range(50):
        p, q = _rand_dist(rng, 6, zeros=True), _rand_dist(rng, 6)
        kls.append(E.kl_divergence(p, q))
    p = np.array([0.5, 0.5, 0.0])
    q = np.array([0.25, 0.25, 0.5])
    asym = (E.kl_divergence(p, q), E.kl_divergence(q, p))
    ok = (min(kls) > 0 and E.kl_divergence(q, q) == 0 and asym[0] == 1.0 and asym[1] == math.inf
          and E.kl_divergence([1.0, 0.0], [0.5, 0.5]) == 1.0)
    return _res(ok, (min(kls), asym), (">0", (1.0, math.inf)),
                "Gibbs; KL(P||P)=0; P(w)=0 terms dropped; inf on support mismatch; asymmetric")


def c58(seed=0):
    import itertools
    out = []
    for p in (0.5, 0.8, 0.1):
        for n in (1, 2, 3, 5):
            probs = [math.prod(p if b else 1 - p for b in bits) for bits in itertools.product((0, 1), repeat=n)]
            out.append(abs(E.entropy(probs) - n * E.binary_entropy(p)))
    ok = max(out) < 1e-12 and abs(E.entropy(np.full(2 ** 4, 1 / 16)) - 4) < 1e-12
    return _res(ok, max(out), 0.0, "H(n flips) = n H(p); p = 1/2 gives n bits")


def c59(seed=0):
    rng = np.random.default_rng(seed)
    ok = True
    worst = []
    for _ in range(100):
        k = int(rng.integers(2, 40))
        p = rng.dirichlet(np.full(k, float(rng.choice([0.1, 0.5, 2.0]))))
        code = coding.huffman_code(p)
        L, H = coding.expected_length(code, p), E.entropy(p)
        ok &= H - 1e-12 <= L < H + 1 and coding.is_prefix_free(list(code.values()))
        worst.append(L - H)
    two = {"TT": 0.64, "TH": 0.16, "HT": 0.16, "HH": 0.04}
    L2 = coding.expected_length(coding.huffman_code(two), two)
    ok &= abs(L2 - 1.56) < 1e-12 and abs(E.entropy(list(two.values())) - 1.4438562) < 1e-7
    return _res(ok, (min(worst), max(worst), L2), ("[0, 1)", 1.56), "Huffman L - H on 100 random distributions")


def c60(seed=0):
    from varlens.info.compress import default_corpus
    text = default_corpus()[0].decode("utf-8").lower()
    letters = [c for c in text if "a" <= c <= "z"]
    pu = letters.count("u") / len(letters)
    after_q = [text[i + 1] for i in range(len(text) - 1) if text[i] == "q" and "a" <= text[i + 1] <= "z"]
    puq = after_q.count("u") / len(after_q)
    return _res(abs(pu - 0.028) < 0.005 and puq > 0.95, (pu, puq), (0.028, 1.0),
                "English corpus (data-dependent): P(u), P(u | previous letter q)")


_TWO_FLIPS = {"T": Fraction(4, 5), "H": Fraction(1, 5)}


def c61(seed=0):
    got = {o: coding.interval_of(o, _TWO_FLIPS) for o in ("T", "H", "TT", "TH", "HT", "HH")}
    F = Fraction
    exp = {"T": (F(0), F(4, 5)), "H": (F(4, 5), F(1)), "TT": (F(0), F(16, 25)), "TH": (F(16, 25), F(4, 5)),
           "HT": (F(4, 5), F(24, 25)), "HH": (F(24, 25), F(1))}
    return _res(got == exp, {k: tuple(map(float, v)) for k, v in got.items()},
                {k: tuple(map(float, v)) for k, v in exp.items()}, "Example 2.5.4 intervals")


def _bits(x, n):
    x = Fraction(x)
    out = ""
    for _ in range(n):
        x *= 2
        out += "1" if x >= 1 else "0"
        x -= int(x)
    return out


def c62(seed=0):
    got = (_bits(Fraction(16, 25), 12), _bits(Fraction(4, 5), 12), _bits(Fraction(24, 25), 12))
    ok = got[0].startswith("10") and got[1].startswith("110") and got[2].startswith("11110")
    return _res(ok, got, ("10...", "110...", "11110..."), "binary expansions of 0.64, 0.8, 0.96")


def c63(seed=0):
    rows = coding.arithmetic_code_table(_TWO_FLIPS, 2)
    got = {r["outcome"]: r["code"] for r in rows}
    inside = all(r["interval"][0] < Fraction(int(r["code"], 2), 2 ** len(r["code"])) < r["interval"][1] for r in rows)
    exp = {"TT": "1", "TH": "11", "HT": "111", "HH": "11111"}
    return _res(got == exp and inside, got, exp, "shortest binary fraction strictly inside each interval")


def c64(seed=0):
    rows = coding.arithmetic_code_table(_TWO_FLIPS, 2)
    L = sum(r["prob"] * len(r["code"]) for r in rows)
    return _res(L == Fraction(41, 25), float(L), 1.64, "expected length (naive code: 2 bits)")


def c65(seed=0):
    rng = np.random.default_rng(seed)
    ok = True
    for _ in range(300):
        a, b = sorted(rng.random(2))
        if b - a < 1e-9:
            continue
        lo, hi = Fraction(a), Fraction(b)
        code = coding.shortest_binary_inside(lo, hi)
        ok &= len(code) <= 1 + math.ceil(math.log2(1 / (b - a)))
    rows = coding.arithmetic_code_table(_TWO_FLIPS, 2)
    L = float(sum(r["prob"] * len(r["code"]) for r in rows))
    H = E.entropy([float(r["prob"]) for r in rows])
    ok &= L <= H + 2
    return _res(ok, (L, H + 2), "L <= H + 2", "Lemma 2.5.5 on 300 random intervals and the two-flip code")


def c66(seed=0):
    """The streaming coder's output length is the model's total surprisal plus at most a few
    bits, and Delta(code length) recovers the model's probabilities on average."""
    rng = np.random.default_rng(seed)
    p = np.array([0.8, 0.2])
    freqs = np.array([4, 1], dtype=np.int64)
    x = (rng.random(4000) < 0.2).astype(np.int64)
    data = coding.encode_symbols(x, lambda i, h: freqs)
    back = coding.decode_symbols(data, len(x), lambda i, h: freqs)
    ideal = float(-np.log2(p[x]).sum())
    bits = 8 * len(data)
    ok = back == list(x) and ideal - 1 <= bits <= ideal + 2 + 8
    return _res(ok, bits, ideal, "arithmetic code length vs -sum log2 P(x_i) (+2 bits, +7 bits byte padding)")


def c67(seed=0):
    out = []
    for N in (2, 5, 8, 100, 1000, 1024):
        code = coding.huffman_code(np.full(N, 1.0 / N))
        L = coding.expected_length(code, np.full(N, 1.0 / N))
        out.append((N, L, math.ceil(math.log2(N))))
    ok = all(math.log2(N) - 1e-9 <= L <= c for N, L, c in out)
    return _res(ok, out, "log2 N <= L <= ceil(log2 N)", "uniform integer in [1, N]")


# ---------------------------------------------------------------- §3.3 cross-entropy claims
def c78(seed=0):
    rng = np.random.default_rng(seed)
    vals = []
    for _ in range(30):
        p, q = _rand_dist(rng, 5), _rand_dist(rng, 5)
        vals.append((E.cross_entropy(p, q), E.cross_entropy(q, p)))
    ok = min(min(v) for v in vals) >= 0 and max(abs(a - b) for a, b in vals) > 0.01
    return _res(ok, vals[0], "H(p,q) >= 0, H(p,q) != H(q,p)")


def c79(seed=0):
    rng = np.random.default_rng(seed)
    p = _rand_dist(rng, 6)
    best = E.cross_entropy(p, p)
    others = [E.cross_entropy(p, _rand_dist(rng, 6)) for _ in range(200)]
    counts = np.array([3, 1, 4, 1, 5, 9])
    pe = counts / counts.sum()
    loglik = lambda q: float(np.sum(counts * np.log(q)))  # noqa: E731
    qs = [_rand_dist(rng, 6) for _ in range(200)]
    ok = best <= min(others) and abs(best - E.entropy(p)) < 1e-12 and all(loglik(pe) >= loglik(q) for q in qs)
    return _res(ok, best, E.entropy(p), "argmin_q H(p, q) = p = argmax_q prod q_i^{N p_i}")


def c80(seed=0):
    q = np.array([0.1, 0.7, 0.2])
    onehot = np.array([0.0, 1.0, 0.0])
    a = E.cross_entropy(onehot, q, "e")
    b = E.cross_entropy(q, onehot, "e")
    return _res(abs(a + math.log(0.7)) < 1e-12 and b == math.inf, (a, b), (-math.log(0.7), math.inf))


def c81(seed=0):
    got = [stats.t(nu).var() for nu in (2.1, 2.5, 8)]
    ok = np.allclose(got, [21, 5, 4 / 3], rtol=1e-12) and stats.t(2.5).mean() == 0
    return _res(ok, got, [21, 5, 4 / 3], "Student t variance nu/(nu-2), mean 0")


# corrected values of 003 Example 3.3.10 (nats); the notes' 2.5738 / 2.0782 / 1.5625 are wrong
T_TABLE = {
    "82": (2.1, "H(t,N)", 2.9412, 2.6540, 2.5738),
    "83": (2.1, "H(N,t)", 3.7260, 3.7260, 3.726),
    "84": (2.5, "H(t,N)", 2.2237, 2.1915, 2.0782),
    "85": (2.5, "H(N,t)", 2.4343, 2.4343, 2.4343),
    "86": (8.0, "H(t,N)", 1.5628, 1.5628, 1.5625),
}


def _t_claim(cid):
    def check(seed=0):
        nu, key, full, trunc, printed = T_TABLE[cid]
        row = continuous.student_t_table(nus=(nu,))[0]
        m = (row[key], row[key + " truncated"])
        ok = abs(m[0] - full) < 5e-5 and abs(m[1] - trunc) < 5e-5
        return _res(ok, m, (full, trunc), f"nats; the notes print {printed}"
                    + ("" if abs(printed - full) < 5e-5 else " (wrong)"))
    return check


def c87(seed=0):
    t1, n = stats.t(1), stats.norm(0, 1)
    a = continuous.cross_entropy(t1, n, "e")
    b = continuous.cross_entropy(n, t1, "e")
    return _res(a == math.inf and abs(b - 1.6782) < 5e-5, (a, b), (math.inf, 1.6782), "nats")


def c88(seed=0):
    xs = np.array([1e3, 1e4, 1e5])
    ok = True
    slopes = []
    for nu in (1.0, 2.5, 8.0):
        lp = stats.t(nu).logpdf(xs)
        slope = np.diff(lp) / np.diff(np.log(xs))
        slopes.append(slope.tolist())
        ok &= np.allclose(slope, -(nu + 1), atol=1e-3)
    n = stats.norm(0, 1)
    growth = [continuous.cross_entropy(stats.t(2.0), n, "e", limits=(-L, L)) for L in (10, 100, 1000)]
    ok &= continuous.cross_entropy(stats.t(2.0), n, "e") == math.inf and growth[0] < growth[1] < growth[2]
    return _res(ok, slopes, "-(nu+1)", "t tails decay like x^-(nu+1); H(t_nu, N) diverges for nu <= 2")


def c89(seed=0):
    rng = np.random.default_rng(seed)
    worst = 0.0
    for _ in range(30):
        p, q = _rand_dist(rng, 7), _rand_dist(rng, 7)
        worst = max(worst, abs(E.kl_divergence(p, q) - (E.cross_entropy(p, q) - E.entropy(p))))
    # gradients in q agree: along any direction v keeping q normalised, the directional
    # derivatives of KL(p, .) and H(p, .) coincide (their difference -H(p) is constant in q)
    p, q = _rand_dist(rng, 5), _rand_dist(rng, 5) * 0.9 + 0.02
    q /= q.sum()
    h = 1e-5
    for i, j in [(0, 1), (2, 4), (3, 0)]:
        v = np.zeros(5)
        v[i], v[j] = 1.0, -1.0
        dk = (E.kl_divergence(p, q + h * v, "e") - E.kl_divergence(p, q - h * v, "e")) / (2 * h)
        dc = (E.cross_entropy(p, q + h * v, "e") - E.cross_entropy(p, q - h * v, "e")) / (2 * h)
        worst = max(worst, abs(dk - dc) * 1e-3)
    return _res(worst < 1e-9, worst, 0.0, "KL = CE - H; same gradient in q")


CLAIMS = [
    ("003-45", "Shannon information -log2 P >= 0; birthday 8.5118 vs 0.003958 bits", c45),
    ("003-46", "uniform on n: entropy log2 n bits, perplexity n", c46),
    ("003-47", "log2 26 = 4.70; English letter entropy about 4.11 bits (corpus)", c47),
    ("003-48", "binary entropy: H(1/2) = 1 bit, H -> 0 at p = 0, 1, symmetric", c48),
    ("003-49", "independent X, Y: H(X,Y) = H(X) + H(Y)", c49),
    ("003-50", "perplexity = 2^H(X)", c50),
    ("003-51", "H(1/2, 1/4, 1/4) = 1.5 bits = 1 + 0.5 x 1", c51),
    ("003-52", "grouping identity (2.3.1) for any finite distribution", c52),
    ("003-53", "H_{r^n} = n H_r, H_r = log2 r, rational identity", c53),
    ("003-54", "independent X, Y: H(X|Y) = H(X)", c54),
    ("003-55", "chain rule H(X,Y) = H(Y) + H(X|Y)", c55),
    ("003-56", "mutual information: three formulas agree, symmetric, >= 0", c56),
    ("003-57", "Gibbs: KL >= 0, = 0 iff P = Q; asymmetric; 0 log 0 = 0; inf on support mismatch", c57),
    ("003-58", "n i.i.d. Bernoulli(p) flips: H = n H(p); p = 1/2 gives n bits", c58),
    ("003-59", "Huffman: H <= E[length] < H + 1 (two 0.8-flips: 1.4439 <= 1.56)", c59),
    ("003-60", "English: P(u) about 2.8%, P(u | q) about 100% (corpus)", c60),
    ("003-61", "arithmetic-coding intervals for two flips with P(T) = 0.8", c61),
    ("003-62", "binary expansions 0.64 = .10..., 0.8 = .110..., 0.96 = .11110...", c62),
    ("003-63", "codes TT .1, TH .11, HT .111, HH .11111 lie in their intervals", c63),
    ("003-64", "expected length 1.64 bits < 2 bits", c64),
    ("003-65", "arithmetic code length <= H + 2; interval holds a <= 1 + ceil(log 1/|I|)-bit number", c65),
    ("003-66", "code length of a model-driven arithmetic coder = cross-entropy (+2 bits)", c66),
    ("003-67", "uniform integer in [1, N] needs about log2 N (<= ceil) bits", c67),
    ("003-78", "discrete H(p,q) >= 0 and H(p,q) != H(q,p)", c78),
    ("003-79", "argmax_q prod q_i^{N p_i} = argmin_q H(p,q) = p", c79),
    ("003-80", "one-hot p: H(p,q) = -log q(y); H(q,p) = inf", c80),
    ("003-81", "Student t_nu variance nu/(nu-2): 21, 5, 4/3", c81),
    ("003-82", "H(t2.1, N(0,21)) = 2.9412 nats (2.6540 on [-500,500]); notes' 2.5738 is wrong", _t_claim("82")),
    ("003-83", "H(N(0,21), t2.1) = 3.7260 nats", _t_claim("83")),
    ("003-84", "H(t2.5, N(0,5)) = 2.2237 nats (2.1915 on [-500,500]); notes' 2.0782 is wrong", _t_claim("84")),
    ("003-85", "H(N(0,5), t2.5) = 2.4343 nats", _t_claim("85")),
    ("003-86", "H(t8, N(0,4/3)) = 1.5628 nats; notes' 1.5625 is wrong at 4 d.p.", _t_claim("86")),
    ("003-87", "H(t1, N(0,1)) = inf, H(N(0,1), t1) = 1.6782 nats", c87),
    ("003-88", "t_nu density decays like x^-(nu+1); H(t_nu, N) diverges for nu <= 2", c88),
    ("003-89", "KL(p,q) = H(p,q) - H(p); same gradient in q", c89),
]

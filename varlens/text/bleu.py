"""BLEU (seed 003 §6.7): modified n-gram precision with a brevity penalty.

For a corpus of hypotheses c and references r (one or several per hypothesis):

* p_n = (sum over sentences of clipped n-gram matches) / (sum of hypothesis n-grams),
  where an n-gram's count is clipped at its largest count in any one reference;
* BP = 1 if the total hypothesis length exceeds the total (closest) reference length,
  else exp(1 - ref_len / hyp_len);
* BLEU = BP * exp(sum_n w_n log p_n), with w_n = 1/N (N = 4 by default).

The score lies in [0, 1]; the notes (and papers) quote it times 100.  Tokens can be
anything hashable; a str is a sequence of characters.  Without smoothing a zero
precision gives BLEU = 0; ``smooth=True`` adds one to the numerator and denominator
of every n >= 2 precision (Lin and Och's "+1" smoothing), useful for single short sentences.
"""
from __future__ import annotations

import math
from collections import Counter


def ngrams(tokens, n):
    """Counter of the n-grams (as tuples) of a token sequence."""
    toks = list(tokens)
    return Counter(tuple(toks[i:i + n]) for i in range(len(toks) - n + 1))


def _refs_of(ref):
    """A reference entry is one token sequence or a list/tuple of token sequences."""
    if isinstance(ref, (list, tuple)) and ref and all(isinstance(r, (list, tuple)) for r in ref):
        return [list(r) for r in ref]
    return [list(ref)]


def modified_precision(references, hypothesis, n):
    """(clipped matches, total hypothesis n-grams) for one sentence."""
    hyp = ngrams(hypothesis, n)
    maxref = Counter()
    for r in references:
        for g, c in ngrams(r, n).items():
            if c > maxref[g]:
                maxref[g] = c
    matches = sum(min(c, maxref[g]) for g, c in hyp.items())
    return matches, max(sum(hyp.values()), 0)


def _closest_ref_len(refs, hyp_len):
    return min((abs(len(r) - hyp_len), len(r)) for r in refs)[1]


def corpus_bleu(references, hypotheses, max_n=4, weights=None, smooth=False):
    """Corpus-level BLEU in [0, 1].  ``references[i]`` is one token sequence or a list of
    token sequences for ``hypotheses[i]``."""
    if len(references) != len(hypotheses):
        raise ValueError(f"corpus_bleu: references has {len(references)} entries but hypotheses has "
                         f"{len(hypotheses)}; they must match one to one")
    if not isinstance(max_n, int) or max_n < 1:
        raise ValueError(f"corpus_bleu: max_n must be a positive int, got {max_n!r}")
    weights = [1.0 / max_n] * max_n if weights is None else list(weights)
    if len(weights) != max_n:
        raise ValueError(f"corpus_bleu: weights must have max_n={max_n} entries, got {len(weights)}")
    num = [0] * max_n
    den = [0] * max_n
    hyp_len = ref_len = 0
    for ref, hyp in zip(references, hypotheses):
        refs = _refs_of(ref)
        hyp = list(hyp)
        hyp_len += len(hyp)
        ref_len += _closest_ref_len(refs, len(hyp))
        for n in range(1, max_n + 1):
            m, t = modified_precision(refs, hyp, n)
            num[n - 1] += m
            den[n - 1] += t
    if hyp_len == 0:
        return 0.0
    log_p = 0.0
    for n in range(max_n):
        a, b = num[n], den[n]
        if smooth and n > 0:
            a, b = a + 1, b + 1
        if a == 0 or b == 0:
            if weights[n] != 0:
                return 0.0
            continue
        log_p += weights[n] * math.log(a / b)
    bp = 1.0 if hyp_len > ref_len else math.exp(1.0 - ref_len / hyp_len)
    return bp * math.exp(log_p)


def sentence_bleu(references, hypothesis, max_n=4, weights=None, smooth=False):
    """BLEU of one hypothesis against its reference(s)."""
    return corpus_bleu([references], [hypothesis], max_n, weights, smooth)

"""Offline stand-ins for the datasets the public programs download (the only lines the programs
change): MNIST-like digit images, a small text corpus, images for DCGAN/super-resolution.
Uses NumPy only, so the data are identical whichever framework ``import torch`` is bound to."""
import numpy as np


def digits(n, seed=0, size=28, block=1):
    """n images (n, 1, size, size) in [0, 1] and labels 0..9: each class a fixed random blob
    pattern plus pixel noise, so a small net learns it in a few hundred steps.  ``block`` > 1
    makes the pattern of block x block squares (coarse shapes that survive small shifts)."""
    rng = np.random.default_rng(seed)
    protos = np.random.default_rng(1234).random((10, size // block, size // block)) > 0.7
    if block > 1:
        protos = np.kron(protos, np.ones((block, block), dtype=bool))
    y = rng.integers(0, 10, n)
    x = protos[y].astype(np.float32) * 0.5 + rng.random((n, size, size)).astype(np.float32) * 0.6
    return np.clip(x, 0, 1)[:, None].astype(np.float32), y.astype(np.int64)


def corpus(n_words=6000, seed=0):
    """A word corpus from a small first-order Markov chain over 40 words (lines of 12 words)."""
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(40)]
    trans = np.random.default_rng(99).dirichlet(np.full(40, 0.1), size=40)
    w, out = 0, []
    for i in range(n_words):
        w = rng.choice(40, p=trans[w])
        out.append(vocab[w])
    return "\n".join(" ".join(out[i:i + 12]) for i in range(0, len(out), 12))


def names(n=600, seed=0):
    """Made-up lowercase names (makemore's input file, one word per line)."""
    rng = np.random.default_rng(seed)
    syll = ["ka", "li", "mo", "ra", "ne", "so", "ta", "vi", "el", "an", "jo", "da"]
    return [''.join(rng.choice(syll, rng.integers(1, 4))) for _ in range(n)]


def images(n, size=16, channels=3, seed=0):
    """Smooth random colour images in [-1, 1] (n, channels, size, size)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size] / size
    f = rng.uniform(1, 3, (n, channels, 1, 1))
    ph = rng.uniform(0, 6.3, (n, channels, 1, 1))
    return np.sin(f * xx * 6 + ph) * np.cos(f * yy * 4 - ph).astype(np.float32)

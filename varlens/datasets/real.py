"""Real datasets, all offline: scikit-learn's bundled digits and diabetes data, and
Fashion-MNIST from Debian's ``dataset-fashion-mnist`` package."""
from __future__ import annotations

import os

import numpy as np

from varlens.datasets.idx import load_idx_dir

FASHION_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                   "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")

_FASHION_HINT = ("Fashion-MNIST is not installed. Get it with `make data` (downloads Debian's "
                 "dataset-fashion-mnist package and unpacks it, without root, into ./data/fashion-mnist), "
                 "or as root `apt-get install dataset-fashion-mnist` (files go to "
                 "/usr/share/datasets/fashion-mnist), or pass root=DIR holding the four IDX files.")


def load_digits():
    """scikit-learn's bundled handwritten digits: 1,797 8x8 images, pixel values 0..16.

    Returns ``(X float32 (1797, 64), y int64 (1797,))``; nothing is downloaded.
    """
    from sklearn.datasets import load_digits as _ld
    d = _ld()
    return d.data.astype(np.float32), d.target.astype(np.int64)


def load_diabetes(scaled=True):
    """scikit-learn's bundled diabetes regression data: 442 patients, 10 features.

    Returns ``(X float64 (442, 10), y float64 (442,))``.  ``scaled=True`` gives the
    mean-centred, unit-norm-column features scikit-learn ships.
    """
    from sklearn.datasets import load_diabetes as _ld
    d = _ld(scaled=scaled)
    return d.data.astype(np.float64), d.target.astype(np.float64)


def fashion_mnist_roots(root=None):
    """Directories searched for Fashion-MNIST, in order."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    cands = [root] if root is not None else []
    if os.environ.get("VARLENS_DATA"):
        cands.append(os.path.join(os.environ["VARLENS_DATA"], "fashion-mnist"))
    cands += [os.path.join("data", "fashion-mnist"), os.path.join(here, "data", "fashion-mnist"),
              "/usr/share/datasets/fashion-mnist"]
    return cands


def fashion_mnist(root=None, train=True):
    """Fashion-MNIST images ``uint8 (N, 28, 28)`` and labels ``int64 (N,)``.

    ``train=True`` gives the 60,000 training images, ``False`` the 10,000 test images.
    Looked for in ``root`` if given (only there), else $VARLENS_DATA/fashion-mnist,
    ./data/fashion-mnist, the repository's data/fashion-mnist and
    /usr/share/datasets/fashion-mnist.  A missing file says how to get it.
    """
    if not isinstance(train, (bool, int)) or isinstance(train, float):
        raise TypeError(f"fashion_mnist: train must be a bool (True: the 60,000 training images, False: the "
                        f"10,000 test images), got {train!r}")
    roots = [root] if root is not None else fashion_mnist_roots()
    stem = "train" if train else "t10k"
    for r in roots:
        if r and os.path.exists(os.path.join(r, f"{stem}-images-idx3-ubyte.gz")) or \
                r and os.path.exists(os.path.join(r, f"{stem}-images-idx3-ubyte")):
            return load_idx_dir(r, train=train, hint=_FASHION_HINT)
    raise FileNotFoundError(f"fashion_mnist: {stem}-images-idx3-ubyte.gz not found in any of "
                            f"{roots}. {_FASHION_HINT}")

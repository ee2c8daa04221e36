"""varlens.datasets: real and toy data, splits and standardisation, all offline.

- ``load_digits()``: scikit-learn's bundled 8x8 digits (the main job's data).
- ``fashion_mnist(root=None, train=True)``: Fashion-MNIST from Debian's package (``make data``).
- ``read_idx`` / ``load_idx_dir``: IDX (MNIST-format) files from any directory, gzip or raw.
- ``load_kjv()`` / ``CharVocab``: the King James Bible as text, and a char-level vocabulary.
- ``make_circle``, ``make_moons``, ``make_spirals``, ``make_gaussian_mixture``,
  ``make_ring_of_gaussians``: 2-D toy sets.
- ``load_diabetes()`` with ``least_squares`` and ``ridge``: regression and its closed forms.
- ``train_val_test_split`` (80/10/10) and ``Standardizer`` (z-score fitted on training data).
"""
from varlens.datasets.splits import Split, Standardizer, train_val_test_split  # noqa: F401
from varlens.datasets.idx import load_idx_dir, read_idx, write_idx  # noqa: F401
from varlens.datasets.real import (FASHION_CLASSES, fashion_mnist, load_diabetes,  # noqa: F401
                                   load_digits)
from varlens.datasets.text import CharVocab, load_kjv  # noqa: F401
from varlens.datasets.toy import (make_circle, make_gaussian_mixture, make_moons,  # noqa: F401
                                  make_ring_of_gaussians, make_spirals)
from varlens.datasets.regression import add_bias_column, least_squares, mse, ridge  # noqa: F401

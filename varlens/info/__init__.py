"""varlens.info: information theory of seed 003 §2 (entropy, mutual information, KL,
cross-entropy, source coding, arithmetic coding) and a language model as a compressor.

Submodules: ``entropy`` (discrete tables and samples), ``continuous`` (differential entropy,
continuous cross-entropy, the Student-t table), ``coding`` (Huffman, exact intervals, the
streaming arithmetic coder), ``models`` (next-byte models), ``compress`` (the file format,
``compress``/``decompress`` and the gzip/bz2/xz comparison), ``neural`` (the trained char-LSTM
as the coder's model: ``LSTMModel``, ``train_lstm``, ``kjv_split``; imported on use).  The package re-exports the
functions of ``entropy``; note that ``varlens.info.entropy`` is therefore the *function*
(use ``importlib.import_module("varlens.info.entropy")`` for the module), and
``varlens.info.compress`` is the module (its function is ``varlens.info.compress.compress``).

``CLAIMS`` lists (id, description, check) for the `varlens check` registry; ids follow the
inventory's numbering (``003-57`` is item 57 of notes-inventory-part1-background.md §14).
"""
from varlens.info.entropy import (binary_entropy, conditional_entropy, cross_entropy,
                                  cross_entropy_from_samples, empirical_distribution, entropy,
                                  entropy_from_samples, information, joint_entropy, kl_divergence,
                                  marginals, mutual_information, mutual_information_from_samples,
                                  perplexity)
from varlens.info import continuous
from varlens.info.coding import (ArithmeticDecoder, ArithmeticEncoder, arithmetic_code_table,
                                 decode_symbols, encode_symbols, expected_length, huffman_code,
                                 interval_of, is_prefix_free, shortest_binary_inside)
from varlens.info.models import (AdaptiveOrder0Model, MixtureModel, Model, PPMModel, ProbabilityModel,
                                 StaticModel, UniformModel, quantize)
from varlens.info import compress  # the module
from varlens.info.compress import compare_compressors, model_code_length
from varlens.info.claims import CLAIMS

"""Embedding and EmbeddingBag: lookup tables of rows, trained by gradients that accumulate over
repeated indices.
"""
from __future__ import annotations

from varlens.core import dtypes as DT
from varlens.core.array import xp
from varlens.core.tensor import Tensor
from varlens.nn import functional as F
from varlens.nn import init
from varlens.nn.functional._errors import ArgAssertionError
from varlens.nn.module import Module
from varlens.nn.parameter import Parameter
from varlens.nn._device import _check_device


def _check_sizes(num_embeddings, embedding_dim, what):
    """Non-negative int sizes; PyTorch's RuntimeError for a negative one, naming the argument."""
    for name, v in (("num_embeddings", num_embeddings), ("embedding_dim", embedding_dim)):
        if isinstance(v, bool) or not hasattr(v, "__index__"):
            raise TypeError(f"{what}: {name} must be an int, got {v!r} ({type(v).__name__})")
        if v < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {int(v)}: "
                               f"[{int(num_embeddings)}, {int(embedding_dim)}] ({what}: {name} must be >= 0, "
                               f"got {int(v)})")


def _check_padding_idx(padding_idx, num_embeddings, what):
    """padding_idx in [-num_embeddings, num_embeddings), made non-negative (None stays None)."""
    if padding_idx is not None:
        if not -num_embeddings <= padding_idx < num_embeddings:
            raise ArgAssertionError(f"Padding_idx must be within num_embeddings ({what}: padding_idx {padding_idx} "
                                    f"must be within num_embeddings ({num_embeddings}))")
        if padding_idx < 0:
            padding_idx += num_embeddings
    return padding_idx


def _init_table(module, _weight, dtype, requires_grad, what):
    """Set ``module.weight`` (num_embeddings, embedding_dim): a fresh table initialised by
    ``module.reset_parameters()``, or the given ``_weight`` after a shape check."""
    shape = (module.num_embeddings, module.embedding_dim)
    if _weight is None:
        dt = DT.to_dtype(dtype) or DT.get_default_dtype()
        module.weight = Parameter(xp.empty(shape, dtype=dt), requires_grad=requires_grad)
        module.reset_parameters()
    else:
        arr = _weight._data if isinstance(_weight, Tensor) else xp.asarray(_weight)
        if arr.shape != shape:
            raise ValueError(f"{what}: _weight has shape {arr.shape}, expected ({shape[0]}, {shape[1]})")
        module.weight = Parameter(arr, requires_grad=requires_grad)


class Embedding(Module):
    """weight (num_embeddings, embedding_dim), init N(0, 1) as PyTorch; the ``padding_idx`` row
    is zero and receives no gradient."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, _weight=None, _freeze=False, device=None, dtype=None):
        super().__init__()
        _check_sizes(num_embeddings, embedding_dim, "Embedding")
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = _check_padding_idx(padding_idx, num_embeddings, "Embedding")
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        _init_table(self, _weight, dtype, not _freeze, "Embedding")

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            self.weight._data[self.padding_idx] = 0

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, sparse=False):
        """An Embedding whose table is ``embeddings`` (2-D); frozen (no gradient) by default."""
        if embeddings.ndim != 2:
            raise ValueError(f"Embedding.from_pretrained: embeddings must be 2-D, got shape {tuple(embeddings.shape)}")
        arr = embeddings._data if isinstance(embeddings, Tensor) else xp.asarray(embeddings)
        rows, cols = arr.shape
        return cls(rows, cols, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                   _weight=arr.copy(), _freeze=freeze)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        return s


# ---------------------------------------------------------------- embedding bag
class EmbeddingBag(Module):
    """Sums, means or maxima of embedding rows per bag, without building the (bag, len, dim)
    tensor of an Embedding; weight (num_embeddings, embedding_dim) init N(0, 1)."""

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                 mode="mean", sparse=False, _weight=None, include_last_offset=False, padding_idx=None,
                 device=None, dtype=None):
        super().__init__()
        _check_device(device)
        if mode not in ("sum", "mean", "max"):
            raise ValueError(f"EmbeddingBag: mode has to be one of sum, mean or max, got {mode!r}")
        if scale_grad_by_freq or sparse:
            raise NotImplementedError("EmbeddingBag: scale_grad_by_freq and sparse gradients are not supported")
        _check_sizes(num_embeddings, embedding_dim, "EmbeddingBag")
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.max_norm, self.norm_type, self.scale_grad_by_freq = max_norm, norm_type, scale_grad_by_freq
        self.padding_idx = _check_padding_idx(padding_idx, num_embeddings, "EmbeddingBag")
        _init_table(self, _weight, dtype, True, "EmbeddingBag")
        self.mode, self.sparse, self.include_last_offset = mode, sparse, include_last_offset

    reset_parameters = Embedding.reset_parameters    # N(0, 1), padding row zeroed

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type, self.scale_grad_by_freq,
                               self.mode, self.sparse, per_sample_weights, self.include_last_offset,
                               self.padding_idx)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                        mode="mean", sparse=False, include_last_offset=False, padding_idx=None):
        if embeddings.ndim != 2:
            raise ValueError(f"EmbeddingBag.from_pretrained: embeddings must be 2-D, got shape "
                             f"{tuple(embeddings.shape)}")
        arr = embeddings._data if isinstance(embeddings, Tensor) else xp.asarray(embeddings)
        m = cls(arr.shape[0], arr.shape[1], max_norm, norm_type, scale_grad_by_freq, mode, sparse, arr.copy(),
                include_last_offset, padding_idx)
        m.weight.requires_grad = not freeze
        return m

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm!r}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type!r}"
        if self.scale_grad_by_freq is not False:
            s += f", scale_grad_by_freq={self.scale_grad_by_freq!r}"
        s += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx!r}"
        return s

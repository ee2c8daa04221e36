"""AdaptiveLogSoftmaxWithLoss: the adaptive softmax of Grave et al. (a head and tail clusters).
"""
from __future__ import annotations

# ---------------------------------------------------------------- adaptive softmax
from varlens import ops
from varlens.core.array import xp
from varlens.core.tensor import Tensor
from varlens.nn import functional as F
from varlens.nn.container import ModuleList, Sequential
from varlens.nn.linear import Linear
from varlens.nn.module import Module
from collections import namedtuple  # noqa: E402


_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Grave et al.'s adaptive softmax: a head over the ``cutoffs[0]`` most frequent classes plus one
    entry per tail cluster, and per cluster a two-layer projection (in -> in/div^(i+1) -> cluster
    size).  log p(y) = log p_head(y) for shortlist classes, log p_head(cluster) + log p_cluster(y)
    otherwise.  ``forward(input, target)`` returns (output = log p(target), loss = -mean output)."""

    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False, device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("AdaptiveLogSoftmaxWithLoss: cutoffs should be a sequence of length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise ValueError("AdaptiveLogSoftmaxWithLoss: cutoffs should be a sequence of unique, positive integers "
                             "sorted in an increasing order, where each value is between 1 and n_classes-1, got "
                             f"{cutoffs}")
        self.in_features, self.n_classes = in_features, n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value, self.head_bias = div_value, head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, device=device, dtype=dtype)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hsz = int(in_features // (div_value ** (i + 1)))
            osz = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hsz, bias=False, device=device, dtype=dtype),
                                        Linear(hsz, osz, bias=False, device=device, dtype=dtype)))

    def reset_parameters(self):
        self.head.reset_parameters()
        for i2h, h2o in self.tail:
            i2h.reset_parameters()
            h2o.reset_parameters()

    def forward(self, input_, target_):
        input, target = input_, target_
        unb = input.ndim == 1
        if input.ndim not in (1, 2):
            raise RuntimeError(f"AdaptiveLogSoftmaxWithLoss: input should be 1D or 2D, got shape {tuple(input.shape)}")
        t = target._data if isinstance(target, Tensor) else xp.asarray(target)
        if unb:
            if t.ndim != 0:
                raise RuntimeError("AdaptiveLogSoftmaxWithLoss: 0D target tensor expected, multi-target not supported")
            input, t = input.unsqueeze(0), t.reshape(1)
        elif t.ndim != 1 or t.shape[0] != input.shape[0]:
            raise RuntimeError(f"AdaptiveLogSoftmaxWithLoss: input and target should have the same size in the batch "
                               f"dimension, got {tuple(input.shape)} and {t.shape}")
        if input.shape[1] != self.in_features:
            raise RuntimeError(f"AdaptiveLogSoftmaxWithLoss: input should have {self.in_features} features, got "
                               f"shape {tuple(input.shape)}")
        N = input.shape[0]
        if t.size and (t.min() < 0 or t.max() >= self.n_classes):
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but values in range "
                               f"[{int(t.min())}, {int(t.max())}] were found. ")
        out = Tensor._make(xp.zeros(N, dtype=input.dtype))
        head_idx = t.copy()
        for i in range(1, self.n_clusters + 1):
            lo, hi = self.cutoffs[i - 1], self.cutoffs[i]
            rows = xp.flatnonzero((t >= lo) & (t < hi))
            if rows.size == 0:
                continue
            head_idx[rows] = self.shortlist_size + i - 1
            sub = ops.index_select(input, 0, Tensor._make(rows))
            lp = F.log_softmax(self.tail[i - 1](sub), 1)
            local = ops.gather(lp, 1, Tensor._make((t[rows] - lo)[:, None])).squeeze(1)
            out = ops.setitem(out, (rows,), local)
        head_lp = F.log_softmax(self.head(input), 1)
        out = out + ops.gather(head_lp, 1, Tensor._make(head_idx[:, None])).squeeze(1)
        loss = (-out).mean()
        return _ASMoutput(out.squeeze(0) if unb else out, loss)

    def _full_log_prob(self, input, head_output):
        head_lp = F.log_softmax(head_output, 1)
        parts = [head_lp[:, :self.shortlist_size]]
        for i in range(self.n_clusters):
            lp = F.log_softmax(self.tail[i](input), 1)
            parts.append(lp + head_lp[:, self.shortlist_size + i:self.shortlist_size + i + 1])
        return ops.cat(parts, 1)

    def log_prob(self, input):
        """log p(c | x) for every class, (N, n_classes) (or (n_classes,) for one example)."""
        x = input.unsqueeze(0) if input.ndim == 1 else input
        out = self._full_log_prob(x, self.head(x))
        return out.squeeze(0) if input.ndim == 1 else out

    def predict(self, input):
        """The most probable class of each example."""
        return self.log_prob(input).argmax(-1)

    def extra_repr(self):
        return ""

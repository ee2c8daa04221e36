"""Recurrent layers with PyTorch's names, shapes, weight layout and gate order (seed 003 §6.1).

``RNN`` (tanh / relu), ``LSTM`` and ``GRU`` run a whole sequence; ``RNNCell``, ``LSTMCell``,
``GRUCell`` do one step.  Each layer/direction is one fused op from
``varlens.ops.nn.rnn`` (forward loop plus hand-written BPTT), so a 50-step LSTM is one
node on the tape, not hundreds.

Parameters are named as in PyTorch (``weight_ih_l0``, ``weight_hh_l0``, ``bias_ih_l0``,
``bias_hh_l0``, and ``..._reverse`` for the backward direction), with the same shapes
(``weight_ih_l0`` is (gates*H, input_size)) and gate order (LSTM i, f, g, o; GRU r, z, n),
and initialised U(-1/sqrt(H), 1/sqrt(H)) like PyTorch, so a ``torch.nn.LSTM`` state_dict
(converted to NumPy) loads into ``varlens.nn.LSTM`` and gives the same outputs.

Variable-length batches: pass a ``PackedSequence`` from
``varlens.nn.utils.rnn.pack_padded_sequence``.  varlens keeps it padded and runs with a
mask (padded steps carry the state and output zeros), which gives PyTorch's results for
outputs and final states; see ``varlens/nn/utils/rnn.py``.

Not supported: ``proj_size`` (LSTM projections), which raises.

"""
from __future__ import annotations

import math

from varlens import ops as _ops
from varlens.core.array import xp
from varlens.core import array as B
from varlens.core.dtypes import get_default_dtype, to_dtype
from varlens.core.tensor import Tensor
from varlens.nn import functional as F
from varlens.nn.functional._errors import ArgTypeError
from varlens.nn.module import Module
from varlens.nn.parameter import Parameter
from varlens.nn.utils.rnn import PackedSequence
from varlens.ops.nn import rnn as _R
from varlens.random import _gen


_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _uniform_param(shape, bound, dtype, generator=None):
    g = _gen(generator)
    return Parameter(Tensor._make(g.uniform(-bound, bound, shape).astype(dtype)))


def _check_positive_int(v, what, owner):
    if not isinstance(v, int) or isinstance(v, bool):
        raise ArgTypeError(f"{owner}: {what} must be a positive int, got {v!r} ({type(v).__name__})")
    if v <= 0:
        raise ValueError(f"{owner}: {what} must be a positive int (greater than zero), got {v!r}")


class RNNBase(Module):
    """The shared body of RNN, LSTM and GRU (PyTorch's ``nn.RNNBase``)."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        name = {"LSTM": "LSTM", "GRU": "GRU"}.get(mode, "RNN")
        _check_positive_int(input_size, "input_size", name)
        _check_positive_int(hidden_size, "hidden_size", name)
        _check_positive_int(num_layers, "num_layers", name)
        if not (isinstance(dropout, (int, float)) and 0 <= dropout <= 1) or isinstance(dropout, bool):
            raise ValueError(f"{name}: dropout should be a number in range [0, 1] representing the "
                             f"probability of an element being zeroed, got {dropout!r}")
        if proj_size:
            raise NotImplementedError(f"{name}: proj_size is not supported by varlens (got {proj_size})")
        if mode not in _GATES:
            raise ValueError(f"RNNBase: unknown mode {mode!r}; expected one of {sorted(_GATES)}")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bool(bias)
        self.batch_first = bool(batch_first)
        self.dropout = float(dropout)
        self.bidirectional = bool(bidirectional)
        self.proj_size = 0
        dt = to_dtype(dtype) if dtype is not None else get_default_dtype()
        G = _GATES[mode] * hidden_size
        D = 2 if bidirectional else 1
        self._flat_weights_names = []
        for layer in range(num_layers):
            in_size = input_size if layer == 0 else hidden_size * D
            for d in range(D):
                sfx = f"_l{layer}" + ("_reverse" if d == 1 else "")
                names = [f"weight_ih{sfx}", f"weight_hh{sfx}"]
                setattr(self, names[0], Parameter(Tensor._make(_rnn_empty((G, in_size), dt))))
                setattr(self, names[1], Parameter(Tensor._make(_rnn_empty((G, hidden_size), dt))))
                if self.bias:
                    names += [f"bias_ih{sfx}", f"bias_hh{sfx}"]
                    setattr(self, names[2], Parameter(Tensor._make(_rnn_empty((G,), dt))))
                    setattr(self, names[3], Parameter(Tensor._make(_rnn_empty((G,), dt))))
                self._flat_weights_names.extend(names)
        self.reset_parameters()

    def reset_parameters(self):
        """U(-1/sqrt(H), 1/sqrt(H)) for every weight and bias, as PyTorch."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        g = _gen(None)
        for name in self._flat_weights_names:
            p = getattr(self, name)
            p._data = _redraw(g, bound, p._data)

    @property
    def _flat_weights(self):
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        """Per layer and direction, the list [weight_ih, weight_hh(, bias_ih, bias_hh)] (as PyTorch)."""
        D = 2 if self.bidirectional else 1
        return [[w for w in self._layer_weights(layer, d) if w is not None]
                for layer in range(self.num_layers) for d in range(D)]

    def flatten_parameters(self):
        """No-op kept for PyTorch code: varlens never needs a contiguous weight buffer."""
        return None

    def _layer_weights(self, layer, direction):
        sfx = f"_l{layer}" + ("_reverse" if direction == 1 else "")
        w = [getattr(self, f"weight_ih{sfx}"), getattr(self, f"weight_hh{sfx}")]
        if self.bias:
            w += [getattr(self, f"bias_ih{sfx}"), getattr(self, f"bias_hh{sfx}")]
        else:
            w += [None, None]
        return w

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.mode == "RNN_RELU":
            s += ", nonlinearity='relu'"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s

    # ------------------------------------------------------------------ forward
    def _check_hidden(self, h, name, B, unbatched):
        D = 2 if self.bidirectional else 1
        want = (self.num_layers * D, self.hidden_size) if unbatched else (self.num_layers * D, B, self.hidden_size)
        if not isinstance(h, Tensor):
            raise TypeError(f"{type(self).__name__}: {name} must be a Tensor, got {type(h).__name__}")
        if tuple(h.shape) != want:
            raise RuntimeError(f"{type(self).__name__}: expected {name} size {want}, got {tuple(h.shape)}")

    def forward(self, input, hx=None):
        cls = type(self).__name__
        packed = isinstance(input, PackedSequence)
        mask = None
        if packed:
            x = input.padded  # (T, B, I) time-major, padded
            mask = input.mask
            unbatched = False
        else:
            if not isinstance(input, Tensor):
                raise TypeError(f"{cls}: input must be a Tensor or PackedSequence, got {type(input).__name__}")
            if input.ndim not in (2, 3):
                raise ValueError(f"{cls}: Expected input to be 2D or 3D, got {input.ndim}D tensor "
                                 f"of shape {tuple(input.shape)}")
            unbatched = input.ndim == 2
            x = input
            if unbatched:
                x = _ops.unsqueeze(x, 1)
            elif self.batch_first:
                x = _ops.transpose(x, 0, 1)
        if x.shape[-1] != self.input_size:
            raise RuntimeError(f"{cls}: input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {x.shape[-1]}")
        if x.dtype != self.weight_ih_l0.dtype:
            raise ArgTypeError(f"{cls}: input dtype {x.dtype} does not match the parameters' dtype "
                               f"{self.weight_ih_l0.dtype}; convert one of them (.float() / .double())")
        B = x.shape[1]
        is_lstm = self.mode == "LSTM"
        h0 = c0 = None
        if hx is not None:
            if is_lstm:
                if not (isinstance(hx, (tuple, list)) and len(hx) == 2):
                    raise TypeError(f"LSTM: hx must be a tuple (h_0, c_0), got {type(hx).__name__}")
                h0, c0 = hx
                self._check_hidden(h0, "h_0", B, unbatched)
                self._check_hidden(c0, "c_0", B, unbatched)
                if unbatched:
                    h0, c0 = _ops.unsqueeze(h0, 1), _ops.unsqueeze(c0, 1)
            else:
                self._check_hidden(hx, "hx", B, unbatched)
                h0 = _ops.unsqueeze(hx, 1) if unbatched else hx
        D = 2 if self.bidirectional else 1
        hns, cns = [], []
        layer_in = x
        # first layer fed straight by an embedding lookup: the fused op (ops/nn/rnn.py
        # ``LSTMEmbedLayerFunction``; bidirectional, packed and unbatched inputs fall back)
        emb = (_R.embedding_source(input, self.batch_first)
               if is_lstm and D == 1 and not packed and not unbatched else None)
        for layer in range(self.num_layers):
            outs = []
            for d in range(D):
                k = layer * D + d
                w = self._layer_weights(layer, d)
                hk = h0[k] if h0 is not None else None
                if is_lstm:
                    ck = c0[k] if c0 is not None else None
                    if emb is not None and layer == 0:
                        y, hn, cn = _R.lstm_embed_layer(emb[0], emb[1], hk, ck, *w)
                    else:
                        y, hn, cn = _R.lstm_layer(layer_in, hk, ck, *w, reverse=d == 1, mask=mask)
                    cns.append(cn)
                elif self.mode == "GRU":
                    y, hn = _R.gru_layer(layer_in, hk, *w, reverse=d == 1, mask=mask)
                else:
                    nl = "relu" if self.mode == "RNN_RELU" else "tanh"
                    y, hn = _R.rnn_layer(layer_in, hk, *w, nonlinearity=nl, reverse=d == 1, mask=mask)
                outs.append(y)
                hns.append(hn)
            layer_out = outs[0] if D == 1 else _ops.cat(outs, dim=2)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                layer_out = F.dropout(layer_out, p=self.dropout, training=True)
            layer_in = layer_out
        out = layer_in
        h_n = _ops.stack(hns, dim=0)
        c_n = _ops.stack(cns, dim=0) if is_lstm else None
        if packed:
            out = PackedSequence._from_padded(out, input)
        elif unbatched:
            out = _ops.squeeze(out, 1)
            h_n = _ops.squeeze(h_n, 1)
            c_n = _ops.squeeze(c_n, 1) if is_lstm else None
        elif self.batch_first:
            out = _ops.transpose(out, 0, 1)
        return (out, (h_n, c_n)) if is_lstm else (out, h_n)


def _redraw(g, bound, a):
    """U(-bound, bound) values of a's shape and dtype, drawn by the host generator g and placed
    on a's device (reset_parameters on a module already moved to CUDA)."""
    return B.to_namespace(g.uniform(-bound, bound, a.shape).astype(a.dtype), B.namespace(a))


def _rnn_empty(shape, dt):
    return xp.zeros(shape, dtype=dt)


class RNN(RNNBase):
    """Elman RNN, h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) (seed 003 eq. 6.1.1);
    ``nonlinearity='relu'`` uses relu.  Returns ``(output, h_n)``."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size,
                         num_layers, bias, batch_first, dropout, bidirectional, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """LSTM (seed 003 eq. 6.1.3), PyTorch's gate order i, f, g, o.  ``forward(input, (h_0, c_0))``
    returns ``(output, (h_n, c_n))``."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, proj_size, device=device, dtype=dtype)


class GRU(RNNBase):
    """GRU (Cho et al., seed 003 §6.7.1) in PyTorch's form: r, z gates and
    n = tanh(W_in x + b_in + r*(W_hn h + b_hn)), h' = (1-z)*n + z*h."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, device=device, dtype=dtype)


# ====================================================================== cells
class RNNCellBase(Module):
    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        _check_positive_int(input_size, "input_size", name)
        _check_positive_int(hidden_size, "hidden_size", name)
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bool(bias)
        dt = to_dtype(dtype) if dtype is not None else get_default_dtype()
        G = num_chunks * hidden_size
        self.weight_ih = Parameter(Tensor._make(_rnn_empty((G, input_size), dt)))
        self.weight_hh = Parameter(Tensor._make(_rnn_empty((G, hidden_size), dt)))
        if self.bias:
            self.bias_ih = Parameter(Tensor._make(_rnn_empty((G,), dt)))
            self.bias_hh = Parameter(Tensor._make(_rnn_empty((G,), dt)))
        else:
            self.bias_ih = None
            self.bias_hh = None
        self.reset_parameters()

    def reset_parameters(self):
        """U(-1/sqrt(H), 1/sqrt(H)), as PyTorch."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        g = _gen(None)
        for p in (self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh):
            if p is not None:
                p._data = _redraw(g, bound, p._data)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            s += ", bias=False"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity!r}"
        return s

    def _prep(self, input, hx_list):
        name = type(self).__name__
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}: input must be a Tensor, got {type(input).__name__}")
        if input.ndim not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"{name}: input has inconsistent input_size: got {input.shape[-1]} "
                               f"expected {self.input_size}")
        unbatched = input.ndim == 1
        x = _ops.unsqueeze(input, 0) if unbatched else input
        B = x.shape[0]
        out = []
        for h, nm in hx_list:
            if h is None:
                out.append(None)
                continue
            want = (self.hidden_size,) if unbatched else (B, self.hidden_size)
            if tuple(h.shape) != want:
                raise RuntimeError(f"{name}: expected {nm} of shape {want}, got {tuple(h.shape)}")
            out.append(_ops.unsqueeze(h, 0) if unbatched else h)
        return x, out, unbatched


class RNNCell(RNNCellBase):
    """One Elman step (seed 003 eq. 6.1.1): h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        x, (h,), unb = self._prep(input, [(hx, "hx")])
        out = _R.rnn_cell(x, h, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh,
                          nonlinearity=self.nonlinearity)
        return _ops.squeeze(out, 0) if unb else out


class LSTMCell(RNNCellBase):
    """One fused LSTM step; ``forward(input, (h, c))`` returns ``(h', c')``."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        if hx is not None and not (isinstance(hx, (tuple, list)) and len(hx) == 2):
            raise TypeError(f"LSTMCell: hx must be a tuple (h, c), got {type(hx).__name__}")
        h, c = hx if hx is not None else (None, None)
        x, (h, c), unb = self._prep(input, [(h, "h"), (c, "c")])
        h1, c1 = _R.lstm_cell(x, h, c, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        if unb:
            return _ops.squeeze(h1, 0), _ops.squeeze(c1, 0)
        return h1, c1


class GRUCell(RNNCellBase):
    """One fused GRU step (PyTorch's r, z, n form)."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        x, (h,), unb = self._prep(input, [(hx, "hx")])
        out = _R.gru_cell(x, h, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        return _ops.squeeze(out, 0) if unb else out

"""The fused linear layer: out = x W^T + b as one op;  dL/dx = g W, dL/dW = g^T x,
dL/db = sum of g over the batch (seed 003 eq. 1.6.5); plus the shared BLAS reduction helpers."""
from __future__ import annotations

from varlens.core import graph_nodes as _graph_nodes
from varlens.core.function import Function
from varlens.core import array as B
from varlens.core.array import xp
from varlens.core import primitives as D
from varlens.ops.linalg import matmul
from varlens.ops.nn.norm import _ones
from varlens.ops.pointwise import torch_dtype_name as n

_ndarray = xp.ndarray
_dot = xp.dot
_ascontig = xp.ascontiguousarray
_add_reduce = xp.add.reduce
_max_reduce = xp.maximum.reduce


# ---------------------------------------------------------------- linear
class Linear(Function):
    """y = x W^T + b with W of shape (out, in), x of shape (..., in).

    Backward (seed 001 §3.1 / seed 003 eq. 1.6.5): dL/dx = g W,
    dL/dW = g^T x summed over every leading (batch) axis, dL/db = sum of g over them.
    """

    def forward(self, x, w, b=None):
        if x.dtype is not w.dtype and x.dtype != w.dtype:  # one comparison: dtypes are singletons
            _dtype_mismatch(x, w)
        self.save_for_backward(x, w)
        if x.__class__ is _ndarray and x.ndim >= 2 and w.shape[1] == x.shape[-1] > 0 \
                and 1 < (m := x.size // w.shape[1]) <= 32 and (m >= 8 or w.shape[0] > w.shape[1]) \
                and w.flags.c_contiguous:
            # A few rows (generation, small batches): OpenBLAS's small-M GEMM with a transposed
            # weight is slow; (W x^T)^T reads W in its own layout (20-25% less time at 5x128 -> 384
            # and 12x512 -> 128, measured for issue 19), made C-ordered again before b is added.
            k = w.shape[1]
            if 4 <= m <= 16 and k <= 256 and w.shape[0] >= 256:
                # a wide output from a short input (QKV and MLP-up projections in generation):
                # W times x^T copied C-ordered is a plain no-transpose GEMM for OpenBLAS, 1.3-2x
                # faster again here (8 x 128 -> 384: 11.6 us against 18.0; Zen 4, issue 19)
                y = _ascontig(_dot(w, _ascontig(x.reshape(-1, k).T)).T)
            else:
                y = _ascontig(_dot(w, x.reshape(-1, k).T).T)
            if b is not None:
                y += b
            return y.reshape(x.shape[:-1] + (w.shape[0],))
        if x.ndim == 2 and x.__class__ is _ndarray:
            y = _dot(x, w.T)              # (np.dot: less dispatch than @ in 2-D)
        else:
            y = B.matmul(x, w.T)          # (N-D, or a device array: its library's GEMM)
        if b is not None:
            y += b
        return y

    def backward(self, g):
        x, w = self.saved
        n = self.next
        if g.__class__ is _ndarray and g.ndim == 2 and x.ndim == 2:
            # first-order training with a (batch, features) input: three BLAS calls, no dispatch
            return (_dot(g, w) if n[0] is not None else None,
                    _dot(g.T, x) if n[1] is not None else None,
                    _dot(_ones(g.shape[0], g.dtype), g) if n[2] is not None else None)
        gx = D.matmul(g, w) if n[0] is not None else None
        gw = gb = None
        if n[1] is not None or n[2] is not None:
            o = g.shape[-1]
            g2 = D.reshape(g, (-1, o)) if g.ndim != 2 else g
            if n[1] is not None:
                x2 = D.reshape(x, (-1, x.shape[-1])) if x.ndim != 2 else x
                gw = D.matmul(D.mT(g2), x2)
            if n[2] is not None:
                gb = D.sum(g2, 0)
        return gx, gw, gb


    # ---- how the node presents itself to code walking the graph (nothing here computes)
    def torch_node_name(self):
        """PyTorch's name of this node: AddmmBackward0 (MmBackward0 without a bias) for a 2-D
        input; for other ranks the reshape PyTorch puts on top of the matrix product."""
        return _torch_layout(self)[0]

    @property
    def next_functions(self):
        """PyTorch's edges, in its order: addmm's (bias, input, TBackward0 of the weight), under
        a ViewBackward0 for a 1-D or N-D input (docs/conventions.md, "Graph nodes")."""
        return _torch_layout(self)[1]


def _torch_layout(node):
    """(name, next_functions) of the nodes PyTorch 2.13 records for F.linear, where varlens has one
    Linear node: 2-D input: Addmm(bias, x, T(w)) or Mm(x, T(w)); N-D: View(Addmm(bias,
    View(x), T(w))) or UnsafeView(Mm(View(x), T(w))); 1-D: View(Addmm(bias, View(x), T(w))) or
    Squeeze(Mm(Unsqueeze(x), T(w))).  The inner nodes are display-only (core/graph_nodes.py)."""
    nxt = node.next
    has_bias = len(nxt) > 2 and 2 not in getattr(node, "_nontensor", ())
    x, w = _graph_nodes.next_function_pairs(nxt[:2])
    t = (_graph_nodes.display_node("TBackward0", (w,)), 0) if w[0] is not None else w
    mm = ((_graph_nodes.next_function_pairs(nxt[2:3])[0],) if has_bias else ())
    nd = len(node._oshape)
    if nd == 2:
        return ("AddmmBackward0" if has_bias else "MmBackward0"), mm + (x, t)
    if x[0] is not None:
        x = (_graph_nodes.display_node("UnsqueezeBackward0" if nd == 1 and not has_bias else "ViewBackward0",
                                       (x,)), 0)
    inner = _graph_nodes.display_node("AddmmBackward0" if has_bias else "MmBackward0", mm + (x, t))
    top = "ViewBackward0" if has_bias else ("SqueezeBackward4" if nd == 1 else "UnsafeViewBackward0")
    return top, ((inner, 0),)


def _dtype_mismatch(x, w):
    raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got {n(x.dtype)} and {n(w.dtype)} "
                       f"(linear: input dtype {x.dtype}, weight dtype {w.dtype}); convert the input with "
                       f".to({w.dtype}) or the layer with .to({x.dtype})")


def linear_shape_error(s, ws, what="linear"):
    """PyTorch's message for an input of shape ``s`` that a weight of shape ``ws`` cannot multiply,
    followed by the shapes in varlens' words."""
    s, ws = tuple(s), tuple(ws)
    if not s:
        raise RuntimeError(f"both arguments to linear need to be at least 1D, but they are 0D and {len(ws)}D "
                           f"({what}: expected an input of shape (*, {ws[-1]}), got a 0-d tensor)")
    rows = 1
    for d in s[:-1]:
        rows *= d
    mat2 = f"{ws[1]}x{ws[0]}" if len(ws) == 2 else "x".join(map(str, ws))
    raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x{s[-1]} and {mat2}) ({what}: expected "
                       f"input of shape (*, {ws[-1]}) for a weight of shape {ws} (out_features, in_features), "
                       f"got input of shape {s})")


def linear(x, weight, bias=None):
    if weight.ndim != 2 and weight.ndim != 1:
        raise RuntimeError(f"linear: weight must be 2-D (out_features, in_features), got shape "
                           f"{tuple(weight.shape)}")
    if not hasattr(x, "_data"):
        raise TypeError(f"linear(): argument 'input' (position 1) must be Tensor, not {type(x).__name__}")
    win = weight.shape[-1]
    if x.ndim == 0 or x.shape[-1] != win:
        linear_shape_error(x.shape, weight.shape)
    if weight.ndim == 1:
        out = matmul(x, weight)
        return out + bias if bias is not None else out
    return Linear.apply(x, weight, bias)



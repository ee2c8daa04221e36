"""How the autograd graph presents itself to PyTorch code that walks it (``grad_fn``,
``next_functions``, printing): PyTorch's node names and the AccumulateGrad node of a leaf.

varlens records one Function object per op; tutorials print ``loss.grad_fn`` and walk
``grad_fn.next_functions[0][0]``.  This file holds (1) the name PyTorch gives the node of the
same op (``Linear`` is PyTorch's ``AddmmBackward0``, ``ReLU`` its ``ReluBackward0``), and (2)
``AccumulateGrad``, the node PyTorch shows for a leaf tensor that requires grad (its
``.variable`` is the leaf).  Nothing here takes part in computing gradients.
"""
from __future__ import annotations

# varlens Function class name -> PyTorch's node name without the "Backward0" suffix, where they
# differ (checked against torch 2.13's printed grad_fn for the same call on 2-D float inputs).
TORCH_NODE_NAMES = {
    "Linear": "Addmm", "MatMul": "Mm", "Reshape": "View", "Cast": "ToCopy", "GetItem": "Index",
    "ReLU": "Relu", "GELU": "Gelu", "SiLU": "Silu", "ELU": "Elu", "LeakyReLU": "LeakyRelu",
    "CrossEntropy": "NllLoss", "BCEWithLogits": "BinaryCrossEntropyWithLogits",
    "LayerNorm": "NativeLayerNorm", "BatchNorm": "NativeBatchNorm", "Conv2dFn": "Convolution",
    "ConvTranspose2dFn": "Convolution", "MaxPool2dFn": "MaxPool2DWithIndices", "AvgPool2dFn": "AvgPool2D",
    "UpsampleNearest2dFn": "UpsampleNearest2D", "ConstantPad": "ConstantPadNd", "Unfold": "Im2Col",
    "SDPA": "ScaledDotProductFlashAttentionForCpu", "Norm2": "LinalgVectorNorm", "LogSumExp": "Logsumexp",
    "CumSum": "Cumsum", "CumProd": "Cumprod", "MaskMul": "Mul", "Amax": "Amax", "Amin": "Amin",
    "Inv": "LinalgInv", "Eigh": "LinalgEigh", "SVD": "LinalgSvd", "QR": "LinalgQr", "Cholesky": "LinalgCholeskyEx",
    "Solve": "LinalgSolveEx", "Pinv": "LinalgPinv", "LogAbsDet": "LinalgSlogdet", "Lstsq": "LinalgLstsq",
    "MatrixExp": "LinalgMatrixExp", "SolveTriangular": "LinalgSolveTriangular", "LU": "LinalgLuFactorEx",
    "IndexScatter": "IndexCopy", "Embedding": "Embedding", "Softmax": "Softmax", "LogSoftmax": "LogSoftmax",
    "RNNLayerFunction": "RnnTanh", "LSTMLayerFunction": "MkldnnRnnLayer", "GRULayerFunction": "Gru",
}


def node_name(fn) -> str:
    """PyTorch's name of the graph node ``fn`` (``MseLossBackward0``); a user's
    ``torch.autograd.Function`` subclass prints as ``<ClassName>Backward``, as in PyTorch."""
    cls = type(fn)
    if getattr(cls, "_ctx_style", False):
        return f"{cls.__name__}Backward"
    own = getattr(fn, "torch_node_name", None)   # a class's full name ("MaxBackward1"), or a
    if own is not None:                          # method naming it from the node (Linear on 3-D input)
        return own() if callable(own) else own
    name = cls.__name__
    return TORCH_NODE_NAMES.get(name, name) + "Backward0"


class AccumulateGrad:
    """The graph node of a leaf tensor that requires grad, as PyTorch shows it in
    ``next_functions``: ``variable`` is the leaf, and it has no inputs of its own."""

    __slots__ = ("variable",)
    next_functions = ()

    def __init__(self, variable):
        self.variable = variable

    def name(self):
        return "torch::autograd::AccumulateGrad"

    def __repr__(self):
        return f"<AccumulateGrad object at {hex(id(self))}>"


def next_function_pairs(inputs):
    """``next_functions`` of a node whose recorded inputs are ``inputs`` (a node, a leaf
    Tensor, or None each): PyTorch's tuple of (node, output index) pairs.  varlens nodes have
    one output, so the index is 0; a leaf becomes its AccumulateGrad, an input that needs no
    gradient (None, 0)."""
    out = []
    for n in inputs:
        if n is None:
            out.append((None, 0))
        elif hasattr(n, "backward") and not hasattr(n, "_data"):
            out.append((n, 0))
        else:
            out.append((AccumulateGrad(n), 0))
    return tuple(out)


class DisplayNode:
    """A node PyTorch's graph has where varlens records none (the transpose of a Linear's
    weight, the view of its N-D input, the addmm under that view): PyTorch's name (its type's
    name, as in PyTorch) and edges, for code that walks ``next_functions``.  No gradient passes
    through it: the one recorded varlens node computes them all."""

    __slots__ = ("next_functions",)

    def __init__(self, next_functions):
        self.next_functions = tuple(next_functions)

    def name(self):
        return type(self).__name__

    def __repr__(self):
        return f"<{type(self).__name__} object at {hex(id(self))}>"


_DISPLAY_TYPES = {}


def display_node(name, next_functions):
    """A DisplayNode whose type is called ``name`` ("TBackward0"), with those (node, index) pairs."""
    cls = _DISPLAY_TYPES.get(name)
    if cls is None:
        cls = _DISPLAY_TYPES[name] = type(name, (DisplayNode,), {"__slots__": ()})
    return cls(next_functions)


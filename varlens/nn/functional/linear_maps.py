"""Linear maps: linear, bilinear.
"""
from __future__ import annotations

from varlens import ops as _ops
from varlens.ops.nn import linear as _nn
from varlens.nn.functional._common import _tensor_args




# ---------------------------------------------------------------- linear layers
@_tensor_args("input", "weight", "bias", optional=("bias",))
def linear(input, weight, bias=None):
    """y = x W^T + b, weight of shape (out_features, in_features)."""
    return _nn.linear(input, weight, bias)


@_tensor_args("input1", "input2", "weight", "bias", optional=("bias",))
def bilinear(input1, input2, weight, bias=None):
    """y_k = x1^T W_k x2 + b_k with weight of shape (out, in1, in2)."""
    if input1.shape[-1] != weight.shape[1] or input2.shape[-1] != weight.shape[2]:
        raise RuntimeError(f"bilinear: inputs of shapes {tuple(input1.shape)} and {tuple(input2.shape)} do not "
                           f"match the weight's (out, in1, in2) = {tuple(weight.shape)}")
    lead = tuple(input1.shape[:-1])
    a = _ops.reshape(input1, (-1, input1.shape[-1]))
    b = _ops.reshape(input2, (-1, input2.shape[-1]))
    y = _ops.reshape(_ops.einsum("bi,oij,bj->bo", a, weight, b), lead + (weight.shape[0],))
    return y + bias if bias is not None else y

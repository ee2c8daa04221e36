"""Activations keep what their backward reuses as saved values (not node attributes), so the
engine frees it once that backward has run (not when the whole graph goes), and retain_graph=True
still allows a second backward with the same gradient."""
import gc
import weakref

import numpy as np
import pytest

import varlens as vl


@pytest.mark.parametrize("name, fn", [
    ("gelu_tanh", lambda x: vl.nn.functional.gelu(x, approximate="tanh")),
    ("silu", vl.nn.functional.silu),
])
def test_array_mode_intermediate_is_freed_after_backward(name, fn):
    # float64 takes the array-mode path, which keeps tanh(u) (GELU) or sigmoid(x) (SiLU)
    x = vl.tensor(np.random.default_rng(0).standard_normal((6, 7)), dtype=vl.float64, requires_grad=True)
    y = fn(x)
    node = y.grad_fn
    extra = [a for a in node.saved if a is not x._data and a is not y._data]
    assert len(extra) == 1 and extra[0].shape == x.shape, "one intermediate kept, as a saved value"
    ref = weakref.ref(extra[0])
    del extra
    w = vl.tensor(np.random.default_rng(1).standard_normal((6, 7)), dtype=vl.float64)
    (y * w).sum().backward(retain_graph=True)
    g1 = x.grad.numpy().copy()
    x.grad = None
    (y * w).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), g1)
    gc.collect()
    assert node.saved is None and ref() is None, f"{name}: the intermediate outlived the backward"

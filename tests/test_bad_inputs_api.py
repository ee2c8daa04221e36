"""Bad inputs to the tensor API (creation, ops, Tensor methods) raise the same exception type
as PyTorch, with a message naming the argument, what was expected and what came.

Each case runs the same call on torch (the oracle for the exception type) and on varlens.
"""
import numpy as np
import pytest
import torch

import varlens as vl
import varlens.nn as vnn
import varlens.nn.functional as VF

X_NP = np.arange(20, dtype=np.float32).reshape(4, 5)
X4_NP = np.random.default_rng(0).standard_normal((2, 3, 6, 6)).astype(np.float32)


def _lib(m):
    """(library, 2-d tensor, 4-d tensor) for module m (torch or varlens)."""
    return m, m.tensor(X_NP), m.tensor(X4_NP)


# name -> (call(lib, X, X4), words that the varlens message must contain, all lower-case)
CASES = {
    # ---- lists / NumPy arrays where a Tensor is expected
    "exp(list)": (lambda m, X, X4: m.exp([1., 2.]), ["exp", "input", "tensor", "list"]),
    "tanh(ndarray)": (lambda m, X, X4: m.tanh(np.ones(2)), ["tanh", "input", "tensor", "numpy.ndarray"]),
    "sigmoid(list)": (lambda m, X, X4: m.sigmoid([1., 2.]), ["sigmoid", "input", "tensor", "list"]),
    "mean(ndarray)": (lambda m, X, X4: m.mean(np.ones(2)), ["mean", "input", "tensor", "ndarray"]),
    "clamp(list)": (lambda m, X, X4: m.clamp([1., 2.], 0., 1.), ["clamp", "input", "tensor", "list"]),
    "flatten(list)": (lambda m, X, X4: m.flatten([[1., 2.]]), ["flatten", "input", "tensor", "list"]),
    "matmul(ndarray, t)": (lambda m, X, X4: m.matmul(np.ones((2, 4)), X), ["matmul", "input", "tensor", "ndarray"]),
    "allclose(list, t)": (lambda m, X, X4: m.allclose([1., 2.], m.tensor([1., 2.])), ["allclose", "input", "list"]),
    "sum(ndarray)": (lambda m, X, X4: m.sum(np.ones(2)), ["sum", "input", "tensor", "ndarray"]),
    "abs(list)": (lambda m, X, X4: m.abs([1., -2.]), ["abs", "input", "list"]),
    "argmax(ndarray)": (lambda m, X, X4: m.argmax(np.ones(2)), ["argmax", "input", "ndarray"]),
    "max(list)": (lambda m, X, X4: m.max([1., 2.]), ["max", "input", "list"]),
    "numel(list)": (lambda m, X, X4: m.numel([1., 2.]), ["numel", "input", "list"]),
    "softmax(list)": (lambda m, X, X4: m.softmax([1., 2.], 0), ["softmax", "input", "list"]),
    "zeros_like(list)": (lambda m, X, X4: m.zeros_like([1, 2]), ["zeros_like", "input", "list"]),
    "where(list cond)": (lambda m, X, X4: m.where([True, False], m.ones(2), m.zeros(2)),
                         ["where", "condition", "list"]),
    "input= keyword list": (lambda m, X, X4: m.exp(input=[1., 2.]), ["exp", "input", "list"]),
    "F.relu(ndarray)": (lambda m, X, X4: (VF if m is vl else torch.nn.functional).relu(np.ones(2)),
                        ["relu", "input", "tensor", "ndarray"]),
    "t + 'a'": (lambda m, X, X4: X + "a", ["unsupported operand", "tensor", "str"]),
    "t * None": (lambda m, X, X4: X * None, ["unsupported operand", "nonetype"]),
    # ---- dims out of range / repeated / inconsistent
    "roll(1, 5)": (lambda m, X, X4: X.roll(1, 5), ["roll", "dimension out of range", "[-2, 1]", "5"]),
    "flatten(x, 5)": (lambda m, X, X4: m.flatten(X, 5), ["flatten", "dimension out of range", "[-2, 1]", "5"]),
    "nn.Flatten(0, 5)": (lambda m, X, X4: m.nn.Flatten(0, 5)(X), ["flatten", "out of range", "5"]),
    "nn.Flatten(5) 4-d": (lambda m, X, X4: m.nn.Flatten(5)(X4), ["flatten", "out of range", "[-4, 3]", "5"]),
    "flatten(x4, 3, 1)": (lambda m, X, X4: m.flatten(X4, 3, 1), ["start_dim", "end_dim", "3", "1"]),
    "index_select(5)": (lambda m, X, X4: X.index_select(5, m.tensor([0])), ["index_select", "out of range", "5"]),
    "gather(5)": (lambda m, X, X4: X.gather(5, m.tensor([[0]])), ["gather", "out of range", "5"]),
    "scatter(5)": (lambda m, X, X4: X.scatter(5, m.tensor([[0]]), m.ones(1, 1)), ["scatter", "out of range"]),
    "mean(dim=(0, 0))": (lambda m, X, X4: X.mean(dim=(0, 0)), ["mean", "dim 0", "multiple times"]),
    "sum(dim=(0, -2))": (lambda m, X, X4: X.sum(dim=(0, -2)), ["sum", "dim 0", "multiple times"]),
    "flip(5)": (lambda m, X, X4: X.flip(5), ["flip", "out of range", "5"]),
    "any(5)": (lambda m, X, X4: X.any(5), ["any", "out of range", "5"]),
    "all(-3)": (lambda m, X, X4: X.all(-3), ["all", "out of range", "-3"]),
    "count_nonzero(x, 5)": (lambda m, X, X4: m.count_nonzero(X, 5), ["count_nonzero", "out of range", "5"]),
    "size(5)": (lambda m, X, X4: X.size(5), ["size", "dimension out of range", "[-2, 1]", "5"]),
    "unflatten(5)": (lambda m, X, X4: X.unflatten(5, (1, 1)), ["unflatten", "out of range", "5"]),
    "permute(0, 5)": (lambda m, X, X4: X.permute(0, 5), ["permute", "out of range", "5"]),
    # ---- dtypes
    "int64 @ float32": (lambda m, X, X4: m.tensor([[1, 2]]) @ m.ones(2, 2),
                        ["matmul", "same dtype", "long int != float"]),
    "float32 @ float64": (lambda m, X, X4: m.ones(2, 3) @ m.ones(3, 2, dtype=m.float64),
                          ["same dtype", "float != double"]),
    "mm float32, float64": (lambda m, X, X4: m.mm(m.ones(2, 3), m.ones(3, 2, dtype=m.float64)),
                            ["mm", "same dtype", "float", "double"]),
    "bmm float32, float64": (lambda m, X, X4: m.bmm(m.ones(1, 2, 3), m.ones(1, 3, 2, dtype=m.float64)),
                             ["bmm", "float", "double"]),
    "rand(int64)": (lambda m, X, X4: m.rand(2, dtype=m.int64), ["rand", "long", "int64"]),
    "randn(int64)": (lambda m, X, X4: m.randn(2, dtype=m.int64), ["randn", "long", "int64"]),
    "randn_like(int)": (lambda m, X, X4: m.randn_like(m.tensor([1, 2])), ["randn_like", "long"]),
    "rand_like(int)": (lambda m, X, X4: m.rand_like(m.tensor([1, 2])), ["rand_like", "long"]),
    "zeros(dtype='float32')": (lambda m, X, X4: m.zeros(2, dtype="float32"), ["zeros", "dtype", "str"]),
    "tensor(dtype='float32')": (lambda m, X, X4: m.tensor([1.], dtype="float32"), ["tensor", "dtype", "str"]),
    "ones(dtype='int64')": (lambda m, X, X4: m.ones(2, dtype="int64"), ["ones", "dtype", "str"]),
    "scatter_add f64 src": (lambda m, X, X4: m.zeros(3).scatter_add(0, m.tensor([0, 2, 0]),
                                                                 m.tensor([1., 2., 3.], dtype=m.float64)),
                            ["self.dtype", "src.dtype", "float32", "float64"]),
    # ---- Tensor methods and creation
    "chunk(0)": (lambda m, X, X4: X.chunk(0), ["chunks", "greater than 0", "0"]),
    "chunk(-1)": (lambda m, X, X4: X.chunk(-1), ["chunks", "greater than 0", "-1"]),
    "norm(p='foo')": (lambda m, X, X4: m.norm(X, p="foo"), ["norm", "order", "foo"]),
    "repeat(2) on 2-d": (lambda m, X, X4: X.repeat(2), ["repeat", "can not be smaller", "(4, 5)"]),
    "eye(-1)": (lambda m, X, X4: m.eye(-1), ["eye", "n must be greater or equal to 0", "-1"]),
    "eye(2.5)": (lambda m, X, X4: m.eye(2.5), ["eye", "'n'", "int", "float"]),
    "linspace(0, 1, -1)": (lambda m, X, X4: m.linspace(0, 1, -1), ["linspace", "steps", "non-negative", "-1"]),
    "to(123)": (lambda m, X, X4: m.ones(2).to(123), ["to(", "dtype", "device", "123"]),
    "view('a')": (lambda m, X, X4: m.ones(2).view("a"), ["view", "shape", "str", "'a'"]),
    "x[::-1]": (lambda m, X, X4: m.ones(4)[::-1], ["step must be greater than zero", "-1"]),
    "x[::0]": (lambda m, X, X4: m.ones(4)[::0], ["step cannot be zero"]),
    "from_numpy(list)": (lambda m, X, X4: m.from_numpy([1, 2]), ["expected np.ndarray", "list"]),
    "from_numpy(Tensor)": (lambda m, X, X4: m.from_numpy(m.ones(2)), ["expected np.ndarray", "tensor"]),
    # ---- more argument checks found while fixing the above
    "permute(0, 0)": (lambda m, X, X4: X.permute(0, 0), ["permute", "duplicate dims", "(0, 0)"]),
    "permute(0)": (lambda m, X, X4: X.permute(0), ["permute", "expected 2 dims", "got 1"]),
    "argmax(empty)": (lambda m, X, X4: m.ones(0).argmax(), ["argmax", "numel() == 0", "(0,)"]),
    "gather index OOB": (lambda m, X, X4: X.gather(1, m.tensor([[9]])), ["gather", "index 9", "out of bounds",
                                                                          "size 5"]),
    "scatter_add index OOB": (lambda m, X, X4: X.scatter_add(1, m.tensor([[9]]), m.ones(1, 1)),
                              ["scatter_add", "index 9", "out of bounds"]),
    "sum(dim='a')": (lambda m, X, X4: X.sum(dim="a"), ["sum", "dim", "str"]),
    "zeros(-1)": (lambda m, X, X4: m.zeros(-1), ["negative dimension -1"]),
    "full((2,), 'a')": (lambda m, X, X4: m.full((2,), "a"), ["full", "fill_value", "number", "str"]),
    "masked_fill(mask, 'a')": (lambda m, X, X4: X.masked_fill(X > 1, "a"), ["masked_fill", "value", "str"]),
    "clamp(min='a')": (lambda m, X, X4: X.clamp(min="a"), ["clamp", "min", "str"]),
    "split(0)": (lambda m, X, X4: X.split(0), ["split", "split_size", "0", "4"]),
    "narrow OOB": (lambda m, X, X4: X.narrow(0, 3, 5), ["narrow", "start (3)", "length (5)", "(4)"]),
    "index_select float index": (lambda m, X, X4: X.index_select(0, m.tensor([0.])),
                                 ["index_select", "int64", "float32"]),
    "index_select 2-d index": (lambda m, X, X4: X.index_select(0, m.tensor([[0]])), ["index_select", "vector"]),
    "index_select index OOB": (lambda m, X, X4: X.index_select(0, m.tensor([9])),
                               ["index_select", "out of range", "9", "size 4"]),
    "type('foo')": (lambda m, X, X4: X.type("foo"), ["invalid type", "foo"]),
    "einsum too few operands": (lambda m, X, X4: m.einsum("ij,jk", X), ["einsum", "2 operands", "1"]),
    "einsum mixed dtypes": (lambda m, X, X4: m.einsum("ij,jk->ik", X, m.ones(5, 2, dtype=m.float64)),
                            ["einsum", "expected scalar type float but found double"]),
    "where(float cond)": (lambda m, X, X4: m.where(X, X, X), ["where", "condition", "bool", "float32"]),
    "repeat(-1, 1)": (lambda m, X, X4: X.repeat(-1, 1), ["repeat", "negative dimension", "(-1, 1)"]),
    "randperm(-1)": (lambda m, X, X4: m.randperm(-1), ["randperm", "negative dimension -1"]),
    "randperm(2.5)": (lambda m, X, X4: m.randperm(2.5), ["randperm", "'n'", "int", "float"]),
    "outer(2-d)": (lambda m, X, X4: m.outer(X, X), ["outer", "1-d", "(4, 5)"]),
    "dot float32, float64": (lambda m, X, X4: m.dot(m.ones(3), m.ones(3, dtype=m.float64)),
                             ["dot", "same dtype", "float", "double"]),
    "unflatten sizes": (lambda m, X, X4: X.unflatten(1, (2, 2)), ["unflatten", "[2, 2]", "dim 1", "(5)"]),
    "chunk(2.5)": (lambda m, X, X4: X.chunk(2.5), ["chunk", "chunks", "int", "float"]),
    "flatten(0.5)": (lambda m, X, X4: X.flatten(0.5), ["flatten", "int", "float"]),
    "roll shifts/dims": (lambda m, X, X4: X.roll((1, 2), 0), ["roll", "shifts", "2", "dims", "1"]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_matches_torch(name):
    call, words = CASES[name]
    with pytest.raises(Exception) as te:
        call(*_lib(torch))
    with pytest.raises(Exception) as ve:
        call(*_lib(vl))
    assert ve.type is te.type, f"{name}: varlens raised {ve.type.__name__} ({ve.value}), torch {te.type.__name__}"
    msg = str(ve.value).lower()
    missing = [w for w in words if w.lower() not in msg]
    assert not missing, f"{name}: message {str(ve.value)!r} lacks {missing}"


def test_good_inputs_still_work():
    """The checks refuse only bad inputs: scalars, tuples of sizes, torch-style calls still run."""
    x = vl.tensor(X_NP)
    assert vl.pow(2, vl.ones(2)).tolist() == [2., 2.]
    assert vl.add(x, 1).shape == (4, 5)
    assert vl.rand((2, 3)).shape == (2, 3) and vl.randn([2]).shape == (2,)
    assert vl.zeros(2, dtype=vl.int64).dtype == vl.int64
    assert vl.rand(2, dtype=vl.float64).dtype == vl.float64
    assert vl.eye(2, 3).shape == (2, 3) and vl.linspace(0, 1, 0).shape == (0,)
    assert x.flatten(-2, -1).shape == (20,) and x.flatten(1, 1).shape == (4, 5)
    assert vl.tensor(3.).flatten().shape == (1,)
    assert x.roll(1, -1)[0, 0].item() == 4. and x.roll((1, 1), (0, 1)).shape == (4, 5)
    assert x.mean(dim=(0, 1)).item() == pytest.approx(9.5)
    assert x[::2].shape == (2, 5) and x[1:, ::2].shape == (3, 3)
    assert x.size(-1) == 5 and x.view(-1).shape == (20,) and x.to("cpu") is x
    assert x.to(vl.float64).dtype == vl.float64 and x.to(dtype=vl.float64).dtype == vl.float64
    assert x.repeat(1, 2).shape == (4, 10) and len(x.chunk(3)) == 2
    assert (vl.ones(2, 3) @ vl.ones(3, 2)).tolist() == [[3., 3.], [3., 3.]]
    assert (vl.tensor([[1, 2]]) @ vl.tensor([[3], [4]])).item() == 11
    assert vl.from_numpy(np.ones(2)).dtype == vl.float64
    assert x.flip(0)[0, 0].item() == 15. and x.any(1).shape == (4,)
    np.testing.assert_allclose(vl.norm(x, p=0).item(), torch.norm(torch.tensor(X_NP), p=0).item())
    np.testing.assert_allclose(vl.norm(x, p=float("-inf")).item(), 0.0)
    np.testing.assert_allclose(vl.norm(x, p="nuc").item(), torch.norm(torch.tensor(X_NP), p="nuc").item(),
                               rtol=1e-5)


def test_good_inputs_still_work_2():
    x = vl.tensor(X_NP)
    assert x.type("torch.DoubleTensor").dtype == vl.float64 and x.type(vl.int64).dtype == vl.int64
    assert x.index_select(0, vl.tensor([-1, 0]))[0, 0].item() == 15.
    assert len(x.split(2)) == 2 and len(vl.zeros(0, 3).split(0)) == 1
    assert x.narrow(0, 1, 3).shape == (3, 5) and x.unflatten(1, (5, -1)).shape == (4, 5, 1)
    assert x.permute(1, 0).shape == (5, 4) and x.repeat(0, 1).shape == (0, 5)
    assert vl.randperm(0).shape == (0,) and vl.full((2,), 3).dtype == vl.int64
    assert vl.einsum("ij,jk->ik", x, vl.ones(5, 2)).shape == (4, 2)
    assert x.clamp(min=vl.tensor(1.)).min().item() == 1.
    assert vl.outer(vl.ones(2), vl.ones(3)).shape == (2, 3)


def test_nn_flatten_uses_checked_flatten():
    with pytest.raises(IndexError, match="Dimension out of range"):
        vnn.Flatten(0, 5)(vl.tensor(X_NP))

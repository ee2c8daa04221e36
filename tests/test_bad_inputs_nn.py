"""Bad inputs to nn layers, losses, load_state_dict and optimiser construction, checked against
PyTorch: where torch raises, varlens raises an exception of the same type (isinstance) whose
message names the argument/layer and what was expected and what came; where torch works,
varlens works and gives the same values (and gradients where there are any)."""
import warnings

import numpy as np
import pytest
import torch

import varlens as vl
from conftest import assert_close

X45 = np.arange(20, dtype=np.float32).reshape(4, 5)


def T(lib, a, **kw):
    return lib.tensor(np.asarray(a), **kw)


def P(lib, a):
    return lib.nn.Parameter(lib.tensor(np.asarray(a, dtype=np.float32)))


def _linear_with_weight(lib, w, x):
    m = lib.nn.Linear(2, 2)
    m.weight = lib.nn.Parameter(T(lib, w))
    return m(T(lib, x))


# (id, f(lib) -> result, words the varlens message must contain (case-insensitive))
RAISES = [
    # ---- losses
    ("nll batch mismatch", lambda L: L.nn.NLLLoss()(T(L, X45), T(L, [0, 1])),
     ["input batch_size (4)", "target batch_size (2)"]),
    ("ce batch mismatch", lambda L: L.nn.CrossEntropyLoss()(T(L, X45), T(L, [0, 1])),
     ["input batch_size (4)", "target batch_size (2)"]),
    ("ce batch mismatch spatial", lambda L: L.nn.functional.cross_entropy(
        T(L, np.zeros((4, 3, 5), np.float32)), T(L, np.zeros((2, 5), np.int64))), ["batch_size (4)", "(2)"]),
    ("ce spatial target size", lambda L: L.nn.functional.cross_entropy(
        T(L, np.zeros((4, 3, 5), np.float32)), T(L, np.zeros((4, 6), np.int64))), ["target size [4, 5]", "[4, 6]"]),
    ("ce (N, 1) target", lambda L: L.nn.functional.cross_entropy(
        T(L, np.zeros((4, 3), np.float32)), T(L, np.zeros((4, 1), np.int64))), ["multi-target not supported", "(4, 1)"]),
    ("ce 1d input, 2 targets", lambda L: L.nn.functional.cross_entropy(T(L, [1., 2, 3]), T(L, [0, 1])),
     ["1D input", "size: 2"]),
    ("ce int32 target", lambda L: L.nn.CrossEntropyLoss()(T(L, X45), T(L, np.array([0, 1, 2, 3], np.int32))),
     ["target dtype", "Long or Byte", "got Int"]),
    ("nll int32 target", lambda L: L.nn.NLLLoss()(T(L, X45), T(L, np.array([0, 1, 2, 3], np.int32))),
     ["target dtype", "Long or Byte", "got Int"]),
    ("ce int16 target", lambda L: L.nn.functional.cross_entropy(T(L, X45), T(L, np.arange(4, dtype=np.int16))),
     ["Long or Byte", "Short"]),
    ("ce bool target", lambda L: L.nn.functional.cross_entropy(T(L, X45[:2, :2]), T(L, [True, False])),
     ["Long or Byte", "Bool"]),
    ("ce float target of index shape", lambda L: L.nn.CrossEntropyLoss()(T(L, X45), T(L, [0., 1, 2, 3])),
     ["target dtype", "Float", "(4, 5)"]),
    ("ce list target", lambda L: L.nn.CrossEntropyLoss()(T(L, X45), [0, 1, 2, 3]),
     ["argument 'target'", "must be Tensor", "list"]),
    ("ce ndarray input", lambda L: L.nn.CrossEntropyLoss()(np.ones((1, 2)), T(L, [0])),
     ["argument 'input'", "must be Tensor", "numpy.ndarray"]),
    ("nll list target", lambda L: L.nn.functional.nll_loss(T(L, X45), [0, 1, 2, 3]),
     ["argument 'target'", "list"]),
    ("mse list target", lambda L: L.nn.functional.mse_loss(T(L, X45), X45.tolist()), ["target", "list"]),
    ("mse ndarray both", lambda L: L.nn.MSELoss()(np.ones(2), np.ones(2)), ["input", "numpy.ndarray"]),
    ("l1 list target", lambda L: L.nn.functional.l1_loss(T(L, X45), X45.tolist()), ["target", "list"]),
    ("smooth_l1 float target", lambda L: L.nn.functional.smooth_l1_loss(T(L, X45), 1.0), ["target", "float"]),
    ("huber ndarray target", lambda L: L.nn.functional.huber_loss(T(L, X45), np.ones((4, 5))),
     ["target", "ndarray"]),
    ("bce list target", lambda L: L.nn.functional.binary_cross_entropy(T(L, X45 / 20), X45.tolist()),
     ["target", "list"]),
    ("bce_with_logits list target", lambda L: L.nn.functional.binary_cross_entropy_with_logits(
        T(L, X45), X45.tolist()), ["target", "list"]),
    ("kl_div list target", lambda L: L.nn.functional.kl_div(T(L, X45), X45.tolist(), reduction="sum"),
     ["argument 'target'", "list"]),
    ("soft_margin list target", lambda L: L.nn.functional.soft_margin_loss(T(L, X45), X45.tolist()),
     ["argument 'target'", "list"]),
    ("poisson_nll ndarray input", lambda L: L.nn.functional.poisson_nll_loss(np.ones((4, 5)), T(L, X45)),
     ["argument 'input'", "numpy.ndarray"]),
    ("multi_margin list target", lambda L: L.nn.functional.multi_margin_loss(T(L, X45), [0, 1, 2, 3]),
     ["argument 'target'", "list"]),
    ("bce long target", lambda L: L.nn.BCELoss()(T(L, X45 / 20), T(L, np.ones((4, 5), np.int64))),
     ["Found dtype Long", "expected Float"]),
    ("bce double target, float input", lambda L: L.nn.BCELoss()(T(L, X45 / 20), T(L, np.ones((4, 5)))),
     ["Found dtype Double", "expected Float"]),
    ("bce_with_logits long target", lambda L: L.nn.BCEWithLogitsLoss()(T(L, X45), T(L, np.ones((4, 5), np.int64))),
     ["Float", "Long"]),
    ("bce nan input", lambda L: L.nn.functional.binary_cross_entropy(T(L, [float("nan")]), T(L, [1.])),
     ["input should be between 0 and 1"]),
    ("bce input 2", lambda L: L.nn.functional.binary_cross_entropy(T(L, [0.5, 2.]), T(L, [1., 0.])),
     ["input should be between 0 and 1"]),
    ("bce input -0.1", lambda L: L.nn.BCELoss()(T(L, [-0.1, 0.5]), T(L, [1., 0.])),
     ["input should be between 0 and 1"]),
    # ---- layers
    ("groupnorm channels", lambda L: L.nn.GroupNorm(2, 4)(T(L, np.ones((2, 6, 3, 3), np.float32))),
     ["GroupNorm(2, 4)", "weight of shape [4]", "input of shape [2, 6, 3, 3]", "number of channels"]),
    ("groupnorm not divisible", lambda L: L.nn.GroupNorm(4, 4, affine=False)(T(L, np.ones((2, 6, 3), np.float32))),
     ["divisible by num_groups", "num_groups=4", "[2, 6, 3]"]),
    ("groupnorm 1-d input", lambda L: L.nn.GroupNorm(2, 4)(T(L, np.ones(4, np.float32))),
     ["at least 2 dimensions", "received 1"]),
    ("prelu channels", lambda L: L.nn.PReLU(3)(T(L, np.ones((2, 4, 4), np.float32))),
     ["parameter numbers = 3", "channel size = 4"]),
    ("prelu 1-d input", lambda L: L.nn.PReLU(3)(T(L, np.ones(3, np.float32))),
     ["parameter numbers = 3", "channel size = 1"]),
    ("prelu 0-d input", lambda L: L.nn.PReLU(3)(T(L, np.float32(1))), ["zero-dim"]),
    ("F.prelu channels", lambda L: L.nn.functional.prelu(T(L, np.ones((2, 4), np.float32)), P(L, [.1, .2])),
     ["parameter numbers = 2", "channel size = 4"]),
    ("linear replaced weight", lambda L: _linear_with_weight(L, np.ones((3, 3), np.float32), np.ones((1, 2), np.float32)),
     ["mat1 and mat2 shapes cannot be multiplied (1x2 and 3x3)"]),
    ("linear wrong input", lambda L: L.nn.Linear(2, 2)(T(L, np.ones((4, 1, 3), np.float32))),
     ["mat1 and mat2 shapes cannot be multiplied (4x3 and 2x2)"]),
    ("linear 0-d input", lambda L: L.nn.Linear(2, 2)(T(L, np.float32(1))), ["at least 1D", "0D"]),
    ("F.linear wrong input", lambda L: L.nn.functional.linear(T(L, np.ones((5, 3), np.float32)), P(L, np.ones((2, 2)))),
     ["mat1 and mat2 shapes cannot be multiplied (5x3 and 2x2)"]),
    ("linear ndarray input", lambda L: L.nn.Linear(5, 3)(np.ones((2, 5), np.float32)),
     ["argument 'input'", "must be Tensor", "numpy.ndarray"]),
    ("hardtanh min > max", lambda L: L.nn.Hardtanh(1., -1.), ["max_val (-1.0)", "greater than min_val (1.0)"]),
    ("hardtanh min == max", lambda L: L.nn.Hardtanh(1., 1.), ["max_val", "min_val"]),
    ("F.hardtanh min > max", lambda L: L.nn.functional.hardtanh(T(L, [1.]), 1., -1.), ["min_val", "max_val"]),
    ("embedding negative rows", lambda L: L.nn.Embedding(-1, 3), ["negative dimension -1", "[-1, 3]"]),
    ("embedding negative dim", lambda L: L.nn.Embedding(3, -2), ["negative dimension -2", "[3, -2]"]),
    ("mha num_heads 0", lambda L: L.nn.MultiheadAttention(4, 0), ["num_heads=0", "embed_dim=4", "greater than 0"]),
    ("mha embed_dim 0", lambda L: L.nn.MultiheadAttention(0, 1), ["embed_dim=0", "greater than 0"]),
    ("mha not divisible", lambda L: L.nn.MultiheadAttention(4, 3), ["embed_dim must be divisible by num_heads"]),
    ("batchnorm int64", lambda L: L.nn.BatchNorm1d(5)(T(L, np.ones((4, 5), np.int64))),
     ["batch_norm", "not implemented for 'Long'"]),
    ("batchnorm int64 eval", lambda L: L.nn.BatchNorm1d(5).eval()(T(L, np.ones((4, 5), np.int64))),
     ["not implemented for 'Long'"]),
    ("batchnorm one value per channel", lambda L: L.nn.BatchNorm1d(3)(T(L, np.ones((1, 3), np.float32))),
     ["more than 1 value per channel", "(1, 3)"]),
    ("dropout int64", lambda L: L.nn.Dropout(0.5)(T(L, [[1, 2, 3, 4]])), ["Float", "Long"]),
    ("F.dropout int64", lambda L: L.nn.functional.dropout(T(L, [[1, 2, 3, 4]]), 0.5), ["Float", "Long"]),
    ("dropout bool", lambda L: L.nn.Dropout(0.5)(T(L, [True, False])), ["Float", "Bool"]),
    ("dropout2d int64", lambda L: L.nn.Dropout2d(0.5)(T(L, np.ones((1, 2, 3, 3), np.int64))), ["Float", "Long"]),
    ("avgpool2d int32", lambda L: L.nn.AvgPool2d(2)(T(L, np.ones((1, 1, 4, 4), np.int32))),
     ["avg_pool2d", "not implemented for 'Int'"]),
    ("adaptive avgpool int64", lambda L: L.nn.AdaptiveAvgPool2d(2)(T(L, np.ones((1, 1, 4, 4), np.int64))),
     ["adaptive_avg_pool2d", "not implemented for 'Long'"]),
    ("adaptive avgpool negative", lambda L: L.nn.AdaptiveAvgPool2d(-1)(T(L, np.ones((1, 1, 4, 4), np.float32))),
     ["output_size", "greater than or equal to 0"]),
    ("batchnorm channels", lambda L: L.nn.BatchNorm2d(3)(T(L, np.ones((2, 4, 5, 5), np.float32))),
     ["running_mean should contain 4 elements not 3", "BatchNorm2d(3)"]),
    ("batchnorm channels, no stats", lambda L: L.nn.BatchNorm1d(3, track_running_stats=False)(
        T(L, np.ones((2, 4), np.float32))), ["weight should contain 4 elements not 3"]),
    ("layernorm int64", lambda L: L.nn.LayerNorm(5)(T(L, np.ones((4, 5), np.int64))), ["not implemented for 'Long'"]),
    ("prelu int64", lambda L: L.nn.PReLU()(T(L, [-1, 2])), ["Type promoting not supported", "Long and Float"]),
    ("prelu float64", lambda L: L.nn.PReLU()(T(L, np.ones(3))), ["Double and Float"]),
    ("conv negative in_channels", lambda L: L.nn.Conv2d(-3, 4, 3), ["in_channels", "-3"]),
    ("linear negative in_features", lambda L: L.nn.Linear(-1, 2), ["negative dimension -1", "in_features"]),
    ("linear float in_features", lambda L: L.nn.Linear(2.5, 2), ["2.5"]),
    ("embedding float indices", lambda L: L.nn.Embedding(5, 3)(T(L, [1., 2.])), ["indices", "Long, Int", "float"]),
    ("embedding padding_idx", lambda L: L.nn.Embedding(5, 3, padding_idx=5), ["Padding_idx must be within num_embeddings"]),
    ("maxpool padding > k/2", lambda L: L.nn.MaxPool2d(2, padding=2)(T(L, np.ones((1, 1, 4, 4), np.float32))),
     ["pad should be at most half", "padding=(2, 2)"]),
    ("avgpool padding > k/2", lambda L: L.nn.AvgPool2d(2, padding=2)(T(L, np.ones((1, 1, 4, 4), np.float32))),
     ["pad should be at most half"]),
    ("mha query features", lambda L: L.nn.MultiheadAttention(4, 2)(*(T(L, np.ones((3, 2, 5), np.float32)),) * 3),
     ["expecting embedding dimension of 4, but got 5"]),
    ("mha key/value lengths", lambda L: L.nn.MultiheadAttention(4, 2)(
        T(L, np.ones((3, 2, 4), np.float32)), T(L, np.ones((5, 2, 4), np.float32)), T(L, np.ones((4, 2, 4), np.float32))),
     ["key shape", "(5, 2, 4)", "does not match value shape", "(4, 2, 4)"]),
    ("ce weight shape", lambda L: L.nn.CrossEntropyLoss(weight=T(L, np.ones(4, np.float32)))(
        T(L, np.ones((3, 5), np.float32)), T(L, [0, 1, 1])), ["all 5 classes", "[4]"]),
    ("ce label_smoothing", lambda L: L.nn.CrossEntropyLoss(label_smoothing=1.5)(
        T(L, np.ones((3, 5), np.float32)), T(L, [0, 1, 1])), ["label_smoothing", "1.5"]),
    ("mse shapes", lambda L: L.nn.MSELoss()(T(L, np.ones((3, 5), np.float32)), T(L, np.ones((3, 4), np.float32))),
     ["(3, 5)", "(3, 4)"]),
    ("mse int int", lambda L: L.nn.MSELoss()(T(L, np.ones((3, 5), np.int64)), T(L, np.ones((3, 5), np.int64))),
     ["mse", "not implemented for 'Long'"]),
    ("huber delta", lambda L: L.nn.HuberLoss(delta=-1)(T(L, X45), T(L, X45)), ["delta"]),
    ("smooth_l1 beta", lambda L: L.nn.SmoothL1Loss(beta=-1)(T(L, X45), T(L, X45)), ["beta"]),
    ("groupnorm 0 groups", lambda L: L.nn.GroupNorm(0, 4), []),
    ("nll weight shape", lambda L: L.nn.NLLLoss(weight=T(L, np.ones(4, np.float32)))(
        T(L, np.ones((3, 5), np.float32)), T(L, [0, 1, 1])), ["all 5 classes", "[4]"]),
    ("ce weight list", lambda L: L.nn.functional.cross_entropy(T(L, np.ones((3, 5), np.float32)), T(L, [0, 1, 1]),
                                                               weight=[1.] * 5), ["argument 'weight'", "list"]),
    ("bce weight list", lambda L: L.nn.functional.binary_cross_entropy(
        T(L, np.full(3, .5, np.float32)), T(L, np.ones(3, np.float32)), weight=[1., 2., 3.]), ["weight", "list"]),
    ("gaussian_nll var list", lambda L: L.nn.GaussianNLLLoss()(T(L, np.ones(3, np.float32)), T(L, np.ones(3, np.float32)),
                                                               [1., 2., 3.]), ["var", "list"]),
    ("pad odd length", lambda L: L.nn.functional.pad(T(L, np.ones((2, 3), np.float32)), (1,)), ["divisible by 2", "(1,)"]),
    ("pad too long", lambda L: L.nn.functional.pad(T(L, np.ones((2, 3), np.float32)), (1,) * 6),
     ["less than or equal to two times the input dimension"]),
    ("pad mode", lambda L: L.nn.functional.pad(T(L, np.ones((1, 2, 3), np.float32)), (1, 1), mode="foo"),
     ["padding mode foo"]),
    ("rnn float input_size", lambda L: L.nn.RNN(5.5, 4), ["input_size", "5.5"]),
    ("lstm input dtype", lambda L: L.nn.LSTM(5, 4)(T(L, np.ones((3, 2, 5)))), ["float64", "float32"]),
    ("optimizer group without params", lambda L: L.optim.SGD([{"lr": 0.1}], lr=0.1), ["params"]),
    # ---- load_state_dict
    ("state_dict None", lambda L: L.nn.Linear(2, 2).load_state_dict({"weight": None, "bias": L.zeros(2)}),
     ['While copying the parameter named "weight"', "Tensor-like object", "<class 'NoneType'>"]),
    ("state_dict lists", lambda L: L.nn.Linear(5, 3).load_state_dict(
        {"weight": np.ones((3, 5)).tolist(), "bias": [0., 0, 0]}),
     ['parameter named "weight"', 'parameter named "bias"', "<class 'list'>"]),
    ("state_dict int, strict=False", lambda L: L.nn.Linear(2, 2).load_state_dict({"weight": 3}, strict=False),
     ['parameter named "weight"', "<class 'int'>"]),
    ("state_dict buffer None", lambda L: L.nn.BatchNorm1d(3).load_state_dict(
        {**L.nn.BatchNorm1d(3).state_dict(), "running_mean": None}), ['named "running_mean"', "NoneType"]),
]


def _run(fn, lib):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(lib), None
        except Exception as e:  # noqa: BLE001 - the exception is what is compared
            return None, e


@pytest.mark.parametrize("name,fn,words", RAISES, ids=[c[0] for c in RAISES])
def test_raises_like_torch(name, fn, words):
    _, te = _run(fn, torch)
    assert te is not None, f"{name}: torch no longer raises (the case is stale)"
    with pytest.raises(Exception) as ei:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn(vl)
    e = ei.value
    assert isinstance(e, type(te)), f"{name}: varlens raised {type(e).__name__}: {e}; torch {type(te).__name__}: {te}"
    msg = str(e).lower()
    for w in words:
        assert w.lower() in msg, f"{name}: {w!r} not in {e!s}"


def test_hardtanh_error_is_also_a_value_error():
    # varlens convention for a bad constructor argument; torch's type (AssertionError) works too
    with pytest.raises(ValueError):
        vl.nn.Hardtanh(2., 1.)
    with pytest.raises(AssertionError):
        vl.nn.MultiheadAttention(6, 4)


def test_conv_kernel_size_tuple_of_wrong_length():
    # torch builds the layer with a 3-d weight and fails at the first forward (RuntimeError);
    # varlens refuses at construction with a RuntimeError that is also a ValueError
    x = np.ones((1, 3, 5, 5), np.float32)
    with pytest.raises(RuntimeError):
        torch.nn.Conv2d(3, 4, (3,))(torch.tensor(x))
    for exc in (RuntimeError, ValueError):
        with pytest.raises(exc, match=r"Conv2d: kernel_size must be an int or a tuple of 2 ints, got \(3,\)"):
            vl.nn.Conv2d(3, 4, (3,))
    with pytest.raises(ValueError, match="kernel_size"):
        vl.nn.Conv2d(3, 4, (3, 3, 3))
    with pytest.raises(ValueError, match="kernel_size"):
        vl.nn.Conv1d(3, 4, (3, 3))
    assert vl.nn.Conv2d(3, 4, (3, 2)).weight.shape == (4, 3, 3, 2)


def test_not_a_tensor_error_is_type_and_attribute_error():
    # torch: F.mse_loss(x, list) -> AttributeError ('list' has no .size), F.mse_loss(x, ndarray) -> TypeError
    x = vl.tensor(X45)
    for exc in (TypeError, AttributeError):
        with pytest.raises(exc, match=r"mse_loss\(\): argument 'target' \(position 2\) must be Tensor, not list"):
            vl.nn.functional.mse_loss(x, X45.tolist())


# a Python list where an nn.functional op needs a Tensor, in each position that takes one:
# (name, arguments with "L" marking the list, torch's name of that argument, its position)
_LIST_CASES = [
    ("linear", [(3, 4), "L"], "weight", 2), ("linear", [(3, 4), (2, 4), "L"], "bias", 3),
    ("bilinear", [(3, 4), "L", (2, 4, 5)], "input2", 2), ("bilinear", [(3, 4), (3, 5), "L"], "weight", 3),
    ("layer_norm", ["L", [4]], "input", 1), ("rms_norm", ["L", [4]], "input", 1),
    ("group_norm", ["L", 1], "input", 1), ("prelu", [(3, 4), "L"], "weight", 2),
    ("batch_norm", [(3, 4), "L", None], "running_mean", 2),
    ("instance_norm", [(2, 4, 3), "L"], "running_mean", 2),
    ("nll_loss", [(3, 4), "L"], "target", 2),
    ("binary_cross_entropy_with_logits", [(3, 4), (3, 4), "L"], "weight", 3),
    ("triplet_margin_loss", [(3, 4), "L", (3, 4)], "positive", 2),
    ("cosine_similarity", [(3, 4), "L"], "x2", 2), ("pairwise_distance", [(3, 4), "L"], "x2", 2),
    ("gumbel_softmax", ["L"], "logits", 1), ("one_hot", ["L"], "input", 1),
    ("scaled_dot_product_attention", [(1, 3, 4), "L", (1, 3, 4)], "key", 2),
    ("conv_tbc", [(5, 2, 3), (3, 3, 4), "L"], "bias", 3),
]


@pytest.mark.parametrize("name,args,argname,pos", _LIST_CASES, ids=[f"{c[0]}-{c[2]}" for c in _LIST_CASES])
def test_functional_ops_refuse_a_list_where_torch_needs_a_tensor(name, args, argname, pos):
    """A list in a Tensor position raises TypeError naming the argument and its position (torch's
    argument-parser message), before the op reads .shape or ._data from it; where torch's
    Python-side op raises AttributeError instead, varlens' error is also one."""
    def build(lib):
        out = []
        for a in args:
            if a == "L":
                out.append([[1.0, 2.0, 3.0, 4.0]] * 3 if name != "one_hot" else [0, 1])
            elif isinstance(a, tuple):
                out.append(lib.ones(*a))
            else:
                out.append(a)
        return out
    with pytest.raises((TypeError, AttributeError)) as torch_error:   # (AttributeError: torch's Python-side ops)
        getattr(torch.nn.functional, name)(*build(torch))
    with pytest.raises(TypeError, match=rf"argument '{argname}' \(position {pos}\) must be Tensor, not list") as e:
        getattr(vl.nn.functional, name)(*build(vl))
    assert isinstance(e.value, torch_error.type), (type(e.value), torch_error.type)


# ---- where torch works, varlens works and matches
def _same(a, b, what):
    if isinstance(a, tuple):
        for u, v in zip(a, b):
            _same(u, v, what)
        return
    assert_close(a, b, rtol=1e-6, atol=1e-6, what=what)
    assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1], f"{what}: dtype {a.dtype} vs {b.dtype}"


I44 = np.arange(16).reshape(1, 1, 4, 4) - 7
WORKS = [
    ("avgpool2d int64", lambda L: L.nn.AvgPool2d(2)(T(L, I44))),
    ("avgpool2d int64 pad", lambda L: L.nn.AvgPool2d(3, stride=2, padding=1)(T(L, -np.arange(16).reshape(1, 1, 4, 4)))),
    ("avgpool2d int64 no pad count", lambda L: L.nn.functional.avg_pool2d(
        T(L, -np.arange(16).reshape(1, 1, 4, 4)), 3, 3, 1, count_include_pad=False)),
    ("avgpool1d int64", lambda L: L.nn.AvgPool1d(2)(T(L, np.arange(6).reshape(1, 1, 6) - 4))),
    ("avgpool3d int64", lambda L: L.nn.AvgPool3d(2)(T(L, np.arange(16).reshape(1, 1, 2, 2, 4) - 9))),
    ("adaptive avgpool 0", lambda L: L.nn.AdaptiveAvgPool2d(0)(T(L, np.ones((2, 3, 6, 6), np.float32)))),
    ("adaptive avgpool (0, 2)", lambda L: L.nn.AdaptiveAvgPool2d((0, 2))(T(L, np.ones((1, 1, 4, 4), np.float32)))),
    ("adaptive avgpool1d 0", lambda L: L.nn.AdaptiveAvgPool1d(0)(T(L, np.ones((2, 3, 6), np.float32)))),
    ("adaptive maxpool 0", lambda L: L.nn.AdaptiveMaxPool2d(0)(T(L, np.ones((1, 1, 4, 4), np.float32)))),
    ("layernorm(0) on (2, 0)", lambda L: L.nn.LayerNorm(0)(T(L, np.ones((2, 0), np.float32)))),
    ("layernorm on empty batch", lambda L: L.nn.LayerNorm(4)(T(L, np.ones((0, 4), np.float32)))),
    ("batchnorm1d empty batch", lambda L: L.nn.BatchNorm1d(3)(T(L, np.zeros((0, 3), np.float32)))),
    ("batchnorm1d empty batch eval", lambda L: L.nn.BatchNorm1d(3).eval()(T(L, np.zeros((0, 3), np.float32)))),
    ("batchnorm2d empty batch", lambda L: L.nn.BatchNorm2d(3)(T(L, np.zeros((0, 3, 2, 2), np.float32)))),
    ("groupnorm no affine, other channel count", lambda L: L.nn.GroupNorm(2, 4, affine=False)(
        T(L, np.arange(24, dtype=np.float32).reshape(2, 6, 2)))),
    ("dropout int64 eval", lambda L: L.nn.Dropout(0.5).eval()(T(L, [[1, 2, 3, 4]]))),
    ("dropout int64 p=0", lambda L: L.nn.Dropout(0.)(T(L, [[1, 2, 3, 4]]))),
    ("dropout int64 p=1", lambda L: L.nn.Dropout(1.)(T(L, [[1, 2, 3, 4]]))),
    ("ce uint8 target", lambda L: L.nn.CrossEntropyLoss()(T(L, X45 / 10), T(L, np.array([0, 1, 2, 3], np.uint8)))),
    ("nll uint8 target", lambda L: L.nn.NLLLoss()(T(L, X45 / 10), T(L, np.array([0, 1, 2, 3], np.uint8)))),
    ("ce 1-d input, (1,) target", lambda L: L.nn.functional.cross_entropy(T(L, X45[0] / 10), T(L, [2]),
                                                                        reduction="none")),
    ("nll 1-d input", lambda L: L.nn.NLLLoss()(T(L, X45[0] / 10), T(L, np.int64(2)))),
    ("nll spatial", lambda L: L.nn.NLLLoss()(T(L, np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 10),
                                             T(L, np.array([[0, 1, 2, 0], [2, 2, 1, 0]])))),
    ("bce in [0, 1]", lambda L: L.nn.BCELoss()(T(L, [0., .5, 1.]), T(L, [0., 1., 1.]))),
    ("prelu 1 parameter", lambda L: L.nn.PReLU()(T(L, np.linspace(-1, 1, 12, dtype=np.float32).reshape(2, 3, 2)))),
    ("relu6 int64 stays int", lambda L: L.nn.ReLU6()(T(L, [-1, 3, 7]))),
    ("batchnorm without stats or affine takes any C", lambda L: L.nn.BatchNorm1d(
        3, affine=False, track_running_stats=False)(T(L, np.arange(8, dtype=np.float32).reshape(2, 4)))),
    ("mse int target", lambda L: L.nn.MSELoss()(T(L, X45), T(L, np.ones((4, 5), np.int64)))),
]


@pytest.mark.parametrize("name,fn", WORKS, ids=[c[0] for c in WORKS])
def test_works_like_torch(name, fn):
    tr, te = _run(fn, torch)
    assert te is None, f"{name}: torch now raises {te!r} (the case is stale)"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        vr = fn(vl)
    _same(vr, tr, name)


def test_empty_batchnorm_keeps_running_stats_and_backprops():
    for lib in (vl, torch):
        m = lib.nn.BatchNorm1d(3)
        x = lib.zeros(0, 3, requires_grad=True)
        y = m(x)
        y.sum().backward()
        assert tuple(y.shape) == (0, 3) and tuple(x.grad.shape) == (0, 3)
        np.testing.assert_array_equal(np.asarray(m.running_mean.detach()), 0)
        np.testing.assert_array_equal(np.asarray(m.running_var.detach()), 1)
        assert int(m.num_batches_tracked) == 1
        np.testing.assert_array_equal(np.asarray(m.weight.grad), 0)


def test_empty_layernorm_backprops_zero_grads():
    for lib in (vl, torch):
        m = lib.nn.LayerNorm(4)
        x = lib.ones(0, 4, requires_grad=True)
        m(x).sum().backward()
        assert tuple(x.grad.shape) == (0, 4)
        np.testing.assert_array_equal(np.asarray(m.weight.grad), 0)
        np.testing.assert_array_equal(np.asarray(m.bias.grad), 0)


def test_load_state_dict_still_takes_arrays_and_torch_tensors():
    m = vl.nn.Linear(3, 2)
    m.load_state_dict({"weight": np.ones((2, 3)), "bias": torch.zeros(2)})
    np.testing.assert_array_equal(m.weight._data, 1)
    np.testing.assert_array_equal(m.bias._data, 0)


def test_type_errors_in_state_dict_listed_with_size_mismatches():
    with pytest.raises(RuntimeError) as ei:
        vl.nn.Linear(3, 2).load_state_dict({"weight": None, "bias": np.zeros(5)})
    msg = str(ei.value)
    assert 'parameter named "weight"' in msg and "size mismatch for bias" in msg and "(5,)" in msg


def test_duplicate_parameter_with_momentum_warns_and_works():
    # torch gives each occurrence its own fresh momentum buffer on the first step only (an artefact
    # of how it collects the buffers before the loop); varlens shares one buffer from the start
    p = vl.nn.Parameter(vl.tensor(np.array([1., -2., 3.], np.float32)))
    with pytest.warns(UserWarning, match="duplicate parameters"):
        o = vl.optim.SGD([p, p], lr=0.1, momentum=0.9)
    for _ in range(3):
        o.zero_grad()
        (p * p).sum().backward()
        o.step()
    assert np.isfinite(p._data).all() and not np.allclose(p._data, [1., -2., 3.])


@pytest.mark.parametrize("opt,kw", [("SGD", {"lr": 0.1}), ("Adam", {"lr": 0.1}), ("AdamW", {"lr": 0.1})])
def test_duplicate_parameter_warns_and_steps_like_torch(opt, kw):
    res = {}
    for lib in (vl, torch):
        p = lib.nn.Parameter(lib.tensor(np.array([1., -2., 3.], np.float32)))
        with pytest.warns(UserWarning, match="duplicate parameters"):
            o = getattr(lib.optim, opt)([p, p], **kw)
        assert len(o.param_groups[0]["params"]) == 2
        for _ in range(3):
            o.zero_grad()
            (p * p).sum().backward()
            o.step()
        res[lib] = p
    assert_close(res[vl], res[torch], rtol=1e-5, atol=1e-6, what=f"{opt} {kw}")


def test_parameter_in_two_groups_still_raises():
    p = vl.nn.Parameter(vl.ones(2))
    with pytest.raises(ValueError, match="more than one parameter group"):
        vl.optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1)


def test_unflatten_dim_out_of_range():
    x = np.ones((4, 5), np.float32)
    for d in (5, -3):
        with pytest.raises(IndexError, match=r"expected to be in range of \[-2, 1\], but got " + str(d)):
            torch.nn.Unflatten(d, (1, 1))(torch.tensor(x))
        with pytest.raises(IndexError, match=r"expected to be in range of \[-2, 1\], but got " + str(d)):
            vl.nn.Unflatten(d, (1, 1))(vl.tensor(x))
    assert vl.nn.Unflatten(-1, (5, 1))(vl.tensor(x)).shape == (4, 5, 1)

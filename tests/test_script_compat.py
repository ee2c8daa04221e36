"""Things ordinary PyTorch scripts do that a second probe found broken: causal masks built with
triu/tril of -inf, Adam on a 0-d parameter, StepLR with a float step, CUDA housekeeping calls,
torch.utils.checkpoint, autograd.grad(only_inputs=...), version gates, memory formats."""
import numpy as np
import pytest
import torch

import varlens as vl


@pytest.mark.parametrize("fn,diag", [("triu", 1), ("tril", 0), ("triu", -1), ("tril", 2)])
def test_triu_tril_keep_inf_and_nan_outside_the_triangle_as_zeros(fn, diag):
    a = np.full((3, 4), -np.inf)
    a[0, 1] = np.nan
    v = getattr(vl, fn)(vl.tensor(a), diagonal=diag).numpy()
    t = getattr(torch, fn)(torch.tensor(a), diagonal=diag).numpy()
    np.testing.assert_array_equal(v, t)
    x = vl.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    tx = torch.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    getattr(vl, fn)(x, diagonal=diag).pow(2).sum().backward()
    getattr(torch, fn)(tx, diagonal=diag).pow(2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())


@pytest.mark.parametrize("cls,kw", [("Adam", {}), ("AdamW", {}), ("Adam", {"amsgrad": True, "weight_decay": 0.1}),
                                    ("AdamW", {"maximize": True})])
def test_adam_on_a_zero_dim_parameter_matches_torch(cls, kw):
    p = vl.nn.Parameter(vl.tensor(0.5, dtype=vl.float64))
    q = vl.nn.Parameter(vl.tensor([1.0, -2.0], dtype=vl.float64))
    tp = torch.nn.Parameter(torch.tensor(0.5, dtype=torch.float64))
    tq = torch.nn.Parameter(torch.tensor([1.0, -2.0], dtype=torch.float64))
    o = getattr(vl.optim, cls)([p, q], lr=0.1, **kw)
    to = getattr(torch.optim, cls)([tp, tq], lr=0.1, **kw)
    for _ in range(5):
        o.zero_grad()
        to.zero_grad()
        (p ** 2 * 3 + (q * p).sum()).backward()
        (tp ** 2 * 3 + (tq * tp).sum()).backward()
        o.step()
        to.step()
    assert p.shape == () and abs(p.item() - tp.item()) < 1e-12
    np.testing.assert_allclose(q.detach().numpy(), tq.detach().numpy(), rtol=1e-12)


def test_steplr_accepts_an_integer_valued_float_step_as_torch():
    for lib in (vl, torch):
        opt = lib.optim.SGD([lib.nn.Parameter(lib.zeros(1))], lr=1.0)
        s = lib.optim.lr_scheduler.StepLR(opt, 1.0, gamma=0.5)
        lrs = []
        for _ in range(3):
            opt.step()
            s.step()
            lrs.append(opt.param_groups[0]["lr"])
        assert lrs == [0.5, 0.25, 0.125]
    with pytest.raises(ValueError, match="step_size"):
        vl.optim.lr_scheduler.StepLR(vl.optim.SGD([vl.nn.Parameter(vl.zeros(1))], lr=1.0), 0.5)


def test_cuda_housekeeping_checkpoint_version_and_grad_options():
    vl.cuda.empty_cache()
    assert vl.cuda.memory_allocated() == 0 and not vl.cuda.is_available()
    assert vl.version.cuda is None and isinstance(vl.__version__, str)
    from varlens.autograd.function import once_differentiable
    from varlens.utils.checkpoint import checkpoint, checkpoint_sequential
    m = vl.nn.Sequential(vl.nn.Linear(3, 4), vl.nn.Tanh(), vl.nn.Linear(4, 1))
    x = vl.randn(5, 3, requires_grad=True)
    y1 = checkpoint(m, x, use_reentrant=False)
    y2 = checkpoint_sequential(m, 2, x)
    np.testing.assert_array_equal(y1.detach().numpy(), m(x).detach().numpy())
    np.testing.assert_array_equal(y2.detach().numpy(), y1.detach().numpy())
    g1, = vl.autograd.grad(y1.sum(), x, only_inputs=True, retain_graph=True)
    g2, = vl.autograd.grad(m(x).sum(), x)
    np.testing.assert_array_equal(g1.numpy(), g2.numpy())
    assert once_differentiable(len) is len
    assert repr(vl.channels_last) == "varlens.channels_last"
    assert vl.utils.checkpoint.checkpoint is checkpoint


@pytest.mark.parametrize("name,kw", [("SGD", {"lr": 0.1, "momentum": 0.9}), ("Adam", {}), ("AdamW", {}),
                                     ("RMSprop", {}), ("Adagrad", {}), ("Adadelta", {})])
def test_optimizer_defaults_keys_and_repr_are_torchs(name, kw):
    v = getattr(vl.optim, name)([vl.nn.Parameter(vl.zeros(2))], **kw)
    t = getattr(torch.optim, name)([torch.nn.Parameter(torch.zeros(2))], **kw)
    assert repr(v) == repr(t)
    assert list(v.state_dict()["param_groups"][0]) == list(t.state_dict()["param_groups"][0])


def test_the_notes_optimizer_variants_are_stored_only_when_used():
    p = [vl.nn.Parameter(vl.zeros(2))]
    assert vl.optim.SGD(p, lr=0.1, momentum=0.9, momentum_style="ema").param_groups[0]["momentum_style"] == "ema"
    assert vl.optim.Adam(p, eps_inside_sqrt=True).param_groups[0]["eps_inside_sqrt"] is True
    assert "eps_inside_sqrt" not in vl.optim.Adam(p).param_groups[0]
    r = vl.optim.RMSprop(p, bias_correction=True).param_groups[0]
    assert r["bias_correction"] is True and "eps_inside_sqrt" not in r


def test_retains_grad_and_memory_format_keywords():
    for T in (vl, torch):
        x = T.ones(2, requires_grad=True)
        y = x * 2
        assert not x.retains_grad and not y.retains_grad
        y.retain_grad()
        y.retain_grad()                 # a second call changes nothing
        (y * 3).sum().backward()
        assert y.retains_grad and y.grad.tolist() == [3.0, 3.0]
        z = T.randn(2, 3)
        for make in (lambda: T.zeros_like(z, memory_format=T.preserve_format),
                     lambda: T.empty_like(z, memory_format=T.preserve_format),
                     lambda: T.full_like(z, 2.0, memory_format=T.preserve_format),
                     lambda: z.clone(memory_format=T.contiguous_format),
                     lambda: z.contiguous(memory_format=T.contiguous_format)):
            assert tuple(make().shape) == (2, 3)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_on_transposed_logits_matches_torch(reduction):
    a = np.array([[1.0, 2, 0], [0, 1, 3], [2, 0, 1]])
    x, tx = vl.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, ty = vl.tensor([0, 1, 2]), torch.tensor([0, 1, 2])
    lv = vl.nn.functional.cross_entropy(x.t(), y, reduction=reduction)
    lt = torch.nn.functional.cross_entropy(tx.t(), ty, reduction=reduction)
    lv.sum().backward()
    lt.sum().backward()
    np.testing.assert_allclose(lv.detach().numpy(), lt.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-15)


def test_unique_along_a_dim_and_numpy_scalar_dtypes_match_torch():
    a = np.array([[1, 2], [3, 4], [1, 2], [0, 5]])
    for d in (0, 1, -1):
        v = vl.unique(vl.tensor(a), dim=d, return_inverse=True, return_counts=True)
        t = torch.unique(torch.tensor(a), dim=d, return_inverse=True, return_counts=True)
        for x, y in zip(v, t):
            np.testing.assert_array_equal(x.numpy(), y.numpy())
    with pytest.raises(IndexError, match="Dimension out of range"):
        vl.unique(vl.tensor(a), dim=2)
    for s in (np.int32(3), np.int16(2), np.float64(1.5), np.float32(2.5), np.uint8(7)):
        assert str(vl.tensor(s).dtype) == str(torch.tensor(s).dtype).replace("torch.", "")


@pytest.mark.parametrize("name", ["gelu", "sigmoid", "silu", "tanh", "elu", "leaky_relu", "softplus", "mish",
                                  "hardswish", "softsign", "normalize", "dropout", "relu6", "logsigmoid"])
def test_functional_activations_refuse_arrays_and_lists_as_torch(name):
    for bad in (np.ones(3), [1.0, 2.0]):
        with pytest.raises(Exception) as tt:
            getattr(torch.nn.functional, name)(bad)
        with pytest.raises(type(tt.value)) as tv:       # torch's exception type (TypeError or AttributeError)
            getattr(vl.nn.functional, name)(bad)
        assert "argument 'input' (position 1) must be Tensor, not " in str(tv.value)
        if isinstance(tt.value, TypeError):
            assert str(tv.value) == str(tt.value)
    x = np.linspace(-2, 2, 6).reshape(2, 3)
    if name != "dropout":
        np.testing.assert_allclose(getattr(vl.nn.functional, name)(vl.tensor(x)).numpy(),
                                   getattr(torch.nn.functional, name)(torch.tensor(x)).numpy(), rtol=1e-6, atol=1e-7)


def test_return_types_print_and_unpack_as_torch():
    x = [[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]]
    for f in (lambda T: T.sort(T.tensor(x)), lambda T: T.tensor(x).max(dim=1), lambda T: T.tensor(x).min(1),
              lambda T: T.topk(T.tensor(x), 2), lambda T: T.tensor(x).median(dim=1),
              lambda T: T.kthvalue(T.tensor(x), 1, 1), lambda T: T.cummax(T.tensor(x), 1),
              lambda T: T.aminmax(T.tensor(x))):
        v, t = f(vl), f(torch)
        assert repr(v).replace("varlens.", "torch.") == repr(t)
        assert type(v).__name__ == type(t).__name__ and v._fields == tuple(t._fields if hasattr(t, "_fields") else v._fields)
        assert [getattr(v, k).tolist() for k in v._fields] == [getattr(t, k).tolist() for k in v._fields]
        a, b = v
        assert a.tolist() == t[0].tolist() and b.tolist() == t[1].tolist()
    assert vl.return_types.sort is type(vl.sort(vl.tensor([2.0, 1.0])))


def test_tensor_from_lists_of_numpy_float64_keeps_float64_as_torch():
    import warnings
    cases = [[np.ones(2), np.ones(2)], [np.float64(1.0), 2.0], [np.ones(2, np.float32)] * 2, [[np.float64(1.0)]],
             [np.int32(1), 2], [1.0, 2.0], [np.ones(2), [1.0, 2.0]], [[1.0, 2.0], [3.0, 4.0]]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")               # torch warns that lists of arrays are slow
        for c in cases:
            assert str(vl.tensor(c).dtype) == str(torch.tensor(c).dtype).replace("torch.", ""), c

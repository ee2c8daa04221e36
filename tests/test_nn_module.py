"""Module API: registration, iteration, modes, state_dict, hooks, containers, repr, dtype."""
import pickle

import numpy as np
import pytest
import torch

import varlens as vl
import varlens.nn as nn
import varlens.nn.functional as F
from conftest import assert_close


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 3)
        self.bn = nn.BatchNorm1d(3)
        self.fc2 = nn.Linear(3, 2)
        self.scale = nn.Parameter(vl.ones(1))
        self.register_buffer("steps", vl.zeros(1))
        self.register_buffer("cache", vl.zeros(2), persistent=False)
        self.plain = 5

    def forward(self, x):
        return self.fc2(F.relu(self.bn(self.fc1(x)))) * self.scale


def test_registration_and_iteration():
    m = Net()
    names = [n for n, _ in m.named_parameters()]
    assert names == ["scale", "fc1.weight", "fc1.bias", "bn.weight", "bn.bias", "fc2.weight", "fc2.bias"]
    assert len(list(m.parameters())) == 7
    assert [n for n, _ in m.named_buffers()] == ["steps", "cache", "bn.running_mean", "bn.running_var",
                                                  "bn.num_batches_tracked"]
    assert [n for n, _ in m.named_children()] == ["fc1", "bn", "fc2"]
    assert [n for n, _ in m.named_modules()] == ["", "fc1", "bn", "fc2"]
    assert m.plain == 5 and "plain" not in m._parameters
    assert m.get_submodule("fc1") is m.fc1 and m.get_parameter("fc2.bias") is m.fc2.bias
    # shared modules and parameters are listed once
    seq = nn.Sequential(m.fc1, m.fc1)
    assert len(list(seq.parameters())) == 2
    # reassigning and deleting
    m.fc1 = nn.Linear(4, 3, bias=False)
    assert "fc1.bias" not in dict(m.named_parameters())
    m.scale = None
    assert "scale" not in dict(m.named_parameters())
    with pytest.raises(TypeError, match="cannot assign 'Tensor' as parameter 'scale'"):
        m.scale = vl.ones(1)
    del m.fc2
    assert "fc2" not in dict(m.named_children())
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        m.nothing


def test_train_eval_zero_grad_requires_grad_apply():
    m = Net()
    m.eval()
    assert not m.training and not m.bn.training
    m.train()
    assert m.bn.training
    m(vl.randn(5, 4)).sum().backward()
    assert all(p.grad is not None for p in m.parameters())
    m.zero_grad(set_to_none=False)
    assert all(np.all(p.grad._data == 0) for p in m.parameters())
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())
    seen = []
    m.apply(lambda mod: seen.append(type(mod).__name__))
    assert seen == ["Linear", "BatchNorm1d", "Linear", "Net"]


def test_to_double_keeps_parameter_objects():
    m = Net()
    w = m.fc1.weight
    m.double()
    assert m.fc1.weight is w and w.dtype == np.float64
    assert m.bn.num_batches_tracked.dtype == np.int64      # integer buffers untouched
    m.float()
    assert w.dtype == np.float32
    with pytest.raises(RuntimeError, match="not available"):
        m.to("cuda")


def test_state_dict_round_trip_and_pytorch_interchange():
    a, b = Net(), Net()
    a(vl.randn(6, 4))  # move running stats
    sd = a.state_dict()
    assert list(sd) == ["scale", "steps", "fc1.weight", "fc1.bias", "bn.weight", "bn.bias", "bn.running_mean",
                        "bn.running_var", "bn.num_batches_tracked", "fc2.weight", "fc2.bias"]
    assert "cache" not in sd                                   # non-persistent buffer
    res = b.load_state_dict(sd)
    assert res.missing_keys == [] and res.unexpected_keys == []
    for k, v in b.state_dict().items():
        assert_close(v, sd[k], what=k)
    # values are copied, not shared
    b.fc1.weight.data._data[...] = 0
    assert not np.all(a.fc1.weight._data == 0)
    # a PyTorch model's state_dict loads directly (and back again through numpy)
    t = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    v = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))
    v.load_state_dict(t.state_dict())
    assert_close(v[0].weight, t[0].weight)
    t.load_state_dict({k: torch.from_numpy(np.array(x._data)) for k, x in v.state_dict().items()})
    # pickling a module works
    c = pickle.loads(pickle.dumps(a))
    assert_close(c.fc1.weight, a.fc1.weight)


def test_load_state_dict_lists_every_problem():
    m = Net()
    sd = m.state_dict()
    del sd["fc2.bias"]
    del sd["steps"]
    sd["extra.weight"] = vl.zeros(1)
    sd["fc1.weight"] = vl.zeros(3, 5)
    with pytest.raises(RuntimeError) as e:
        m.load_state_dict(sd)
    msg = str(e.value)
    assert 'Missing key(s) in state_dict: "steps", "fc2.bias"' in msg
    assert 'Unexpected key(s) in state_dict: "extra.weight"' in msg
    assert "size mismatch for fc1.weight: copying a param with shape (3, 5) from checkpoint, " \
           "the shape in current model is (3, 4)" in msg
    del sd["fc1.weight"]
    res = m.load_state_dict(sd, strict=False)
    assert set(res.missing_keys) == {"steps", "fc2.bias", "fc1.weight"} and res.unexpected_keys == ["extra.weight"]


def test_forward_pre_hooks_and_forward_hooks():
    m = nn.Linear(3, 2)
    calls = []
    h1 = m.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
    h2 = m.register_forward_hook(lambda mod, args, out: calls.append((args[0], out)) or out + 1)
    x = vl.ones(1, 3)
    y = m(x)
    assert_close(calls[0][0], 2 * np.ones((1, 3), dtype=np.float32))
    expect = 2 * m.weight._data.sum(1) + m.bias._data + 1
    assert_close(y, expect[None].astype(np.float32), rtol=1e-6)
    h1.remove()
    h2.remove()
    assert_close(m(x), (m.weight._data.sum(1) + m.bias._data)[None], rtol=1e-6)


@pytest.mark.filterwarnings("ignore:Full backward hook")
def test_full_backward_hook_matches_pytorch():
    """grad_input / grad_output of the varlens hook equal PyTorch's for the same net."""
    v = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2)).double()
    t = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 2)).double()
    v.load_state_dict(t.state_dict())
    got, want = {}, {}
    for i in range(3):
        v[i].register_full_backward_hook(lambda mod, gi, go, i=i: got.setdefault(i, (gi, go)) and None)
        t[i].register_full_backward_hook(lambda mod, gi, go, i=i: want.setdefault(i, (gi, go)) and None)
    x = vl.randn(5, 4, dtype=vl.float64)                       # input needs no grad: grad_input[0] is None
    tx = torch.from_numpy(x._data.copy())
    (v(x) ** 2).sum().backward()
    (t(tx) ** 2).sum().backward()
    assert set(got) == {0, 1, 2}
    for i in range(3):
        (gi, go), (tgi, tgo) = got[i], want[i]
        assert len(gi) == len(tgi) and len(go) == len(tgo)
        assert_close(go[0], tgo[0], what=f"grad_output {i}")
        if tgi[0] is None:
            assert gi[0] is None
        else:
            assert_close(gi[0], tgi[0], what=f"grad_input {i}")


def test_backward_hook_module_called_twice_tuple_outputs_and_replacement():
    class Two(nn.Module):
        def forward(self, a, b):
            return a * 2, b * 3

    m = Two()
    seen = []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append((gi, go)))
    a = vl.ones(2, requires_grad=True)
    b = vl.ones(2)                                            # does not require grad
    p, q = m(a, b)
    assert not q.requires_grad
    p2, _ = m(p, b)                                           # the same module used twice
    p2.sum().backward()
    assert len(seen) == 2                                     # one hook call per use
    (gi_outer, go_outer), (gi_inner, go_inner) = seen
    assert gi_outer[1] is None and len(go_outer) == 2 and go_outer[1] is None
    assert_close(go_outer[0], np.ones(2, dtype=np.float32))
    assert_close(gi_outer[0], 2 * np.ones(2, dtype=np.float32))
    assert_close(go_inner[0], 2 * np.ones(2, dtype=np.float32))
    assert_close(a.grad, 4 * np.ones(2, dtype=np.float32))
    # a hook may replace grad_input
    lin = nn.Linear(2, 2)
    lin.register_full_backward_hook(lambda mod, gi, go: (gi[0] * 0,))
    x = vl.ones(1, 2, requires_grad=True)
    lin(x).sum().backward()
    assert np.all(x.grad._data == 0) and lin.weight.grad is not None
    # backward pre-hook sees grad_output and may replace it
    lin2 = nn.Linear(2, 2)
    lin2.register_full_backward_pre_hook(lambda mod, go: (go[0] * 10,))
    x2 = vl.ones(1, 2, requires_grad=True)
    lin2(x2).sum().backward()
    assert_close(x2.grad, 10 * lin2.weight._data.sum(0, keepdims=True), rtol=1e-6)
    # no hooks fire under no_grad, and outputs are plain
    with vl.no_grad():
        m(a, b)
    assert len(seen) == 2
    # a second backward through a retained graph fires the hooks again
    seen.clear()
    out, _ = m(a, b)
    out.sum().backward(retain_graph=True)
    out.sum().backward()
    assert len(seen) == 2 and all(gi[0] is not None for gi, _ in seen)


def test_sequential_modulelist_moduledict():
    s = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert len(s) == 3 and isinstance(s[1], nn.ReLU) and isinstance(s[-1], nn.Linear)
    assert isinstance(s[:2], nn.Sequential) and len(s[:2]) == 2
    s.append(nn.Sigmoid())
    assert len(s) == 4 and s(vl.randn(5, 2)).shape == (5, 1)
    del s[3]
    assert len(s) == 3 and list(s._modules) == ["0", "1", "2"]
    from collections import OrderedDict
    s2 = nn.Sequential(OrderedDict([("a", nn.Linear(2, 2)), ("b", nn.Tanh())]))
    assert s2.a is s2[0]
    ml = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    ml.append(nn.Linear(2, 1))
    assert len(ml) == 4 and len(list(ml.parameters())) == 8 and isinstance(ml[-1], nn.Linear)
    md = nn.ModuleDict({"enc": nn.Linear(2, 2), "act": nn.ReLU()})
    assert "enc" in md and list(md.keys()) == ["enc", "act"] and len(list(md.parameters())) == 2
    pl = nn.ParameterList([nn.Parameter(vl.ones(2)), vl.zeros(3)])
    assert len(list(pl.parameters())) == 2 and pl[1].requires_grad
    with pytest.raises(IndexError, match="out of range"):
        s[5]


def test_summary_tree_with_parameter_counts():
    s = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Sequential(nn.Linear(3, 2)))
    r = s.summary()
    assert r == ("Sequential(  # 23 params\n"
                 "  (0): Linear(in_features=4, out_features=3, bias=True)  # 15 params\n"
                 "  (1): ReLU()\n"
                 "  (2): Sequential(  # 8 params\n"
                 "    (0): Linear(in_features=3, out_features=2, bias=True)  # 8 params\n"
                 "  )\n"
                 ")")
    assert s.num_parameters() == 23


def test_missing_forward_and_bad_registration():
    class NoForward(nn.Module):
        pass
    with pytest.raises(NotImplementedError, match='missing the required "forward"'):
        NoForward()(vl.ones(1))

    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(vl.ones(1))
    with pytest.raises(AttributeError, match="before Module.__init__"):
        Early()
    m = nn.Module()
    with pytest.raises(KeyError, match="contain"):
        m.register_buffer("a.b", vl.ones(1))
    with pytest.raises(TypeError, match="buffer"):
        m.register_buffer("x", 3)


def test_pytorch_style_script_trains_with_varlens_as_torch():
    """A PyTorch-style training script (Module subclass, BatchNorm, Dropout, CrossEntropyLoss,
    manual SGD under no_grad) run with ``import varlens as torch`` reaches 95% training accuracy
    on two interleaved spirals' worth of points (a problem a linear model cannot solve)."""
    import varlens as torch  # noqa: F811  (the point of the test)
    import varlens.nn as tnn

    rng = np.random.default_rng(0)
    n = 200
    r = rng.uniform(0.2, 1.0, n)
    lab = rng.integers(0, 2, n)
    ang = 3 * r + np.pi * lab + rng.normal(0, 0.1, n)
    X = torch.tensor(np.stack([r * np.cos(ang), r * np.sin(ang)], 1), dtype=torch.float32)
    Y = torch.tensor(lab)

    class MLP(tnn.Module):
        def __init__(self):
            super().__init__()
            self.body = tnn.Sequential(tnn.Linear(2, 64), tnn.BatchNorm1d(64), tnn.ReLU(), tnn.Dropout(0.1),
                                       tnn.Linear(64, 64), tnn.ReLU(), tnn.Linear(64, 2))

        def forward(self, x):
            return self.body(x)

    torch.manual_seed(0)
    model = MLP()
    loss_fn = tnn.CrossEntropyLoss()
    for step in range(300):
        model.train()
        loss = loss_fn(model(X), Y)
        model.zero_grad()
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= 0.3 * p.grad
    model.eval()
    with torch.no_grad():
        acc = (model(X).argmax(1) == Y).float().mean().item()
    assert acc >= 0.95, acc

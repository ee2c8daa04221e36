"""Whole-Module save/load with PyTorch's weights_only semantics, without pickle
(varlens/serialization.py; issue 18's torch.save(model) bullet)."""
import io
import pickle

import numpy as np
import pytest
import torch

import varlens as vl
import varlens.nn as nn
from varlens import serialization as S


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
        self.norm = nn.LayerNorm(3)
        self.register_buffer("steps", vl.zeros(1))
        self.scale = 2.0
        self.names = ("a", "b")

    def forward(self, x):
        return self.norm(self.body(x)) * self.scale


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(5, 4)
        self.head = nn.Linear(4, 5, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, i):
        return self.head(self.emb(i))


def _saved(obj):
    b = io.BytesIO()
    vl.save(obj, b)
    return b.getvalue()


@pytest.fixture(autouse=True)
def _clean_safe_globals():
    S.clear_safe_globals()
    yield
    S.clear_safe_globals()


def test_weights_only_default_refuses_a_whole_module_like_torch():
    data = _saved(Net())
    with pytest.raises(pickle.UnpicklingError, match=r"Weights only load failed.*weights_only=False.*"
                       r"Unsupported global: GLOBAL .*Net was not an allowed global by default.*add_safe_globals"):
        vl.load(io.BytesIO(data))
    with pytest.raises(S.CheckpointError):                          # same error, varlens's type
        vl.load(io.BytesIO(data), weights_only=True)
    tb = io.BytesIO()                                               # torch raises the same kind
    torch.save(torch.nn.Linear(2, 2), tb)
    tb.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        torch.load(tb)


def test_weights_only_false_rebuilds_module_same_outputs():
    vl.manual_seed(0)
    m = Net()
    m.eval()
    x = vl.randn(2, 4)
    back = vl.load(io.BytesIO(_saved(m)), weights_only=False)
    assert type(back) is Net and type(back.body) is nn.Sequential and isinstance(back.body[1], nn.ReLU)
    assert back.training is False and back.scale == 2.0 and back.names == ("a", "b")
    np.testing.assert_array_equal(back(x).detach().numpy(), m(x).detach().numpy())
    assert [k for k, _ in back.named_parameters()] == [k for k, _ in m.named_parameters()]
    assert list(back.state_dict()) == list(m.state_dict())
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in back.parameters())
    back(x).sum().backward()                                        # trainable after loading
    assert back.body[0].weight.grad is not None
    opt = vl.optim.SGD(back.parameters(), lr=0.1)
    opt.step()


def test_tied_weights_stay_one_parameter():
    m = Tied()
    back = vl.load(io.BytesIO(_saved(m)), weights_only=False)
    assert back.head.weight is back.emb.weight
    assert len(list(back.parameters())) == len(list(m.parameters())) == 1


def test_safe_globals_gate_weights_only_loading():
    data = _saved(Net())
    classes = [Net, nn.Sequential, nn.Linear, nn.ReLU, nn.LayerNorm]
    with S.safe_globals(classes):
        assert set(S.get_safe_globals()) == set(classes)
        assert type(vl.load(io.BytesIO(data))) is Net
    assert S.get_safe_globals() == []                               # the context restored the list
    with pytest.raises(S.CheckpointError, match="Unsupported global"):
        vl.load(io.BytesIO(data))
    S.add_safe_globals([Net, nn.Sequential])                        # not every class: still refused
    with pytest.raises(S.CheckpointError, match="GLOBAL varlens.*Linear was not an allowed global"):
        vl.load(io.BytesIO(data))
    S.add_safe_globals(classes)
    assert type(vl.load(io.BytesIO(data))) is Net
    S.clear_safe_globals()
    assert S.get_safe_globals() == []
    with pytest.raises(TypeError):
        S.add_safe_globals(Net)                                     # a list, as torch's
    assert [n for n in ("add_safe_globals", "safe_globals", "get_safe_globals", "clear_safe_globals")
            if not hasattr(torch.serialization, n)] == []           # torch has the same four names


def test_weights_only_false_runs_no_code_of_the_class():
    calls = []

    class Spy(nn.Module):
        def __init__(self):
            super().__init__()
            self.l = nn.Linear(2, 2)

        def __setstate__(self, s):  # pragma: no cover - must not run
            calls.append("setstate")

        def __reduce__(self):  # pragma: no cover - must not run
            calls.append("reduce")
            return (print, ("pwned",))

    globals()["Spy"] = Spy       # module level: its name can be found
    Spy.__qualname__ = "Spy"
    try:
        data = _saved(Spy())
        Spy.__init__ = lambda self: calls.append("init")
        back = vl.load(io.BytesIO(data), weights_only=False)
        assert type(back) is Spy and calls == []
    finally:
        del globals()["Spy"]


def _forged(body):
    """A well-formed file whose description is ``body`` (checksum recomputed)."""
    import hashlib
    import json
    meta = json.dumps({"format": S.FORMAT, "version": 1, "body": body}).encode()
    buf = io.BytesIO()
    np.savez(buf, __meta__=np.frombuffer(meta, dtype=np.uint8))
    p = buf.getvalue()
    return S.MAGIC + hashlib.sha256(p).hexdigest().encode() + b"\n" + p


@pytest.mark.parametrize("module,qualname", [
    ("os", "system"), ("builtins", "eval"), ("subprocess", "Popen"), ("varlens", "Tensor"),
    ("collections", "OrderedDict"), ("numpy", "ndarray"), ("varlens.nn", "__class__"),
    ("tests.test_module_save", "_forged"), ("no_such_module_xyz", "X")])
def test_weights_only_false_accepts_only_module_classes(module, qualname):
    body = {"__module__": {"module": module, "qualname": qualname, "id": 0, "state": {"__dict__": []}}}
    with pytest.raises(S.CheckpointError, match="not a subclass of varlens.nn.Module|cannot be imported|"
                       "malformed"):
        vl.load(io.BytesIO(_forged(body)), weights_only=False)


def test_functions_outside_varlens_are_refused_even_when_trusted():
    body = {"__dict__": [["f", {"__global__": ["os", "system"]}]]}
    with pytest.raises(S.CheckpointError, match="functions outside varlens load only when allowed"):
        vl.load(io.BytesIO(_forged(body)), weights_only=False)
    with pytest.raises(S.CheckpointError, match="Weights only load failed"):
        vl.load(io.BytesIO(_forged(body)))


def test_module_with_hooks_or_local_class_is_refused_at_save():
    m = nn.Linear(2, 2)
    m.register_forward_hook(lambda *a: None)
    with pytest.raises(TypeError, match="hooks"):
        _saved(m)

    class Local(nn.Module):
        pass
    with pytest.raises(TypeError, match="inside a function"):
        _saved(Local())


def test_transformer_layer_with_activation_function_round_trips():
    vl.manual_seed(0)
    m = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True)
    m.eval()
    x = vl.randn(2, 3, 8)
    back = vl.load(io.BytesIO(_saved(m)), weights_only=False)
    np.testing.assert_allclose(back(x).detach().numpy(), m(x).detach().numpy())

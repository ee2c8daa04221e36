"""PyTorch habits that must carry over: devices, cuda queries, save/load, sort/topk."""
import numpy as np
import pytest
import torch

import varlens as vl
from varlens.autograd import gradcheck

from conftest import assert_close, to_torch


def test_device_idiom_runs_on_cpu():
    dev = vl.device("cuda" if vl.cuda.is_available() else "cpu")
    assert str(dev) == "cpu" and vl.cuda.device_count() == 0
    x = vl.randn(3).to(dev)
    m = vl.nn.Linear(3, 2).to(dev)
    assert m(x).shape == (2,) and x.device == dev
    for bad in ("cuda", vl.device("cuda:0")):
        with pytest.raises(RuntimeError, match="is not available: varlens computes on CUDA through CuPy"):
            x.to(bad)
    with pytest.raises(RuntimeError, match="'cuda' is not available"):
        m.to(device="cuda")


def test_save_load_round_trip_and_refuses_corruption(tmp_path):
    m = vl.nn.Sequential(vl.nn.Linear(4, 3), vl.nn.ReLU(), vl.nn.Linear(3, 2))
    opt = vl.optim.Adam(m.parameters(), lr=0.1)
    m(vl.randn(5, 4)).sum().backward()
    opt.step()
    p = tmp_path / "ck.pt"
    vl.save({"model": m.state_dict(), "opt": opt.state_dict(), "epoch": 3, "note": "x"}, p)
    ck = vl.load(p)
    m2 = vl.nn.Sequential(vl.nn.Linear(4, 3), vl.nn.ReLU(), vl.nn.Linear(3, 2))
    m2.load_state_dict(ck["model"])
    x = vl.randn(2, 4)
    assert np.array_equal(m(x).detach().numpy(), m2(x).detach().numpy())
    assert ck["epoch"] == 3 and ck["note"] == "x"
    opt2 = vl.optim.Adam(m2.parameters(), lr=0.1)
    opt2.load_state_dict(ck["opt"])
    assert opt2.state_dict()["param_groups"] == opt.state_dict()["param_groups"]
    raw = bytearray(p.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    bad = tmp_path / "bad.pt"
    bad.write_bytes(bytes(raw))
    with pytest.raises(RuntimeError, match="corrupted"):
        vl.load(bad)
    with pytest.raises(RuntimeError, match="does not exist"):
        vl.load(tmp_path / "missing.pt")


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_sort_matches_torch(descending, dim):
    a = np.random.default_rng(0).standard_normal((4, 5))
    x = vl.tensor(a, dtype=vl.float64, requires_grad=True)
    tx = to_torch(x)
    v, i = vl.sort(x, dim=dim, descending=descending)
    tv, ti = torch.sort(tx, dim=dim, descending=descending)
    assert_close(v, tv)
    assert np.array_equal(i.numpy(), ti.numpy())
    w = np.random.default_rng(1).standard_normal(v.shape)
    (v * vl.tensor(w)).sum().backward()
    (tv * torch.from_numpy(w)).sum().backward()
    assert_close(x.grad, tx.grad)
    assert np.array_equal(x.argsort(dim, descending=descending).numpy(),
                          torch.argsort(tx, dim, descending=descending).numpy())


@pytest.mark.parametrize("largest", [True, False])
def test_topk_matches_torch_and_gradcheck(largest):
    a = np.random.default_rng(2).standard_normal((3, 6))
    x = vl.tensor(a, dtype=vl.float64, requires_grad=True)
    v, i = x.topk(3, dim=1, largest=largest)
    tv, ti = torch.topk(to_torch(x), 3, dim=1, largest=largest)
    assert_close(v, tv)
    assert np.array_equal(i.numpy(), ti.numpy())
    gradcheck(lambda t: vl.topk(t, 2, largest=largest).values, (x,))
    with pytest.raises(RuntimeError, match=r"k \(7\) must be between 0 and the size of dimension 1 \(6\)"):
        x.topk(7)


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("recorded", [True, False])
def test_topk_and_sort_order_nan_as_the_largest_value_like_torch(largest, recorded):
    """PyTorch counts NaN as larger than +inf: topk(largest=True) and sort(descending=True) give
    NaNs first (in their original order), ascending orders give them last."""
    a = np.array([[1.0, np.nan, 3.0, np.nan, -np.inf, np.inf, 0.0, 2.5],
                  [np.nan, 2.0, 1.5, -1.0, 5.0, np.nan, np.nan, 0.5]], dtype=np.float32)
    x = vl.tensor(a, requires_grad=recorded)
    with vl.set_grad_enabled(recorded):          # the no_grad fast path and the recorded path
        v, i = vl.topk(x, 5, dim=1, largest=largest)
    tv, ti = torch.topk(torch.tensor(a), 5, dim=1, largest=largest)
    np.testing.assert_array_equal(v.detach().numpy(), tv.numpy())
    np.testing.assert_array_equal(i.numpy(), ti.numpy())
    if recorded:            # the gradient reaches the positions the values came from, NaNs included
        v.sum().backward()
        expected = np.zeros_like(a)
        np.put_along_axis(expected, ti.numpy(), 1.0, axis=1)
        np.testing.assert_array_equal(x.grad.numpy(), expected)
    sv, si = vl.sort(vl.tensor(a), dim=1, descending=largest, stable=True)
    tsv, tsi = torch.sort(torch.tensor(a), dim=1, descending=largest, stable=True)
    np.testing.assert_array_equal(sv.numpy(), tsv.numpy())
    np.testing.assert_array_equal(si.numpy(), tsi.numpy())


def test_descending_sort_of_integers_keeps_the_extremes_in_order():
    """-a overflows at the smallest int64; the descending key of an integer is ~a."""
    ii = np.array([np.iinfo(np.int64).min, 3, -1, np.iinfo(np.int64).max, 3])
    v, i = vl.sort(vl.tensor(ii), descending=True, stable=True)
    tv, ti = torch.sort(torch.tensor(ii), descending=True, stable=True)
    np.testing.assert_array_equal(v.numpy(), tv.numpy())
    np.testing.assert_array_equal(i.numpy(), ti.numpy())
    b = np.array([True, False, True])
    assert vl.argsort(vl.tensor(b), descending=True).tolist() == [0, 2, 1]


FUNCS = [
    ("tril", lambda m, a: m.tril(a, -1)), ("triu", lambda m, a: m.triu(a, 1)),
    ("diag_of_matrix", lambda m, a: m.diag(a, 1)), ("diag_embed_vector", lambda m, a: m.diag(m.diag(a), -1)),
    ("roll", lambda m, a: m.roll(a, (1, 2), (0, 1))), ("roll_flat", lambda m, a: m.roll(a, 3)),
    ("repeat_interleave", lambda m, a: a.repeat_interleave(2, dim=1)),
    ("linalg_norm", lambda m, a: m.linalg.norm(a)),
]


@pytest.mark.parametrize("name,f", FUNCS, ids=[n for n, _ in FUNCS])
def test_misc_functions_match_torch_and_gradcheck(name, f):
    a = np.random.default_rng(4).standard_normal((4, 5))
    x = vl.tensor(a, dtype=vl.float64, requires_grad=True)
    tx = to_torch(x)
    out, tout = f(vl, x), f(torch, tx)
    assert_close(out, tout, what=name)
    w = np.random.default_rng(5).standard_normal(out.shape)
    (out * vl.tensor(w)).sum().backward()
    (tout * torch.from_numpy(w)).sum().backward()
    assert_close(x.grad, tx.grad, what=f"{name} grad")
    x.grad = None
    gradcheck(lambda t: f(vl, t), (x,))


@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid_unique_nonzero_match_torch(indexing):
    a, b = [0, 1], [5, 6, 7]
    for g, tg in zip(vl.meshgrid(vl.tensor(a), vl.tensor(b), indexing=indexing),
                     torch.meshgrid(torch.tensor(a), torch.tensor(b), indexing=indexing)):
        assert g.tolist() == tg.tolist()
    v = [3, 1, 3, 0]
    u, inv, c = vl.unique(vl.tensor(v), return_inverse=True, return_counts=True)
    tu, tinv, tc = torch.unique(torch.tensor(v), return_inverse=True, return_counts=True)
    assert (u.tolist(), inv.tolist(), c.tolist()) == (tu.tolist(), tinv.tolist(), tc.tolist())
    assert vl.tensor(v).nonzero().tolist() == torch.tensor(v).nonzero().tolist()
    assert [t.tolist() for t in vl.where(vl.tensor(v) > 1)] == [t.tolist() for t in torch.where(torch.tensor(v) > 1)]


def test_inplace_unary_ops_and_constants():
    x = vl.tensor([0.5, 1.0, 2.0])
    y = x.clone().exp_().log_().sqrt_()
    assert np.allclose(y.numpy(), np.sqrt([0.5, 1.0, 2.0]), rtol=1e-6)
    assert vl.tensor([-1.0, 2.0]).relu_().tolist() == [0.0, 2.0]
    assert vl.inf == float("inf") and abs(vl.pi - 3.14159265) < 1e-8
    assert vl.finfo(vl.float32).eps == torch.finfo(torch.float32).eps


def test_subpackages_load_on_first_use_and_missing_data_says_how_to_get_it(tmp_path):
    assert vl.lens.Lens is not None and vl.models is not None
    with pytest.raises(FileNotFoundError, match="make data"):
        vl.datasets.fashion_mnist(str(tmp_path))
    with pytest.raises(AttributeError, match="no attribute 'nosuch'"):
        vl.nosuch

"""Adversarial examples and the CNN experiment helpers (varlens.vision): FGSM's perturbation
is exactly eps * sign(grad) (L-infinity norm exactly eps before clipping), it matches the
sign of PyTorch's input gradient, the linear-case gain eps * ||w||_1 of seed 003 Remark 5.4.1,
PGD's projection onto the eps-ball, and the PNG-writing experiment functions."""
import numpy as np
import pytest
import torch

import varlens as vl
from varlens import nn
from varlens.models import LeNet5
from varlens.vision import attacks as A
from varlens.vision import degradation
from varlens.vision import visualize as Z
from varlens.vision.grid import save_image_grid

from conftest import to_torch


@pytest.fixture(autouse=True)
def _one_blas_thread():
    from threadpoolctl import threadpool_limits
    with threadpool_limits(1):
        yield


def _lenet_pair():
    vl.manual_seed(0)
    m = LeNet5(image_size=16).double().eval()
    tm = torch.nn.Sequential(
        torch.nn.Conv2d(1, 6, 5, padding=2), torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Conv2d(6, 16, 5),
        torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(64, 120), torch.nn.ReLU(),
        torch.nn.Linear(120, 84), torch.nn.ReLU(), torch.nn.Linear(84, 10)).double()
    with torch.no_grad():
        for v, t in zip(m.parameters(), tm.parameters()):
            t.copy_(torch.from_numpy(np.array(v._data)))
    return m, tm


def test_fgsm_perturbation_is_eps_sign_of_the_input_gradient():
    m, tm = _lenet_pair()
    rng = np.random.default_rng(0)
    x = vl.tensor(rng.uniform(0, 1, (4, 1, 16, 16)))
    y = vl.tensor(np.array([0, 3, 5, 9]))
    eps = 0.03
    adv = A.fgsm(m, x, y, eps, clamp=None)
    d = (adv - x)._data
    assert np.abs(d).max() == pytest.approx(eps, abs=1e-15)  # exactly eps (before any clipping)
    tx = to_torch(x, requires_grad=True)
    torch.nn.functional.cross_entropy(tm(tx), torch.from_numpy(y._data)).backward()
    g = tx.grad.numpy()
    assert np.array_equal(np.sign(d), np.sign(g))  # +-eps where the gradient is non-zero, 0 where it is 0
    nz = g != 0
    assert np.allclose(np.abs(d[nz]), eps, rtol=0, atol=1e-15)
    assert all(p.grad is None for p in m.parameters())  # attack leaves parameter grads alone
    # clipping to the pixel range: stays in [0, 1] and never moves a pixel by more than eps
    adv_c = A.fgsm(m, x, y, eps)
    assert adv_c._data.min() >= 0 and adv_c._data.max() <= 1
    assert np.abs((adv_c - x)._data).max() <= eps + 1e-15
    with pytest.raises(ValueError, match="eps must be >= 0"):
        A.fgsm(m, x, y, -0.1)


def test_linear_score_gain_is_eps_times_l1_norm():
    """Remark 5.4.1: for L = <w, x>, max over ||dx||_inf <= eps of <w, dx> is eps ||w||_1, at eps sign(w)."""
    rng = np.random.default_rng(1)
    w = rng.standard_normal(50)
    lin = nn.Linear(50, 1, bias=False).double()
    lin.weight._data[...] = w
    x = vl.tensor(rng.standard_normal((1, 50)))
    loss = lambda out, y: out.sum()  # noqa: E731
    adv = A.fgsm(lin, x, None, 0.1, loss_fn=loss, clamp=None)
    gain = float((lin(adv) - lin(x)).item())
    assert gain == pytest.approx(0.1 * np.abs(w).sum(), rel=1e-12)
    # PGD from a random start ends at the same vertex of the cube, after projection
    g = vl.Generator().manual_seed(0)
    adv_p = A.pgd(lin, x, None, 0.1, alpha=0.05, steps=10, loss_fn=loss, clamp=None, generator=g)
    assert np.allclose((adv_p - x)._data, 0.1 * np.sign(w))


def test_pgd_stays_in_the_ball_and_range_and_beats_clean():
    m, _ = _lenet_pair()
    rng = np.random.default_rng(2)
    x = vl.tensor(rng.uniform(0, 1, (6, 1, 16, 16)))
    y = vl.tensor(rng.integers(0, 10, 6))
    eps = 0.05
    adv = A.pgd(m, x, y, eps, steps=5, generator=vl.Generator().manual_seed(1))
    d = (adv - x)._data
    assert np.abs(d).max() <= eps + 1e-12
    assert adv._data.min() >= 0 and adv._data.max() <= 1
    import varlens.nn.functional as F
    assert F.cross_entropy(m(adv), y).item() > F.cross_entropy(m(x), y).item()
    with pytest.raises(ValueError, match="steps must be a positive int"):
        A.pgd(m, x, y, eps, steps=0)


def test_accuracy_under_attack_table_and_plot(tmp_path):
    m, _ = _lenet_pair()
    rng = np.random.default_rng(3)
    X = vl.tensor(rng.uniform(0, 1, (40, 1, 16, 16)))
    clean_pred = A.predict(m, X)
    Y = vl.tensor(clean_pred.copy())  # labels = clean predictions: clean accuracy is 1
    rows = A.accuracy_under_attack(m, X, Y, [0.0, 0.1, 0.3], batch_size=16)
    assert rows[0] == (0.0, 1.0)
    assert rows[2][1] < 1.0
    table = A.format_table({"FGSM": rows})
    assert "| 0.100 |" in table and table.count("\n") == 4
    p = A.plot_accuracy_vs_eps({"FGSM": rows}, str(tmp_path / "acc.png"))
    assert open(p, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="attack must be"):
        A.accuracy_under_attack(m, X, Y, [0.1], attack="cw")


def test_visualisation_helpers_write_pngs(tmp_path):
    m, _ = _lenet_pair()
    x = vl.tensor(np.random.default_rng(4).uniform(0, 1, (1, 1, 16, 16)))
    fm = Z.feature_maps(m, x, m.features[1])
    assert tuple(fm.shape) == (1, 6, 16, 16) and fm._data.min() >= 0  # after ReLU
    for p in (Z.save_filters(m.features[0].weight, str(tmp_path / "f.png")),
              Z.save_feature_maps(m, x, m.features[1], str(tmp_path / "fm.png")),
              Z.save_edge_filter_demo(x._data[0, 0], str(tmp_path / "e.png")),
              save_image_grid(np.zeros((5, 3, 4, 4)), str(tmp_path / "g.png"), nrow=2)):
        assert open(p, "rb").read(4) == b"\x89PNG"
    step = np.zeros((6, 6))
    step[:, 3:] = 1
    r = Z.apply_edge_filter(step, padding=0)
    assert np.allclose(r[:, 1:3], 3) and np.allclose(Z.apply_edge_filter(np.ones((5, 5)), padding=0), 0)
    assert Z.param_count_5x5_vs_3x3() == (25, 18, 5)  # Example 5.3.1
    with pytest.raises(ValueError, match="images must be"):
        save_image_grid(np.zeros(5), str(tmp_path / "bad.png"))


def test_degradation_experiment_runs_and_records(tmp_path):
    rng = np.random.default_rng(5)
    X = vl.tensor(rng.uniform(0, 1, (64, 1, 8, 8)).astype(np.float32))
    Y = vl.tensor(rng.integers(0, 10, 64))
    h = degradation.run(X, Y, X[:32], Y[:32], blocks=1, widths=(2, 4, 4), epochs=1, batch_size=32,
                        out_dir=str(tmp_path), log=lambda *a: None)
    assert set(h) == {"plain", "residual"} and h["plain"]["depth"] == h["residual"]["depth"] == 8
    for k in ("train_acc", "test_acc"):
        assert len(h["plain"][k]) == 1 and 0 <= h["residual"][k][0] <= 1
    assert len(h["plain"]["init"]["grad_second_moment"]) == 3
    for f in ("degradation.png", "init_moments.png", "degradation.json"):
        assert (tmp_path / f).exists()

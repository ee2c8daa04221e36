"""varlens.datasets: splits, standardisation, digits, IDX files, Fashion-MNIST, text, toy sets,
and the least-squares / ridge closed forms checked against gradient descent with autograd."""
import gzip
import os

import numpy as np
import pytest

import varlens as vl
from varlens import datasets as D


def test_split_80_10_10_disjoint_and_seeded():
    X = np.arange(1000)[:, None].astype(np.float32)
    y = np.arange(1000) % 10
    sp = D.train_val_test_split(X, y, seed=1)
    assert [len(p[0]) for p in sp] == [800, 100, 100]
    ids = np.concatenate([p[0][:, 0] for p in sp])
    assert sorted(ids.tolist()) == list(range(1000))           # a partition
    np.testing.assert_array_equal(sp.train[1], sp.train[0][:, 0].astype(int) % 10)  # pairs kept
    assert np.array_equal(D.train_val_test_split(X, y, seed=1).val[0], sp.val[0])
    assert not np.array_equal(D.train_val_test_split(X, y, seed=2).val[0], sp.val[0])
    st = D.train_val_test_split(X, y, seed=1, stratify=True)
    assert np.bincount(st.test[1]).tolist() == [10] * 10
    with pytest.raises(ValueError, match="fractions"):
        D.train_val_test_split(X, y, fractions=(0.8, 0.3, 0.1))


def test_standardizer_uses_training_statistics_only():
    rng = np.random.default_rng(0)
    tr = rng.normal(5, 3, (500, 4))
    te = rng.normal(-1, 1, (100, 4))
    s = D.Standardizer().fit(tr)
    z = s.transform(tr, dtype=np.float64)
    np.testing.assert_allclose(z.mean(0), 0, atol=1e-12)
    np.testing.assert_allclose(z.std(0), 1, atol=1e-12)
    np.testing.assert_allclose(s.transform(te, np.float64), (te - tr.mean(0)) / tr.std(0))
    np.testing.assert_allclose(s.inverse_transform(s.transform(te, np.float64)), te)
    const = np.ones((10, 2))
    assert np.all(np.isfinite(D.Standardizer().fit_transform(const)))
    with pytest.raises(ValueError, match="feature shape"):
        s.transform(np.zeros((3, 5)))


def test_digits_bundled():
    X, y = D.load_digits()
    assert X.shape == (1797, 64) and X.dtype == np.float32 and y.dtype == np.int64
    assert X.min() == 0 and X.max() == 16 and sorted(set(y.tolist())) == list(range(10))


@pytest.mark.parametrize("gz", [True, False])
def test_idx_roundtrip_and_errors(tmp_path, gz):
    imgs = (np.arange(3 * 4 * 5) % 256).astype(np.uint8).reshape(3, 4, 5)
    labels = np.array([7, 0, 2], dtype=np.uint8)
    sfx = ".gz" if gz else ""
    D.write_idx(tmp_path / f"train-images-idx3-ubyte{sfx}", imgs)
    D.write_idx(tmp_path / f"train-labels-idx1-ubyte{sfx}", labels)
    X, y = D.load_idx_dir(tmp_path, train=True)
    np.testing.assert_array_equal(X, imgs)
    assert y.tolist() == [7, 0, 2] and y.dtype == np.int64
    f = np.arange(6, dtype=np.float64).reshape(2, 3) / 7
    D.write_idx(tmp_path / "f.idx", f)
    np.testing.assert_array_equal(D.read_idx(tmp_path / "f.idx"), f)
    raw = (tmp_path / "f.idx").read_bytes()
    (tmp_path / "cut.idx").write_bytes(raw[:-5])
    with pytest.raises(ValueError, match="truncated"):
        D.read_idx(tmp_path / "cut.idx")
    with pytest.raises(FileNotFoundError, match="t10k-images"):
        D.load_idx_dir(tmp_path, train=False)


def test_idx_header_written_by_hand(tmp_path):
    """A file laid out byte by byte per the IDX spec (not by our writer)."""
    body = bytes([0, 0, 0x08, 2]) + (2).to_bytes(4, "big") + (3).to_bytes(4, "big") + bytes(range(6))
    with gzip.open(tmp_path / "x.gz", "wb") as fh:
        fh.write(body)
    np.testing.assert_array_equal(D.read_idx(tmp_path / "x.gz"), [[0, 1, 2], [3, 4, 5]])
    (tmp_path / "bad").write_bytes(b"\x01\x00\x08\x01" + bytes(8))
    with pytest.raises(ValueError, match="not an IDX file"):
        D.read_idx(tmp_path / "bad")


def test_fashion_mnist_missing_says_make_data(tmp_path):
    with pytest.raises(FileNotFoundError, match="make data"):
        D.fashion_mnist(root=str(tmp_path))


def test_fashion_mnist_reads_when_installed():
    roots = [r for r in D.real.fashion_mnist_roots()
             if os.path.exists(os.path.join(r, "t10k-labels-idx1-ubyte.gz"))]
    if not roots:  # not installed here: the missing-file error is tested above
        with pytest.raises(FileNotFoundError, match="make data"):
            D.fashion_mnist(train=False)
        return
    X, y = D.fashion_mnist(train=False)
    assert X.shape == (10000, 28, 28) and X.dtype == np.uint8
    assert np.bincount(y).tolist() == [1000] * 10


def test_kjv_text_and_char_vocab():
    text = D.load_kjv()
    assert text.startswith("In the beginning God created")
    assert 3_500_000 < len(text) < 4_500_000 and text.count("\n") > 20_000
    assert not any(c.isdigit() for c in text[:100_000])          # verse markers removed
    assert D.load_kjv(verse_numbers=True).startswith("1:1 In the beginning")
    v = D.CharVocab(text)
    assert 40 < v.size < 80 and v.itos == sorted(v.itos)
    ids = v.encode("And God said")
    assert ids.dtype == np.int64 and v.decode(ids) == "And God said"
    with pytest.raises(ValueError, match="not in the vocabulary"):
        v.encode("é")


def test_toy_sets():
    X, y = D.make_circle(4000, seed=0)
    assert X.shape == (4000, 2) and X.dtype == np.float32
    np.testing.assert_array_equal(y, (np.linalg.norm(X, axis=1) < 1).astype(int))
    assert abs(y.mean() - 0.5) < 0.03                            # balanced by the square's size
    for maker in (D.make_moons, D.make_spirals, D.make_ring_of_gaussians):
        X, y = maker(300, seed=1)
        X2, y2 = maker(300, seed=1)
        assert X.shape == (300, 2) and np.array_equal(X, X2) and np.array_equal(y, y2)
    X, y = D.make_ring_of_gaussians(4000, k=8, radius=2.0, std=0.05)
    np.testing.assert_allclose(np.linalg.norm(X, axis=1).mean(), 2.0, atol=0.01)
    X, y = D.make_gaussian_mixture(4000, centers=[(-3, 0), (3, 0)], std=0.5, weights=[0.25, 0.75])
    assert abs(y.mean() - 0.75) < 0.03 and abs(X[y == 0, 0].mean() + 3) < 0.05
    with pytest.raises(ValueError, match="n must be a positive int"):
        D.make_moons(0)


def _gd(X, y, lam, lr, steps):
    """Plain gradient descent with varlens autograd on (1/n)||y - Xw||^2 + lam ||w||^2."""
    Xt, yt = vl.tensor(X), vl.tensor(y)
    w = vl.zeros(X.shape[1], dtype=vl.float64, requires_grad=True)
    for _ in range(steps):
        loss = ((yt - Xt @ w) ** 2).mean() + lam * (w * w).sum()
        w.grad = None
        loss.backward()
        with vl.no_grad():
            w -= lr * w.grad
    return w.detach().numpy()


def test_least_squares_and_ridge_match_gradient_descent_on_diabetes():
    X, y = D.load_diabetes()
    X = D.add_bias_column(D.Standardizer().fit_transform(X, dtype=np.float64))
    w_ls = D.least_squares(X, y)
    np.testing.assert_allclose(X.T @ (y - X @ w_ls), 0, atol=1e-8)             # normal equation (1.3.3)
    np.testing.assert_allclose(w_ls, np.linalg.lstsq(X, y, rcond=None)[0], rtol=1e-8)
    def step_size(lam):  # 2 / (largest + smallest eigenvalue of the Hessian): the fastest fixed step
        e = np.linalg.eigvalsh(2 * X.T @ X / len(X) + 2 * lam * np.eye(X.shape[1]))
        return 2 / (e[0] + e[-1])
    np.testing.assert_allclose(_gd(X, y, 0.0, step_size(0.0), 4000), w_ls, rtol=1e-5, atol=1e-5)
    lam = 0.05
    w_r = D.ridge(X, y, lam)
    from sklearn.linear_model import Ridge                                    # alpha = n * lam
    sk = Ridge(alpha=len(X) * lam, fit_intercept=False).fit(X, y)
    np.testing.assert_allclose(w_r, sk.coef_, rtol=1e-8)
    np.testing.assert_allclose(_gd(X, y, lam, step_size(lam), 800), w_r, rtol=1e-6, atol=1e-6)
    assert np.linalg.norm(w_r) < np.linalg.norm(w_ls)
    assert D.mse(X, y, w_ls) < D.mse(X, y, w_r)


def test_least_squares_refuses_n_less_than_p_but_ridge_solves():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(5, 8)), rng.normal(size=5)
    with pytest.raises(np.linalg.LinAlgError, match="singular"):
        D.least_squares(X, y)
    w = D.ridge(X, y, 0.1)
    np.testing.assert_allclose((5 * 0.1 * np.eye(8) + X.T @ X) @ w, X.T @ y, atol=1e-10)

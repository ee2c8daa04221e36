"""The problem and the checks that tests/test_optim.py and tests/test_optim_more.py share:
a small two-layer regression in float64, run for ``STEPS`` steps by a varlens optimiser and
by PyTorch's, then compared weight by weight and state entry by state entry."""
import numpy as np

STEPS = 50
# Gradients differ from PyTorch's in the last bits (other BLAS, other summation order), and
# the sign-like steps of adaptive methods amplify that over 50 steps to ~1e-10; any error in
# a formula shows up at 1e-4 or more.
RTOL, ATOL = 1e-8, 1e-10
NAMES = ("W1", "b1", "W2", "U")


def _data(seed=0):
    rng = np.random.default_rng(seed)
    return dict(X=rng.normal(size=(12, 5)), Y=rng.normal(size=(12, 3)),
                W1=0.5 * rng.normal(size=(5, 4)), b1=0.1 * rng.normal(size=(4,)),
                W2=0.5 * rng.normal(size=(4, 3)), U=rng.normal(size=(2,)))


def _params(lib, d):
    """Four leaves of several shapes; U never enters the loss, so its grad stays None (the
    optimiser must skip it)."""
    return [lib.tensor(d[k].copy(), dtype=lib.float64, requires_grad=True) for k in NAMES]


def _loss(lib, d, ps):
    X = lib.tensor(d["X"], dtype=lib.float64)
    Y = lib.tensor(d["Y"], dtype=lib.float64)
    W1, b1, W2, _ = ps
    r = lib.tanh(X @ W1 + b1) @ W2 - Y
    return (r * r).mean() + 0.05 * ((W1 * W1) * (W1 * W1)).sum()


def _groups(ps, spec):
    """The parameters as one list (``spec=None``) or as two groups with ``spec``'s options."""
    if spec is None:
        return ps
    g0, g1 = dict(spec[0]), dict(spec[1])
    g0["params"], g1["params"] = ps[:2], ps[2:]
    return [g0, g1]


def _train(lib, opt_cls, kw, groups=None, steps=STEPS, split=None, d=None, load=None):
    """Run ``steps`` steps; with ``split`` save the state there, rebuild the optimiser, and load
    the saved dict (or ``load(saved)`` of it)."""
    d = d or _data()
    ps = _params(lib, d)
    opt = opt_cls(_groups(ps, groups), **kw)
    for t in range(steps):
        if split is not None and t == split:
            sd = opt.state_dict()
            opt = opt_cls(_groups(ps, groups), **kw)
            opt.load_state_dict(load(sd) if load else sd)
        opt.zero_grad()
        _loss(lib, d, ps).backward()
        opt.step()
    return ps, opt


def _compare(vp, tp, d):
    """varlens's weights equal PyTorch's, the run moved them, and U (no grad) stayed put."""
    moved = 0.0
    for v, t, k in zip(vp, tp, NAMES):
        assert np.isfinite(v._data).all(), k
        np.testing.assert_allclose(v._data, t.detach().numpy(), rtol=RTOL, atol=ATOL, err_msg=k)
        moved = max(moved, float(np.abs(v._data - d[k]).max()))
    assert moved > 1e-3                                # the run really moved the parameters
    np.testing.assert_array_equal(vp[3]._data, d["U"])  # no grad, no update


def _compare_state(topt, vopt):
    """The two optimisers' state_dicts have PyTorch's layout, keys, dtypes and values."""
    ts, vs = topt.state_dict(), vopt.state_dict()
    assert sorted(ts["state"]) == sorted(vs["state"])
    for i in ts["state"]:
        assert set(ts["state"][i]) == set(vs["state"][i]), i
        for key, tv in ts["state"][i].items():
            vv = vs["state"][i][key]._data
            assert vv.dtype == tv.numpy().dtype, (i, key)
            np.testing.assert_allclose(np.asarray(vv, dtype=np.float64),
                                       tv.numpy().astype(np.float64), rtol=1e-9, atol=1e-12,
                                       err_msg=f"state[{i}][{key}]")
    for tg, vg in zip(ts["param_groups"], vs["param_groups"]):
        assert tg["params"] == vg["params"]
        for key in tg:
            assert key in vg, key
            if key != "params":
                assert vg[key] == tg[key], key

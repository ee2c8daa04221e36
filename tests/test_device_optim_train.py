"""Optimisers, gradient utilities, init, GradScaler, the Trainer and the lens on the (simulated)
CUDA device: the same trajectories and results as on the CPU, state on the parameter's device,
and no host synchronisation in a step where PyTorch's CUDA step has none."""
import numpy as np
import pytest

import varlens as vl
from conftest import assert_close
from varlens.core import array as B

DEV = "cuda"


def _host(a):
    return B.to_host(a._data if isinstance(a, vl.Tensor) else a)


# ----------------------------------------------------------------------------- optimisers
# A smooth problem whose gradient is computed with the parameters' own array library, so the
# optimisers are tested on their own (not through the ops): f(p) = sum(c (p - a)^2 + (p - a)^4 / 10).
_SHAPES = ((5, 4), (4,), (4, 3))


def _problem(device, dtype=None):
    dtype = dtype or vl.float64
    rng = np.random.default_rng(3)
    ps, targets = [], []
    for s in _SHAPES:
        ps.append(vl.tensor(rng.normal(size=s), dtype=dtype, device=device, requires_grad=True))
        targets.append(vl.tensor(rng.normal(size=s), dtype=dtype, device=device)._data)
    return ps, targets


def _loss_and_grad(ps, targets):
    total = None
    for p, a in zip(ps, targets):
        d = p._data - a
        p.grad = vl.Tensor._make(2.0 * 0.7 * d + 0.4 * d * d * d)
        f = (0.7 * d * d + 0.1 * d * d * d * d).sum()
        total = f if total is None else total + f
    return vl.Tensor._make(total)


# (name, kwargs, PyTorch's CUDA step reads no device value on the host)
OPTIMS = [
    ("SGD", dict(lr=0.05), True),
    ("SGD", dict(lr=0.05, momentum=0.9), True),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01), True),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.1, maximize=False), True),
    ("Adam", dict(lr=0.05), True),
    ("Adam", dict(lr=0.05, weight_decay=0.01, amsgrad=True), True),
    ("AdamW", dict(lr=0.05), True),
    ("AdamW", dict(lr=0.05, amsgrad=True), True),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.01, initial_accumulator_value=0.1), True),
    ("Adadelta", dict(lr=1.0, weight_decay=0.01), True),
    ("RMSprop", dict(lr=0.01), True),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.5, weight_decay=0.01), True),
    ("Adamax", dict(lr=0.05, weight_decay=0.01), True),
    ("NAdam", dict(lr=0.05), True),
    ("NAdam", dict(lr=0.05, weight_decay=0.01, decoupled_weight_decay=True), True),
    ("RAdam", dict(lr=0.05), True),
    ("RAdam", dict(lr=0.05, weight_decay=0.01, decoupled_weight_decay=True), True),
    ("ASGD", dict(lr=0.05, t0=2), True),     # (PyTorch's non-capturable ASGD reads eta with .item())
    ("Rprop", dict(lr=0.05), True),
    ("Adafactor", dict(lr=0.05), False),     # its step size reads |p| on the host, as PyTorch's
    ("LBFGS", dict(lr=0.5, max_iter=4), False),
    ("LBFGS", dict(lr=1, max_iter=4, line_search_fn="strong_wolfe"), False),
]


def _run(name, kw, device, forbid=None, steps=5, dtype=None):
    ps, targets = _problem(device, dtype)
    opt = getattr(vl.optim, name)(ps, **kw)
    for _ in range(steps):
        if name == "LBFGS":
            def closure():
                return _loss_and_grad(ps, targets)
            opt.step(closure)
            continue
        opt.zero_grad()
        _loss_and_grad(ps, targets)
        if forbid is not None:
            with forbid():
                opt.step()
        else:
            opt.step()
    return ps, opt


@pytest.mark.parametrize("name,kw,nosync", OPTIMS, ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(OPTIMS)])
def test_optimizer_trajectory_on_device(sim_cuda, name, kw, nosync):
    cpu, copt = _run(name, kw, "cpu")
    dev, dopt = _run(name, kw, DEV, sim_cuda.forbid_host_sync if nosync else None)
    start, _ = _problem("cpu")
    moved = 0.0
    for c, d, s in zip(cpu, dev, start):
        assert d.device.type == "cuda" and B.is_device_array(d._data)
        np.testing.assert_allclose(_host(d), c._data, rtol=1e-12, atol=1e-14)
        moved = max(moved, float(np.abs(c._data - s._data).max()))
    assert moved > 1e-3
    # the state lives on the parameter's device (per-parameter 0-d scalars, as PyTorch's step
    # counts, stay on the host); a state_dict round trip keeps it there
    for p, c in zip(dev, cpu):
        for key, v in dopt.state[p].items():
            if isinstance(v, vl.Tensor) and v._data.ndim:
                assert B.is_device_array(v._data), (name, key)
                np.testing.assert_allclose(_host(v), copt.state[c][key]._data,
                                           rtol=1e-12, atol=1e-14)
    sd = dopt.state_dict()
    opt2 = getattr(vl.optim, name)(dev, **kw)
    opt2.load_state_dict(sd)
    for p in dev:
        for key, v in opt2.state[p].items():
            if isinstance(v, vl.Tensor) and v._data.ndim:
                assert B.is_device_array(v._data), (name, key)


@pytest.mark.parametrize("name,kw", [("SGD", dict(lr=0.05, momentum=0.9, nesterov=True)),
                                     ("AdamW", dict(lr=0.05, amsgrad=True)), ("Adadelta", dict(lr=1.0)),
                                     ("RMSprop", dict(lr=0.01, centered=True)), ("NAdam", dict(lr=0.05))])
def test_optimizer_float32_on_device(sim_cuda, name, kw):
    """float32 parameters keep float32 state on the device (Adadelta: the CPU runs its numba
    kernel, the device the composite), and the trajectories agree to float32 rounding."""
    cpu, _ = _run(name, kw, "cpu", dtype=vl.float32)
    dev, dopt = _run(name, kw, DEV, sim_cuda.forbid_host_sync, dtype=vl.float32)
    for c, d in zip(cpu, dev):
        assert d._data.dtype == np.float32
        np.testing.assert_allclose(_host(d), c._data, rtol=2e-5, atol=2e-6)
    for p in dev:
        for key, v in dopt.state[p].items():
            if isinstance(v, vl.Tensor) and v._data.ndim:
                assert v._data.dtype == np.float32 and B.is_device_array(v._data), key


def test_optimizer_state_loads_onto_the_parameters_device(sim_cuda):
    """A state_dict saved on the CPU loads onto a device model's parameters (and back), as
    PyTorch's load_state_dict moves state to each parameter's device; the trajectories continue
    identically."""
    cpu, copt = _run("Adam", dict(lr=0.05), "cpu", steps=3)
    dev, _ = _problem(DEV)
    for d, c in zip(dev, cpu):
        d._data[...] = B.to_namespace(c._data, B.namespace(d._data))
    dopt = vl.optim.Adam(dev, lr=0.05)
    dopt.load_state_dict(copt.state_dict())
    assert all(B.is_device_array(dopt.state[p]["exp_avg"]._data) for p in dev)
    assert all(not B.is_device_array(dopt.state[p]["step"]._data) for p in dev)
    _, targets_c = _problem("cpu")
    _, targets_d = _problem(DEV)
    for _ in range(2):
        copt.zero_grad()
        _loss_and_grad(cpu, targets_c)
        copt.step()
        dopt.zero_grad()
        _loss_and_grad(dev, targets_d)
        with sim_cuda.forbid_host_sync():
            dopt.step()
    for c, d in zip(cpu, dev):
        np.testing.assert_allclose(_host(d), c._data, rtol=1e-12)


def test_lr_schedulers_with_a_device_optimizer(sim_cuda):
    def run(device):
        ps, targets = _problem(device)
        opt = vl.optim.SGD(ps, lr=0.1, momentum=0.9)
        sched = vl.optim.lr_scheduler.SequentialLR(
            opt, [vl.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=2),
                  vl.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)], milestones=[2])
        plateau_opt = vl.optim.Adam(ps, lr=0.01)
        plateau = vl.optim.lr_scheduler.ReduceLROnPlateau(plateau_opt, patience=0, factor=0.5)
        lrs = []
        for _ in range(6):
            opt.zero_grad()
            loss = _loss_and_grad(ps, targets)
            opt.step()
            sched.step()
            plateau.step(loss * 0 + 1.0)   # a device loss, read once per epoch as PyTorch's
            lrs.append((opt.param_groups[0]["lr"], plateau_opt.param_groups[0]["lr"]))
        return ps, lrs

    cpu, lc = run("cpu")
    dev, ld = run(DEV)
    assert lc == ld and lc[0][0] != lc[-1][0] and lc[-1][1] < 0.01
    for c, d in zip(cpu, dev):
        np.testing.assert_allclose(_host(d), c._data, rtol=1e-12)


# ----------------------------------------------------------------------------- gradient utilities
@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf"), 3.0])
def test_clip_grad_norm_on_device(sim_cuda, norm_type):
    def run(device):
        ps, targets = _problem(device)
        _loss_and_grad(ps, targets)
        return ps
    cpu, dev = run("cpu"), run(DEV)
    tc = vl.nn.utils.clip_grad_norm_(cpu, 0.5, norm_type)
    with sim_cuda.forbid_host_sync():          # the norm and the scaling stay on the device
        td = vl.nn.utils.clip_grad_norm_(dev, 0.5, norm_type)
    assert td.device.type == "cuda" and td.ndim == 0
    np.testing.assert_allclose(_host(td), tc._data, rtol=1e-12)
    for c, d in zip(cpu, dev):
        assert B.is_device_array(d.grad._data)
        np.testing.assert_allclose(_host(d.grad), c.grad._data, rtol=1e-12)
    total = np.sqrt(sum((_host(d.grad) ** 2).sum() for d in dev)) if norm_type == 2.0 else None
    if total is not None:
        np.testing.assert_allclose(total, 0.5, rtol=1e-5)   # clipped to max_norm
    # under max_norm the gradients are unchanged
    with sim_cuda.forbid_host_sync():
        vl.nn.utils.clip_grad_norm_(dev, 1e9, norm_type)
    for c, d in zip(cpu, dev):
        np.testing.assert_allclose(_host(d.grad), c.grad._data, rtol=1e-12)


@pytest.mark.simulator_only
def test_clip_grad_nonfinite_and_value_on_device(sim_cuda):
    ps, targets = _problem(DEV)
    _loss_and_grad(ps, targets)
    with sim_cuda.forbid_host_sync():
        vl.nn.utils.clip_grad_value_(ps, 0.1)
    assert max(float(np.abs(_host(p.grad)).max()) for p in ps) <= 0.1
    ps[0].grad._data[0, 0] = float("nan")
    n0 = sim_cuda.host_syncs[0]
    with pytest.raises(RuntimeError, match="non-finite"):
        vl.nn.utils.clip_grad_norm_(ps, 1.0, error_if_nonfinite=True)   # reads the host only when asked
    assert sim_cuda.host_syncs[0] == n0 + 1
    v = vl.nn.utils.parameters_to_vector(ps)
    assert v.device.type == "cuda" and v.shape == (sum(int(np.prod(s)) for s in _SHAPES),)


# ----------------------------------------------------------------------------- init
def test_init_on_device(sim_cuda):
    init = vl.nn.init
    w = vl.empty(64, 48, device=DEV, dtype=vl.float64)
    with sim_cuda.forbid_host_sync():      # drawn on the device: nothing comes from the host
        for f, args in [(init.normal_, (0.0, 0.5)), (init.uniform_, (-1.0, 1.0)),
                        (init.xavier_uniform_, ()), (init.xavier_normal_, ()),
                        (init.kaiming_uniform_, ()), (init.kaiming_normal_, ()),
                        (init.lecun_normal_, ()), (init.trunc_normal_, (0.0, 1.0, -2.0, 2.0)),
                        (init.orthogonal_, ())]:
            f(w, *args)
            assert B.is_device_array(w._data), f.__name__
    for f, args, std in [(init.normal_, (0.0, 0.5), 0.5), (init.uniform_, (-1.0, 1.0), 1 / np.sqrt(3)),
                         (init.xavier_normal_, (), np.sqrt(2 / 112)),
                         (init.kaiming_uniform_, (), np.sqrt(2 / 48)),
                         (init.trunc_normal_, (0.0, 1.0, -2.0, 2.0), 0.8796)]:
        f(w, *args)
        h = _host(w)
        assert abs(h.std() - std) < 0.05 * std and abs(h.mean()) < 0.1 * std, f.__name__
    init.trunc_normal_(w, 0.0, 1.0, -0.5, 0.5)
    assert np.abs(_host(w)).max() <= 0.5
    init.orthogonal_(w)
    np.testing.assert_allclose(_host(w).T @ _host(w), np.eye(48), atol=1e-10)
    # deterministic fills equal the CPU's
    for f, shape in [(init.eye_, (4, 6)), (init.ones_, (3, 2)), (init.zeros_, (3, 2)),
                     (init.dirac_, (4, 2, 3, 3))]:
        c, d = vl.empty(*shape, dtype=vl.float64), vl.empty(*shape, device=DEV, dtype=vl.float64)
        f(c)
        f(d)
        np.testing.assert_array_equal(_host(d), c._data)
    init.sparse_(w, 0.25)
    assert ((_host(w) == 0).sum(axis=0) == 16).all()
    # a seeded device generator gives the same draws again; a CPU generator is refused
    g = vl.Generator(device=DEV)
    a = _host(init.normal_(w, generator=g.manual_seed(5)))
    b = _host(init.normal_(w, generator=g.manual_seed(5)))
    np.testing.assert_array_equal(a, b)
    with pytest.raises(RuntimeError, match="device type for generator"):
        init.normal_(w, generator=vl.Generator().manual_seed(0))
    layer = vl.nn.Linear(8, 4, device=DEV)
    init.kaiming_uniform_(layer.weight, a=5 ** 0.5)
    assert B.is_device_array(layer.weight._data)


# ----------------------------------------------------------------------------- GradScaler
@pytest.mark.simulator_only
def test_grad_scaler_on_device(sim_cuda):
    """GradScaler('cuda') is enabled on a device, keeps its state there, unscale_ and update read
    nothing on the host, and step reads one flag; the trajectory equals plain training's, and an
    inf gradient skips the step and backs the scale off."""
    ps, targets = _problem(DEV)
    ref, rtargets = _problem(DEV)
    opt, ropt = vl.optim.SGD(ps, lr=0.05), vl.optim.SGD(ref, lr=0.05)
    scaler = vl.amp.GradScaler("cuda", init_scale=1024.0, growth_interval=2)
    assert scaler.is_enabled() and B.is_device_array(scaler._scale)
    for step in range(4):
        opt.zero_grad()
        loss = _loss_and_grad(ps, targets)
        scaled = scaler.scale(loss)
        assert B.is_device_array(scaled._data)
        for p in ps:                      # the gradient of the scaled loss
            p.grad._data = p.grad._data * 1024.0 * (2.0 ** (step // 2))
        with sim_cuda.forbid_host_sync():
            scaler.unscale_(opt)
        n0 = sim_cuda.host_syncs[0]
        scaler.step(opt)
        assert sim_cuda.host_syncs[0] == n0 + 1      # the found-inf read, as PyTorch
        with sim_cuda.forbid_host_sync():
            scaler.update()
        ropt.zero_grad()
        _loss_and_grad(ref, rtargets)
        ropt.step()
    for a, b in zip(ps, ref):
        np.testing.assert_allclose(_host(a), _host(b), rtol=1e-12)
    assert scaler.get_scale() == 4096.0       # grew twice (growth_interval=2, four good steps)
    before = [_host(p).copy() for p in ps]
    opt.zero_grad()
    _loss_and_grad(ps, targets)
    ps[1].grad._data[0] = float("inf")
    scaler.step(opt)
    scaler.update()
    for p, b in zip(ps, before):
        np.testing.assert_array_equal(_host(p), b)     # skipped
    assert scaler.get_scale() == 2048.0
    sd = scaler.state_dict()
    assert sd["scale"] == 2048.0 and sd["_growth_tracker"] == 0
    s2 = vl.cuda.amp.GradScaler()
    s2.load_state_dict(sd)
    assert s2.get_scale() == 2048.0 and B.is_device_array(s2._scale)


# ----------------------------------------------------------------------------- Trainer
def _digits_fit(device, log_interval=10, epochs=1, **cfg_over):
    from varlens.train.recipes import build_run, get_recipe
    from varlens.train.trainer import Trainer
    cfg = get_recipe("digits-mlp")
    cfg.update(dropout=0.0, epochs=epochs, hidden=[32], batch_size=64, grad_clip=1.0)
    cfg.update(cfg_over)
    model, opt, sched, loss_fn, (tr, va, te), _ = build_run(cfg, device=device)
    t = Trainer(model, opt, loss_fn, scheduler=sched, grad_clip=cfg["grad_clip"], quiet=True,
                device=device, log_interval=log_interval)
    return t, tr, va


@pytest.mark.simulator_only
def test_trainer_fits_digits_on_device_as_on_cpu(sim_cuda):
    """The digits recipe (dropout off: the two devices' random streams differ) trained on the
    device reaches the CPU's losses and accuracies; the loss is read from the device once per
    log interval, not per step."""
    tc, trc, vac = _digits_fit(None, epochs=2)
    hc = tc.fit(trc, vac, epochs=2)
    td, trd, vad = _digits_fit("cuda", epochs=2)
    assert all(B.is_device_array(p._data) for p in td.model.parameters())
    n0 = sim_cuda.host_syncs[0]
    run = td.train_epoch(trd, 0)
    steps = td.step
    syncs = sim_cuda.host_syncs[0] - n0
    assert steps >= 20 and syncs == -(-steps // td.log_interval), (steps, syncs)   # one per interval
    assert run.n == len(trd.dataset)
    td2, trd2, vad2 = _digits_fit("cuda", epochs=2)
    hd = td2.fit(trd2, vad2, epochs=2)
    for rc, rd in zip(hc, hd):
        for k in ("train_loss", "val_loss", "train_acc", "val_acc"):
            np.testing.assert_allclose(rd[k], rc[k], rtol=1e-4, err_msg=k)
    assert hd[-1]["val_acc"] > 0.3 and hd[-1]["train_loss"] < hd[0]["train_loss"]   # it learns
    ev = td2.evaluate(vad2)
    np.testing.assert_allclose(ev["loss"], hc[-1]["val_loss"], rtol=1e-4)


def test_trainer_reports_nonfinite_loss_on_device(sim_cuda):
    """A loss that becomes Inf/NaN is reported at the next read of the device tally, naming the
    same step as the CPU's per-step check."""
    import re
    from varlens.train.trainer import NonFiniteLossError
    msgs = []
    for device in (None, "cuda"):
        t, tr, _ = _digits_fit(device, log_interval=50, lr=1e3, optimizer="sgd", grad_clip=None,
                               scheduler="none")
        t.check_finite_grads = False
        with pytest.raises(NonFiniteLossError) as e:
            t.train_epoch(tr, 0)
        msgs.append(str(e.value))
    steps = [re.search(r"at step (\d+) \(epoch 1, batch (\d+)\)", m).groups() for m in msgs]
    assert steps[0] == steps[1], msgs
    assert "log_interval=50" in msgs[1]


def test_cli_train_device_cuda(sim_cuda, tmp_path, capsys):
    """`varlens train digits-mlp --device cuda` trains on the device (checkpoints included) to
    the CPU run's test loss (dropout off: the devices' random streams differ)."""
    import argparse
    import json
    from varlens.commands import train as cmd
    p = argparse.ArgumentParser()
    cmd.add_arguments(p)
    res = []
    for dev in ([], ["--device", "cuda"]):
        out = tmp_path / f"run{len(dev)}"
        args = p.parse_args(["digits-mlp", "--epochs", "2", "--hidden", "16", "--dropout", "0", "--lr", "3e-3",
                             "--out", str(out), "--quiet", "--no-progress"] + dev)
        assert cmd.run(args) == 0
        res.append(json.loads((out / "summary.json").read_text()))
    assert res[1]["steps"] == res[0]["steps"] > 0
    np.testing.assert_allclose(res[1]["test_loss"], res[0]["test_loss"], rtol=1e-4)
    assert res[1]["test_acc"] == res[0]["test_acc"] and res[1]["test_loss"] < 2.0


def test_cli_train_device_unavailable(tmp_path, capsys):
    from varlens.commands import train as cmd
    import argparse
    p = argparse.ArgumentParser()
    cmd.add_arguments(p)
    args = p.parse_args(["digits-mlp", "--epochs", "1", "--device", "tpu", "--out", str(tmp_path / "r")])
    assert cmd.run(args) == 2
    assert "--device tpu" in capsys.readouterr().err


# ----------------------------------------------------------------------------- the lens
def _lens_model(device, conv=False):
    vl.manual_seed(7)
    nn = vl.nn
    if conv:
        m = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.AvgPool2d(2),
                          nn.Flatten(), nn.Linear(64, 16), nn.GELU(), nn.Linear(16, 3))
    else:
        m = nn.Sequential(nn.Linear(12, 32), nn.Tanh(), nn.LayerNorm(32), nn.Linear(32, 32), nn.ReLU(),
                          nn.Dropout(0.0), nn.Linear(32, 10), nn.Softmax(dim=-1))
    m = m.double()
    if device is not None:
        m.to(device)
    return m


def _lens_rows(device, sim=None, conv=False):
    from varlens.lens import Lens
    from varlens.lens.compare import compare
    model = _lens_model(device, conv)
    shape = (16, 2, 8, 8) if conv else (64, 12)
    x = vl.tensor(np.random.default_rng(1).standard_normal(shape), dtype=vl.float64)
    if device is not None:
        x = x.to(device)
    lens = Lens(model, weight_every=1)
    syncs = []
    for i in range(3):
        if conv and i == 2:
            model.eval()           # (eval-mode BatchNorm: its per-channel input moments)
        n0 = sim.host_syncs[0] if sim else 0
        out = model(x)
        (out * out).sum().backward()
        lens.step()
        model.zero_grad()
        syncs.append((sim.host_syncs[0] - n0) if sim else 0)
    rows = compare(lens, level="all")
    lens.detach()
    return rows, lens, syncs


@pytest.mark.parametrize("conv", [False, True], ids=["mlp", "conv"])
def test_lens_on_a_device_model_gives_the_cpu_rows(sim_cuda, conv):
    """Lens(model) on a device model: the records' statistics, reduced on the device, and the
    compare rows (predicted and measured second moments, forward and backward) equal the CPU's."""
    rc, lc, _ = _lens_rows(None, conv=conv)
    rd, ld, syncs = _lens_rows("cuda", sim_cuda, conv=conv)
    assert set(lc.records) == set(ld.records) and len(rc) == len(rd) > 10
    for k, a in lc.records.items():
        b = ld.records[k]
        for st in ("out", "grad", "weight", "weight_grad"):
            da, db = getattr(a, st).as_dict(), getattr(b, st).as_dict()
            assert da.keys() == db.keys(), (k, st)
            for f, v in da.items():
                if isinstance(v, float):
                    assert db[f] == pytest.approx(v, rel=1e-9, abs=1e-12), (k, st, f)
                elif isinstance(v, dict):
                    for g, w in v.items():
                        assert db[f][g] == pytest.approx(w, rel=1e-9, abs=1e-12), (k, st, f, g)
                else:
                    assert db[f] == v, (k, st, f)
        if a.unit_q is not None:
            np.testing.assert_allclose(b.unit_q, a.unit_q, rtol=1e-9)
        for f, v in a.params.items():        # what the rules read: scalars and per-channel vectors
            if isinstance(v, float):
                assert b.params[f] == pytest.approx(v, rel=1e-9, abs=1e-12), (k, f)
            elif isinstance(v, np.ndarray):
                assert isinstance(b.params[f], np.ndarray), (k, f)
                np.testing.assert_allclose(b.params[f], v, rtol=1e-9, atol=1e-12, err_msg=f"{k} {f}")
        assert b.inp_var_group == pytest.approx(a.inp_var_group, rel=1e-9, abs=1e-15), k
    for ra, rb in zip(rc, rd):
        a, b = ra.as_dict(), rb.as_dict()
        assert a.keys() == b.keys()
        for f, v in a.items():
            if isinstance(v, float) and not np.isnan(v):
                assert b[f] == pytest.approx(v, rel=1e-8, abs=1e-12), (a["key"], f)
            elif f == "extra":
                assert v.keys() == b[f].keys(), a["key"]
            elif not isinstance(v, float):
                assert b[f] == v, (a["key"], f)
    # a few scalars per recorded tensor come back, not the tensors: bounded by the records
    assert max(syncs) < 12 * len(ld.records), syncs


def test_lens_history_over_a_device_fit(sim_cuda):
    """`varlens train --lens` on the device: the LensHistory points (measured and predicted
    moments, update ratios, activation quantiles) equal the CPU run's."""
    from varlens.lens.history import LensCallback
    pts = []
    for device in (None, "cuda"):
        t, tr, va = _digits_fit(device, log_interval=10)
        cb = LensCallback(every=7)
        t.callbacks.append(cb)
        t.fit(tr, None, epochs=1)
        pts.append(cb.history.points)
    assert len(pts[0]) == len(pts[1]) >= 3
    for a, b in zip(*pts):
        assert [r["key"] for r in a["rows"]] == [r["key"] for r in b["rows"]]
        for ra, rb in zip(a["rows"], b["rows"]):
            for f in ("measured", "predicted"):
                if ra[f] is not None:
                    assert rb[f] == pytest.approx(ra[f], rel=1e-4), (ra["key"], f)
        for n, v in a["update_ratio"].items():
            assert b["update_ratio"][n] == (None if v is None else pytest.approx(v, rel=1e-3)), n
        assert a["quantiles"].keys() == b["quantiles"].keys()
        for k, q in a["quantiles"].items():
            np.testing.assert_allclose(b["quantiles"][k], q, rtol=1e-4, atol=1e-6)


def test_muon_and_averaged_model_on_device(sim_cuda):
    def run(device):
        rng = np.random.default_rng(4)
        ps = [vl.tensor(rng.normal(size=(6, 4)), dtype=vl.float64, device=device, requires_grad=True),
              vl.tensor(rng.normal(size=(3, 5)), dtype=vl.float64, device=device, requires_grad=True)]
        targets = [vl.tensor(rng.normal(size=p.shape), dtype=vl.float64, device=device)._data for p in ps]
        opt = vl.optim.Muon(ps, lr=0.05)
        vl.manual_seed(2)
        model = vl.nn.Linear(4, 3, dtype=vl.float64)       # (drawn on the CPU: the same weights)
        if device is not None:
            model.to(device)
        avg = vl.optim.swa_utils.AveragedModel(model, device=device)
        for _ in range(4):
            opt.zero_grad()
            _loss_and_grad(ps, targets)
            if device is not None:
                with sim_cuda.forbid_host_sync():
                    opt.step()
            else:
                opt.step()
            with vl.no_grad():
                model.weight.mul_(0.9)
            avg.update_parameters(model)
        return ps, avg
    cpu, ac = run(None)
    dev, ad = run(DEV)
    for c, d in zip(cpu, dev):
        assert B.is_device_array(d._data)
        np.testing.assert_allclose(_host(d), c._data, rtol=1e-6)    # (bfloat16-rounded iterations)
    assert B.is_device_array(ad.module.weight._data) and B.is_device_array(ad.n_averaged._data)
    np.testing.assert_allclose(_host(ad.module.weight), ac.module.weight._data, rtol=1e-12)


def test_trainer_device_checkpoint_resume_and_nonfinite_gradient(sim_cuda, tmp_path):
    """A device run checkpointed after one epoch and resumed (optimiser state loaded back onto
    the device) ends where an uninterrupted device run ends; a NaN gradient is named."""
    from varlens.train.trainer import NonFiniteGradientError
    # (dropout on: the device generator's state is in the checkpoint too)
    t, tr, va = _digits_fit("cuda", epochs=2, dropout=0.2)
    straight = t.fit(tr, va, epochs=2)
    t1, tr1, va1 = _digits_fit("cuda", epochs=2, dropout=0.2)
    t1.out_dir = str(tmp_path)
    t1.fit(tr1, va1, epochs=1)
    vl.manual_seed(123)       # (a fresh process would start from other generator states)
    t2, tr2, va2 = _digits_fit("cuda", epochs=2, dropout=0.2)
    t2.out_dir = str(tmp_path)
    resumed = t2.fit(tr2, va2, epochs=2, resume=t1.last_checkpoint)
    assert all(B.is_device_array(v._data) for st in t2.optimizer.state.values()
               for v in st.values() if isinstance(v, vl.Tensor) and v._data.ndim)
    np.testing.assert_allclose(resumed[-1]["train_loss"], straight[-1]["train_loss"], rtol=1e-6)
    np.testing.assert_allclose(resumed[-1]["val_loss"], straight[-1]["val_loss"], rtol=1e-6)

    t3, tr3, _ = _digits_fit("cuda", log_interval=4)
    w = t3.model.net[0].weight if hasattr(t3.model, "net") else next(t3.model.parameters())
    w.register_hook(lambda g: g * float("nan") if t3.step == 2 else g)
    with pytest.raises(NonFiniteGradientError, match=r"at step 3; on the CUDA device"):
        t3.train_epoch(tr3, 0)


def test_noise_scale_of_a_device_model(sim_cuda):
    from varlens.lens.noise_scale import estimate_module

    def run(device):
        vl.manual_seed(3)
        model = vl.nn.Sequential(vl.nn.Linear(6, 8), vl.nn.Tanh(), vl.nn.Linear(8, 1)).double()
        if device is not None:
            model.to(device)
        rng = np.random.default_rng(0)
        X, y = rng.standard_normal((256, 6)), rng.standard_normal((256, 1))
        return estimate_module(model, vl.nn.MSELoss(), X, y, b_small=4, b_big=32, n_batches=6)
    c, d = run(None), run(DEV)
    assert d.b_simple == pytest.approx(c.b_simple, rel=1e-9) and d.g2 == pytest.approx(c.g2, rel=1e-9)


@pytest.mark.simulator_only
def test_lens_statistics_of_device_arrays_with_nan_and_inf(sim_cuda):
    """The device reductions count NaN/Inf and leave them out as the CPU's do, with one copy of
    scalars to the host per array."""
    from varlens.lens.records import Stats, moments, summarize
    rng = np.random.default_rng(5)
    for shape in [(6, 7), (3, 4, 5), (1,), (4, 0)]:
        a = rng.standard_normal(shape)
        if a.size > 3:
            a.reshape(-1)[:3] = [np.nan, np.inf, 0.0]
        d = B.to_namespace(a, B.cuda_namespace())
        n0 = sim_cuda.host_syncs[0]
        sd = summarize(d)
        assert sim_cuda.host_syncs[0] - n0 <= 1
        sc = summarize(a)
        assert sd[0] == sc[0] and sd[4:7] == sc[4:7] and sd[7][0] == sc[7][0] and sd[8] == sc[8], shape
        np.testing.assert_allclose(sd[1:4], sc[1:4], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(sd[7][1:], sc[7][1:], rtol=1e-10, atol=1e-14)
        assert moments(d) == (None if moments(a) is None else pytest.approx(moments(a), rel=1e-12))
        s1, s2 = Stats(), Stats()
        s1.update_param(a)
        s2.update_param(d)
        for f in ("n", "mean", "m2", "amax", "nan", "inf"):
            assert getattr(s2, f) == pytest.approx(getattr(s1, f), rel=1e-12, abs=1e-14), (shape, f)
        for kind in ("tanh", "sigmoid", "softmax"):
            if a.size and a.ndim > 1:
                t1, t2 = Stats(), Stats()
                p = np.tanh(a) if kind == "tanh" else 1 / (1 + np.exp(-a))
                t1.update(p, kind)
                t2.update(B.to_namespace(p, B.cuda_namespace()), kind)
                assert (t2.sat, t2.sat_n, t2.entropy_n) == (t1.sat, t1.sat_n, t1.entropy_n), (shape, kind)
                assert t2.entropy_sum == pytest.approx(t1.entropy_sum, rel=1e-12), (shape, kind)


def test_spectral_norm_and_bn_fusion_on_device(sim_cuda):
    """nn.utils.spectral_norm on a device layer draws u, v there and its power iteration reads
    nothing on the host; fusing an eval BatchNorm into a device conv stays on the device."""
    nn = vl.nn
    lin = nn.Linear(6, 5, device=DEV, dtype=vl.float64)
    nn.utils.spectral_norm(lin)
    assert B.is_device_array(lin.weight_u._data) and B.is_device_array(lin.weight_v._data)
    x = vl.randn(4, 6, device=DEV, dtype=vl.float64)
    with sim_cuda.forbid_host_sync():
        for _ in range(30):
            lin(x)
    sigma = np.linalg.svd(_host(lin.weight_orig), compute_uv=False)[0]
    np.testing.assert_allclose(np.linalg.svd(_host(lin.weight), compute_uv=False)[0], 1.0, rtol=1e-6)
    assert sigma > 0
    vl.manual_seed(0)
    conv, bn = nn.Conv2d(2, 3, 3).double().eval(), nn.BatchNorm2d(3).double().eval()
    bn.running_mean.copy_(vl.tensor([0.1, -0.2, 0.3], dtype=vl.float64))
    bn.running_var.copy_(vl.tensor([1.5, 0.5, 2.0], dtype=vl.float64))
    xc = vl.tensor(np.random.default_rng(0).standard_normal((2, 2, 5, 5)), dtype=vl.float64)
    ref = bn(conv(xc)).detach().numpy()
    conv.to(DEV)
    bn.to(DEV)
    fused = nn.utils.fuse_conv_bn_eval(conv, bn)
    assert B.is_device_array(fused.weight._data) and B.is_device_array(fused.bias._data)
    np.testing.assert_allclose(_host(fused(xc.to(DEV))), ref, rtol=1e-10, atol=1e-12)


def test_grad_scaler_for_cuda_with_a_cpu_loss_keeps_the_scale_on_the_host(sim_cuda):
    """nanoGPT's pattern: the scaler is made for CUDA (enabled because cuda.is_available()), the
    model trains on the CPU.  PyTorch makes the scale on the loss's device at the first scale();
    so does varlens, and the step equals an unscaled step."""
    vl.manual_seed(0)
    m = vl.nn.Linear(4, 1).double()
    ref = vl.nn.Linear(4, 1).double()
    ref.load_state_dict(m.state_dict())
    x, y = vl.randn(8, 4, dtype=vl.float64), vl.randn(8, 1, dtype=vl.float64)
    scaler = vl.cuda.amp.GradScaler(enabled=True)
    opt, opt_ref = vl.optim.SGD(m.parameters(), 0.1), vl.optim.SGD(ref.parameters(), 0.1)
    for _ in range(3):
        opt.zero_grad()
        scaler.scale(((m(x) - y) ** 2).mean()).backward()
        scaler.step(opt)
        scaler.update()
        opt_ref.zero_grad()
        ((ref(x) - y) ** 2).mean().backward()
        opt_ref.step()
    assert scaler.get_scale() == 2.0 ** 16 and not m.weight.is_cuda
    assert_close(m.weight, ref.weight, rtol=1e-12, atol=1e-14)

"""The Trainer: reaching a stated accuracy, determinism, NaN handling, early stopping, lr schedules,
gradient accumulation and clipping, the run folder, and resuming from a checkpoint."""
import json
import math
import os

import numpy as np
import pytest

import varlens as vl
from varlens import nn, optim
from varlens.models import MLP
from varlens.train import checkpoint as C
from varlens.commands.train import blas_threads, train
from varlens.train.recipes import get_recipe
from varlens.train.trainer import NonFiniteLossError, Trainer, latest_checkpoint, list_checkpoints
from varlens.utils.data import DataLoader, TensorDataset


def _toy(n=120, seed=0):
    from varlens.datasets import make_circle
    X, y = make_circle(n, seed=seed)
    return TensorDataset(vl.tensor(X), vl.tensor(y))


def _model(seed=0, dropout=0.0):
    vl.manual_seed(seed)
    return MLP(2, (16,), 2, init="he", dropout=dropout)


def _weights(model):
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


def test_digits_mlp_reaches_95_percent_in_4_epochs(tmp_path):
    """The main job's recipe, shortened: 4 epochs instead of up to 20 (demo: >= 97%)."""
    cfg = get_recipe("digits-mlp")
    cfg["epochs"] = 4
    with blas_threads(1):
        tr, s = train(cfg, str(tmp_path), quiet=True, progress=False)
    assert s["test_acc"] >= 0.95, s
    assert tr.history[-1]["val_acc"] >= 0.93
    assert tr.history[-1]["train_loss"] < tr.history[0]["train_loss"]
    # the run folder a person can look at
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["epoch"] for x in lines] == [1, 2, 3, 4]
    png = (tmp_path / "curves.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    assert json.loads((tmp_path / "summary.json").read_text())["test_acc"] == s["test_acc"]
    assert len(list_checkpoints(str(tmp_path))) == 3                # keep_checkpoints=3
    ck = C.load(latest_checkpoint(str(tmp_path)))
    assert ck["trainer"]["epoch"] == 4 and ck["config"]["recipe"] == "digits-mlp"


def test_same_seed_gives_bit_identical_runs():
    def run(seed):
        model = _model(seed, dropout=0.2)
        opt = optim.Adam(model.parameters(), lr=1e-2)
        dl = DataLoader(_toy(), batch_size=16, shuffle=True, generator=vl.Generator().manual_seed(seed))
        tr = Trainer(model, opt, nn.CrossEntropyLoss(), quiet=True)
        tr.fit(dl, DataLoader(_toy(40, seed=1), batch_size=64), epochs=3)
        return _weights(model), [r["train_loss"] for r in tr.history]
    (w1, h1), (w2, h2), (w3, _) = run(0), run(0), run(1)
    assert h1 == h2
    for k in w1:
        assert np.array_equal(w1[k], w2[k]), k
    assert not np.array_equal(w1["net.0.weight"], w3["net.0.weight"])


def test_nan_loss_stops_with_step_and_keeps_last_good_checkpoint(tmp_path):
    model = _model()
    calls = [0]
    ce = nn.CrossEntropyLoss()

    def loss_fn(out, y):
        calls[0] += 1
        loss = ce(out, y)
        return loss * float("nan") if calls[0] == 11 else loss   # 8 batches per epoch: epoch 2, batch 3
    opt = optim.SGD(model.parameters(), lr=0.1)
    dl = DataLoader(_toy(), batch_size=16)
    tr = Trainer(model, opt, loss_fn, out_dir=str(tmp_path), quiet=True)
    with pytest.raises(NonFiniteLossError, match=r"nan at step 11 \(epoch 2, batch 3\).*step-00000008\.ckpt"):
        tr.fit(dl, epochs=5)
    assert [os.path.basename(p) for p in list_checkpoints(str(tmp_path))] == ["step-00000008.ckpt"]
    good = C.load(list_checkpoints(str(tmp_path))[0])
    assert all(np.all(np.isfinite(v.numpy())) for v in good["model"].values())
    assert all(np.all(np.isfinite(v.numpy())) for v in model.state_dict().values())  # NaN step not taken


def test_early_stopping_with_patience():
    model = _model()
    opt = optim.SGD(model.parameters(), lr=0.0)           # nothing changes: val loss is flat
    tr = Trainer(model, opt, nn.CrossEntropyLoss(), early_stopping=2, quiet=True)
    tr.fit(DataLoader(_toy(), batch_size=32), DataLoader(_toy(40, 1), batch_size=40), epochs=10)
    assert tr.epoch == 3                                  # best at epoch 1, then 2 epochs without gain
    assert "patience 2" in tr.stop_reason


def test_restore_best_loads_best_validation_weights():
    model = _model()
    opt = optim.SGD(model.parameters(), lr=0.5)
    tr = Trainer(model, opt, nn.CrossEntropyLoss(), restore_best=True, quiet=True)
    val = DataLoader(_toy(40, 1), batch_size=40)
    tr.fit(DataLoader(_toy(), batch_size=8), val, epochs=6)
    best = min(r["val_loss"] for r in tr.history)
    assert tr.evaluate(val)["loss"] == pytest.approx(best, rel=1e-6)


def test_scheduler_per_epoch_per_step_and_plateau():
    def run(make, interval, epochs=3, val=True):
        model = _model()
        opt = optim.SGD(model.parameters(), lr=1.0)
        tr = Trainer(model, opt, nn.CrossEntropyLoss(), scheduler=make(opt), scheduler_interval=interval,
                     quiet=True)
        tr.fit(DataLoader(_toy(), batch_size=40), DataLoader(_toy(40, 1), batch_size=40) if val else None,
               epochs=epochs)
        return [r["lr"] for r in tr.history]
    # records hold the lr used in that epoch (logged before the per-epoch step)
    assert run(lambda o: optim.lr_scheduler.StepLR(o, 1, gamma=0.5), "epoch") == [1.0, 0.5, 0.25]
    # 3 batches per epoch, stepped after every optimiser step
    lrs = run(lambda o: optim.lr_scheduler.StepLR(o, 1, gamma=0.5), "step")
    np.testing.assert_allclose(lrs, [0.5 ** 3, 0.5 ** 6, 0.5 ** 9])


def test_plateau_scheduler_gets_validation_loss():
    model = _model()
    opt = optim.SGD(model.parameters(), lr=0.0)
    seen = []
    sched = optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0)
    orig = sched.step
    sched.step = lambda metrics=None, *a: (seen.append(metrics), orig(metrics))
    tr = Trainer(model, opt, nn.CrossEntropyLoss(), scheduler=sched, quiet=True)
    tr.fit(DataLoader(_toy(), batch_size=40), DataLoader(_toy(40, 1), batch_size=40), epochs=2)
    assert seen == [r["val_loss"] for r in tr.history]
    with pytest.raises(ValueError, match="needs a val_loader"):
        Trainer(_model(), opt, nn.CrossEntropyLoss(), scheduler=sched, quiet=True).fit(
            DataLoader(_toy(), batch_size=40), None, epochs=1)


def test_gradient_accumulation_matches_a_larger_batch():
    ds = _toy(64)

    def run(bs, acc):
        model = _model(3)
        opt = optim.SGD(model.parameters(), lr=0.3)
        Trainer(model, opt, nn.CrossEntropyLoss(), accumulate=acc, quiet=True).fit(
            DataLoader(ds, batch_size=bs), epochs=2)
        return _weights(model)
    a, b, c = run(32, 1), run(8, 4), run(8, 1)
    for k in a:
        np.testing.assert_allclose(b[k], a[k], rtol=1e-5, atol=1e-6)
    assert not np.allclose(c["net.0.weight"], a["net.0.weight"])


def test_gradient_clipping_bounds_the_step():
    model = _model()
    before = np.concatenate([p.detach().numpy().ravel().copy() for p in model.parameters()])
    opt = optim.SGD(model.parameters(), lr=1.0)
    tr = Trainer(model, opt, nn.CrossEntropyLoss(), grad_clip=1e-3, quiet=True)
    tr.fit(DataLoader(_toy(), batch_size=120), epochs=1)           # exactly one step
    after = np.concatenate([p.detach().numpy().ravel() for p in model.parameters()])
    assert np.linalg.norm(after - before) <= 1e-3 * (1 + 1e-5)
    assert np.linalg.norm(after - before) > 0.9e-3
    with pytest.raises(ValueError, match="grad_clip must be a positive number"):
        Trainer(model, opt, nn.CrossEntropyLoss(), grad_clip=-1)


@pytest.mark.parametrize("every", [None, 5])
def test_resume_in_process_equals_uninterrupted(tmp_path, every):
    """Stop after 2 of 4 epochs (or mid-epoch at a step checkpoint), resume in a fresh Trainer."""
    def setup(out):
        model = _model(dropout=0.2)
        opt = optim.Adam(model.parameters(), lr=1e-2)
        sched = optim.lr_scheduler.StepLR(opt, 1, gamma=0.7)
        dl = DataLoader(_toy(), batch_size=16, shuffle=True, generator=vl.Generator().manual_seed(7))
        tr = Trainer(model, opt, nn.CrossEntropyLoss(), scheduler=sched, out_dir=str(out), quiet=True,
                     checkpoint_every=every, keep_checkpoints=100)
        return tr, dl, DataLoader(_toy(40, 1), batch_size=40)
    tr, dl, val = setup(tmp_path / "a")
    tr.fit(dl, val, epochs=4)
    ref = _weights(tr.model)
    tr2, dl2, val2 = setup(tmp_path / "b")
    tr2.fit(dl2, val2, epochs=2)
    ck = list_checkpoints(str(tmp_path / "b"))
    start = ck[-2] if every else ck[-1]                  # with step checkpoints, one from mid-epoch 2
    if every:
        assert C.load(start)["data"]["in_epoch"]
    vl.manual_seed(999)                                  # a fresh process would have other RNG state
    tr3, dl3, val3 = setup(tmp_path / "b")
    tr3.fit(dl3, val3, epochs=4, resume=start)
    for k, v in _weights(tr3.model).items():
        assert np.array_equal(v, ref[k]), k
    assert [r["train_loss"] for r in tr3.history] == [r["train_loss"] for r in tr.history]


@pytest.mark.parametrize("init,var", [("he", lambda fi, fo: 2 / fi), ("xavier", lambda fi, fo: 2 / (fi + fo)),
                                      ("lecun", lambda fi, fo: 1 / fi)])
def test_mlp_init_variances(init, var):
    vl.manual_seed(0)
    m = MLP(400, (300,), 200, init=init)
    for lin, (fi, fo) in ((m.net[0], (400, 300)), (m.net[2], (300, 200))):
        w = lin.weight.detach().numpy()
        assert w.shape == (fo, fi)                                  # PyTorch's (out, in)
        assert abs(w.var() / var(fi, fo) - 1) < 0.03                 # 120,000 / 60,000 draws
        assert np.all(lin.bias.detach().numpy() == 0)


def test_mlp_default_init_is_pytorchs_and_layout():
    vl.manual_seed(0)
    m = MLP(100, (50, 20), 3, dropout=0.5, batchnorm=True)
    kinds = [type(layer).__name__ for layer in m.net]
    assert kinds == ["Linear", "BatchNorm1d", "ReLU", "Dropout", "Linear", "BatchNorm1d", "ReLU", "Dropout",
                     "Linear"]
    w = m.net[0].weight.detach().numpy()
    assert np.abs(w).max() <= 1 / math.sqrt(100) and w.var() == pytest.approx(1 / 300, rel=0.1)
    assert m(vl.randn(4, 10, 10)).shape == (4, 3)                   # images are flattened
    with pytest.raises(ValueError, match="init must be one of"):
        MLP(2, (3,), 2, init="glorot")
    with pytest.raises(ValueError, match="dropout must be in"):
        MLP(2, (3,), 2, dropout=1.0)


def test_progress_bar_shows_loss_and_throughput(capsys):
    model = _model()
    tr = Trainer(model, optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(), progress=True,
                 progress_interval=0)
    tr.fit(DataLoader(_toy(), batch_size=16), epochs=1)
    cap = capsys.readouterr()
    assert "epoch 1" in cap.err and "loss=" in cap.err and "samples_s=" in cap.err
    assert "train loss" in cap.out


def test_fit_helper_and_custom_callback_can_stop():
    from varlens.train import Callback, fit

    class StopAtTwo(Callback):
        def __init__(self):
            self.seen = []

        def on_epoch_end(self, trainer, record):
            self.seen.append(record["epoch"])
            if record["epoch"] == 2:
                trainer.should_stop = True
    cb = StopAtTwo()
    model = _model()
    tr = fit(model, optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(),
             DataLoader(_toy(), batch_size=32), epochs=5, callbacks=[cb], quiet=True)
    assert cb.seen == [1, 2] and tr.epoch == 2 and tr.step == 8
    with pytest.raises(ValueError, match="epochs must be a positive int"):
        tr.fit(DataLoader(_toy(), batch_size=32), epochs=0)

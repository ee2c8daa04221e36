"""`varlens train` / `varlens eval` never lose work and never trust a checkpoint's contents
(issue 16): an existing run folder is refused without --resume/--overwrite; a full disk or a
file-size limit names the last good checkpoint; stale .tmp files are removed; a corrupt newest
checkpoint is skipped; the stored config is validated before anything is built; the Trainer
refuses steps with non-finite gradients."""
import errno
import json
import os
import resource
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import varlens as vl
from varlens.cli import main
from varlens.commands.stored_config import MAX_MODEL_BYTES, StoredConfigError, validate_config
from varlens.train import checkpoint as C
from varlens.train import latest_checkpoint, list_checkpoints
from varlens.train.recipes import RECIPES, get_recipe

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAST = ["--epochs", "2", "--hidden", "8", "--quiet", "--no-progress"]


def _train(out, *extra):
    return main(["train", "circle-mlp", "--out", str(out), *FAST, *extra])


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "done"
    assert _train(out) == 0
    return out


def _copy_run(src, dst):
    import shutil
    shutil.copytree(src, dst)
    return dst


# ------------------------------------------------------------------ existing run folders
def test_second_run_without_resume_is_refused_and_keeps_the_checkpoints(finished_run, tmp_path, capsys):
    out = _copy_run(finished_run, tmp_path / "run")
    before = {p: open(p, "rb").read() for p in list_checkpoints(out)}
    assert before
    capsys.readouterr()
    assert _train(out) == 2
    err = capsys.readouterr().err
    assert "already holds a run" in err and "--resume" in err and "--overwrite" in err
    assert "Traceback" not in err
    assert {p: open(p, "rb").read() for p in list_checkpoints(out)} == before     # untouched
    assert _train(out, "--overwrite") == 0
    assert "removed" in capsys.readouterr().out or True
    assert _train(out, "--overwrite", "--resume") == 2
    assert "contradict" in capsys.readouterr().err


def test_a_folder_with_only_other_files_is_refused_too(tmp_path, capsys):
    out = tmp_path / "notes"
    out.mkdir()
    (out / "README.txt").write_text("my notes")
    assert _train(out) == 2
    assert "README.txt" in capsys.readouterr().err
    assert (out / "README.txt").read_text() == "my notes"


# ------------------------------------------------------------------ stale temporary files, corrupt newest
def test_stale_tmp_files_are_removed_on_resume(finished_run, tmp_path, capsys):
    out = _copy_run(finished_run, tmp_path / "run")
    ck = os.path.join(out, "checkpoints")
    stale = [os.path.join(ck, ".step-00000099.ckpt.k3j2.tmp"), os.path.join(out, ".summary.json.x.tmp")]
    for p in stale:
        open(p, "wb").write(b"\0" * 1000)
    keep = os.path.join(ck, "user.tmp")                       # not ours (no leading dot): left alone
    open(keep, "w").write("x")
    capsys.readouterr()
    assert main(["train", "circle-mlp", "--out", str(out), "--epochs", "3", "--hidden", "8", "--no-progress",
                 "--resume"]) == 0
    assert "removed 2 temporary file(s)" in capsys.readouterr().out
    assert not any(os.path.exists(p) for p in stale) and os.path.exists(keep)


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "garbage"])
def test_corrupt_newest_checkpoint_falls_back_for_resume_and_eval(finished_run, tmp_path, capsys, damage):
    out = _copy_run(finished_run, tmp_path / "run")
    cks = list_checkpoints(out)
    newest, previous = cks[-1], cks[-2]
    data = bytearray(open(newest, "rb").read())
    if damage == "truncate":
        data = data[:len(data) // 2]
    elif damage == "flip":
        data[len(data) // 2] ^= 0xFF
    elif damage == "empty":
        data = b""
    else:
        data = os.urandom(len(data))
    open(newest, "wb").write(bytes(data))
    capsys.readouterr()
    assert main(["eval", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"skipping checkpoint {newest}" in err and f"using {previous}" in err
    assert main(["eval", newest]) == 2                       # a named corrupt file: refused, with the alternative
    assert f"newest valid checkpoint of that run is {previous}" in capsys.readouterr().err
    assert main(["train", "circle-mlp", "--out", str(out), "--epochs", "3", "--hidden", "8", "--quiet",
                 "--no-progress", "--resume"]) == 0
    err = capsys.readouterr().err
    assert f"skipping checkpoint {newest}" in err and f"--resume: using {previous}" in err
    assert C.load(latest_checkpoint(out))["trainer"]["epoch"] == 3     # the rewritten newest one is valid


# ------------------------------------------------------------------ full disk / file-size limit
def test_disk_full_names_the_last_good_checkpoint(finished_run, tmp_path, capsys, monkeypatch):
    import stat
    out = tmp_path / "run"
    real_fsync = os.fsync
    calls = []

    def fsync_disk_full(fd):                                 # the third file flushed finds the disk full
        if stat.S_ISREG(os.fstat(fd).st_mode):
            calls.append(fd)
            if len(calls) >= 3:
                raise OSError(errno.ENOSPC, "No space left on device")
        return real_fsync(fd)
    monkeypatch.setattr(os, "fsync", fsync_disk_full)
    code = main(["train", "circle-mlp", "--out", str(out), "--epochs", "5", "--hidden", "8", "--quiet",
                 "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    good = list_checkpoints(out)[-1]
    assert "the disk is full" in err and f"last good checkpoint is {good}" in err and "--resume" in err
    assert C.load(good)["trainer"]["epoch"] == 2
    assert not [n for n in os.listdir(os.path.join(out, "checkpoints")) if n.endswith(".tmp")]


def test_file_size_limit_in_a_real_process(tmp_path):
    """RLIMIT_FSIZE: a checkpoint write fails with EFBIG midway; the message names the last good
    checkpoint, no traceback, no .tmp left, and --resume finishes the run."""
    ref = tmp_path / "ref"
    assert _train(ref, "--epochs", "1") == 0
    limit = os.path.getsize(list_checkpoints(ref)[-1]) + 500        # history grows ~200 bytes an epoch
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "varlens", "train", "circle-mlp", "--out", str(out), "--epochs", "8", "--hidden", "8",
           "--quiet", "--no-progress"]

    def limit_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    r = subprocess.run(cmd, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT, MPLBACKEND="Agg"),
                       capture_output=True, timeout=300, preexec_fn=limit_files)
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert "Traceback" not in err and "file-size limit" in err and "--resume" in err
    good = list_checkpoints(out)[-1]
    assert f"last good checkpoint is {good}" in err
    assert not [n for n in os.listdir(os.path.join(out, "checkpoints")) if n.endswith(".tmp")]
    r = subprocess.run(cmd + ["--resume"], cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT, MPLBACKEND="Agg"),
                       capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    assert C.load(latest_checkpoint(out))["trainer"]["epoch"] == 8


# ------------------------------------------------------------------ eval trusts nothing stored
def _forge_run(tmp_path, finished_run, edit):
    """A copy of a finished run whose newest checkpoint was rewritten by ``edit(state)``."""
    out = _copy_run(finished_run, tmp_path / "forged")
    for p in list_checkpoints(out)[:-1]:
        os.unlink(p)
    ck = list_checkpoints(out)[-1]
    s = C.load(ck)
    edit(s)
    C.save(s, ck)
    return out


@pytest.mark.parametrize("case,expect", [
    ("huge_hidden", "GiB"), ("missing_dataset", "holds no recipe config"), ("missing_lr", "missing key 'lr'"),
    ("nan_weights", "NaN or Inf"), ("bad_type", "batch_size must be an int"), ("no_model", "no 'model'"),
    ("shape_mismatch", "do not fit the model"), ("bad_trainer", "'trainer' entry is not a dict")])
def test_eval_validates_the_stored_checkpoint(finished_run, tmp_path, capsys, case, expect):
    def edit(s):
        if case == "huge_hidden":
            s["config"]["hidden"] = [200_000, 200_000]
        elif case == "missing_dataset":
            del s["config"]["dataset"]
        elif case == "missing_lr":
            del s["config"]["lr"]
        elif case == "nan_weights":
            for k in s["model"]:
                s["model"][k] = vl.full_like(s["model"][k], float("nan"))
            s["trainer"]["best_state"] = None
        elif case == "bad_type":
            s["config"]["batch_size"] = "32"
        elif case == "no_model":
            del s["model"]
        elif case == "shape_mismatch":
            s["config"]["hidden"] = [9]
        elif case == "bad_trainer":
            s["trainer"] = [1]
    out = _forge_run(tmp_path, finished_run, edit)
    capsys.readouterr()
    assert main(["eval", str(out)]) == 2
    err = capsys.readouterr().err
    assert expect in err and "Traceback" not in err, err
    assert main(["lens", "--checkpoint", str(out), "--steps", "1"]) == 2
    assert expect in capsys.readouterr().err


CONFIG_KEYS = sorted({k for r in RECIPES.values() for k in r} - {"description"})
hostile = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70), st.floats(allow_nan=True),
                    st.text(max_size=5), st.lists(st.integers(-5, 10 ** 7), max_size=5),
                    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2))


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(st.sampled_from(sorted(RECIPES)), st.dictionaries(st.sampled_from(CONFIG_KEYS), hostile, min_size=1, max_size=3),
       st.lists(st.sampled_from(CONFIG_KEYS), max_size=2))
def test_generated_configs_are_validated_or_within_the_size_limit(recipe, changes, dropped):
    from varlens.commands.stored_config import estimate_bytes
    cfg = get_recipe(recipe)
    cfg.update(changes)
    for k in dropped:
        cfg.pop(k, None)
    try:
        validate_config(cfg)
    except StoredConfigError as e:
        assert str(e).startswith(("config:", "unknown")), e
        return
    assert estimate_bytes(cfg) <= MAX_MODEL_BYTES


def test_every_recipe_passes_and_the_estimate_is_an_upper_bound():
    from varlens.commands.stored_config import estimate_parameters
    from varlens.train.recipes import build_model
    for name in RECIPES:
        cfg = validate_config(get_recipe(name))
        C_, H, W = {"digits": (1, 8, 8), "fashion-mnist": (1, 28, 28)}.get(cfg["dataset"], (2, 1, 1))
        vl.manual_seed(0)
        n = sum(p.numel() for p in build_model(cfg, C_ * H * W, 10).parameters())
        est = estimate_parameters(cfg)
        assert n <= est <= 3 * n + 10_000, (name, n, est)


# ------------------------------------------------------------------ the Trainer refuses non-finite gradients
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_trainer_refuses_a_step_with_nonfinite_gradients():
    from varlens.train import NonFiniteGradientError, Trainer
    from varlens.utils.data import DataLoader, TensorDataset
    vl.manual_seed(0)
    model = vl.nn.Sequential(vl.nn.Linear(2, 4), vl.nn.Linear(4, 2))
    # sqrt at 0: a finite loss (0) whose gradient is inf
    loss_fn = lambda out, y: (out[:, :1] * 0).abs().sqrt().sum() + vl.nn.functional.cross_entropy(out, y) * 0  # noqa: E731
    data = DataLoader(TensorDataset(vl.randn(8, 2), vl.zeros(8, dtype=vl.int64)), batch_size=4)
    before = [p.detach().clone() for p in model.parameters()]
    tr = Trainer(model, vl.optim.SGD(model.parameters(), lr=0.1), loss_fn, quiet=True)
    with pytest.raises(NonFiniteGradientError, match=r"parameter '0\.weight' holds NaN or Inf at step 1"):
        tr.fit(data, epochs=1)
    assert all(np.array_equal(a.numpy(), p.detach().numpy()) for a, p in zip(before, model.parameters()))
    assert isinstance(NonFiniteGradientError("x"), FloatingPointError)
    tr = Trainer(model, vl.optim.SGD(model.parameters(), lr=0.1), loss_fn, quiet=True, check_finite_grads=False)
    from varlens.train import NonFiniteLossError
    with pytest.raises(NonFiniteLossError, match="at step 2"):   # the option off: the NaN step was applied
        tr.fit(data, epochs=1)
    assert not all(np.isfinite(p.detach().numpy()).all() for p in model.parameters())

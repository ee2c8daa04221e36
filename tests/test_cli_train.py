"""`varlens train` / `varlens eval` / `varlens --help`, and crash-safety: a training process killed
with SIGKILL mid-run resumes to exactly the weights of a run that was never interrupted."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from varlens.cli import main
from varlens.train import checkpoint as C
from varlens.train.trainer import latest_checkpoint, list_checkpoints

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_top_level_help_lists_commands(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and "train" in out and "eval" in out


def test_train_help_lists_recipes_and_examples(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = capsys.readouterr().out
    for word in ("digits-mlp", "fashion-mlp", "--lr", "--batch-size", "--resume", "examples:"):
        assert word in out


def test_misspelt_recipe_suggests_and_lists(capsys):
    assert main(["train", "digts-mlp"]) == 2
    err = capsys.readouterr().err
    assert "Did you mean 'digits-mlp'" in err and "fashion-mlp" in err


def test_misspelt_option_suggests_and_lists(capsys):
    with pytest.raises(SystemExit) as e:
        main(["train", "digits-mlp", "--lrr", "0.1"])
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert "unknown option --lrr" in err and "Did you mean --lr" in err and "--batch-size" in err


def test_misspelt_choice_value_suggests(capsys):
    assert main(["train", "circle-mlp", "--optimizer", "adamm", "--quiet"]) == 2
    assert "Did you mean 'adam'" in capsys.readouterr().err


def test_train_then_eval_a_checkpoint(tmp_path, capsys):
    out = str(tmp_path / "run")
    assert main(["train", "circle-mlp", "--epochs", "3", "--out", out, "--quiet"]) == 0
    summary = json.loads(open(os.path.join(out, "summary.json")).read())
    capsys.readouterr()
    assert main(["eval", out]) == 0
    printed = capsys.readouterr().out
    assert f"accuracy {100 * summary['test_acc']:.2f}%" in printed
    # a corrupted checkpoint is refused with a clear error; eval of it fails cleanly
    ck = latest_checkpoint(out)
    data = open(ck, "rb").read()
    with open(ck, "wb") as f:
        f.write(data[: len(data) - 100])
    assert main(["eval", ck]) == 2
    assert "truncated or corrupted" in capsys.readouterr().err


def _cmd(out, *extra):
    return [sys.executable, "-m", "varlens", "train", "circle-mlp", "--out", out, "--epochs", "10",
            "--batch-size", "64", "--hidden", "16", "--dropout", "0.1", "--scheduler", "step", "--checkpoint-every", "9",
            "--no-progress", "--quiet", *extra]


def _final(out):
    return C.load(latest_checkpoint(out))


def test_sigkill_mid_run_then_resume_is_bit_identical(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT)
    killed, ref = str(tmp_path / "killed"), str(tmp_path / "ref")
    p = subprocess.Popen(_cmd(killed), cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while len(list_checkpoints(killed)) < 2 and p.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    assert p.poll() is None, "training finished before it could be killed: " + p.stderr.read().decode()
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    assert p.returncode == -signal.SIGKILL
    before = list_checkpoints(killed)
    assert before, "no checkpoint was written before the kill"
    step_at_kill = C.load(before[-1])["trainer"]["step"]
    assert 0 < step_at_kill < 10 * 25                              # really mid-run
    r = subprocess.run(_cmd(killed, "--resume"), cwd=ROOT, env=env, capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    r = subprocess.run(_cmd(ref), cwd=ROOT, env=env, capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    lines = open(os.path.join(killed, "metrics.jsonl")).read().splitlines()
    assert [json.loads(x)["epoch"] for x in lines] == list(range(1, 11))   # no duplicates after resume
    a, b = _final(killed), _final(ref)
    assert a["trainer"]["step"] == b["trainer"]["step"] == 10 * 25
    for k in b["model"]:
        assert np.array_equal(a["model"][k].numpy(), b["model"][k].numpy()), k
    for pid, st in b["optimizer"]["state"].items():
        for k, v in st.items():
            assert np.array_equal(np.asarray(a["optimizer"]["state"][pid][k]), np.asarray(v)), (pid, k)
    assert a["trainer"]["history"] == [dict(h, time_s=a["trainer"]["history"][i]["time_s"],
                                            samples_per_s=a["trainer"]["history"][i]["samples_per_s"])
                                       for i, h in enumerate(b["trainer"]["history"])]


def test_resume_refuses_other_settings(tmp_path, capsys):
    out = str(tmp_path / "run")
    assert main(["train", "circle-mlp", "--epochs", "1", "--out", out, "--quiet"]) == 0
    capsys.readouterr()
    assert main(["train", "circle-mlp", "--epochs", "2", "--lr", "0.5", "--out", out, "--quiet",
                 "--resume"]) == 2
    assert "lr: 0.1 there, 0.5 here" in capsys.readouterr().err
    assert main(["train", "circle-mlp", "--epochs", "2", "--out", out, "--quiet", "--resume"]) == 0


def test_missing_fashion_data_says_how_to_get_it(tmp_path, capsys):
    assert main(["train", "fashion-mlp", "--data-root", str(tmp_path), "--out", str(tmp_path / "r"),
                 "--quiet"]) == 2
    assert "make data" in capsys.readouterr().err

"""varlens.teach: every exercise's reference solution passes all five checks, the blank template
fails them, typical wrong answers are caught, and the CLI + pytest grading flow works offline."""
import os
import subprocess
import sys
import types

import pytest

from varlens.teach import exercises as E


def _load(src, name="student"):
    mod = types.ModuleType(name)
    exec(compile(src, name, "exec"), mod.__dict__)
    return mod


@pytest.mark.parametrize("name", list(E.EXERCISES))
def test_solution_passes_and_blank_fails(name):
    sol = _load(E.template(name, solution=True))
    res = E.grade(name, getattr(sol, E.class_name(name)))
    assert [r.check for r in res] == ["implemented", "shapes", "reference", "finite_differences", "edge_cases"]
    assert all(r.passed for r in res), [(r.check, r.message) for r in res if not r.passed]
    blank = _load(E.template(name))
    res = E.grade(name, getattr(blank, E.class_name(name)))
    assert not any(r.passed for r in res) and "not written yet" in res[0].message


WRONG = {
    # ReLU's derivative taken as 1 at x = 0: only the edge case sees it
    "relu": ("(x > 0)", "(x >= 0)", {"edge_cases"}),
    # softmax-CE without the 1/N of the mean
    "softmax_cross_entropy": ("grad_out * p / logits.shape[0], None", "grad_out * p, None",
                              {"reference", "finite_differences", "edge_cases"}),
    # batch norm without the variance path
    "batch_norm": (" - xhat * (gx * xhat).mean(0, keepdim=True)", "", {"reference", "finite_differences"}),
    # attention without the 1/sqrt(d) in the backward
    "attention": ("keepdim=True)) / q.shape[-1] ** 0.5", "keepdim=True))", {"reference", "finite_differences"}),
}


@pytest.mark.parametrize("name", list(WRONG))
def test_typical_mistakes_are_caught(name):
    old, new, failing = WRONG[name]
    src = E.template(name, solution=True)
    assert old in src
    mod = _load(src.replace(old, new))
    res = {r.check: r for r in E.grade(name, getattr(mod, E.class_name(name)))}
    assert {c for c, r in res.items() if not r.passed} >= failing
    assert res["implemented"].passed and res["shapes"].passed


def test_cli_new_check_and_pytest_grading(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    run = lambda *a: subprocess.run([sys.executable, "-m", "varlens", "teach", *a], capture_output=True,  # noqa: E731
                                    text=True, cwd=tmp_path, env=env, timeout=300)
    out = run("list")
    assert out.returncode == 0 and "lstm_cell" in out.stdout
    assert run("new", "relu").returncode == 0
    assert (tmp_path / "relu_exercise.py").exists() and (tmp_path / "test_relu_grading.py").exists()
    out = run("check", "relu_exercise.py")
    assert out.returncode == 1 and "0 passed, 5 failed" in out.stdout
    assert run("new", "relu").returncode == 2                       # never overwrites without --force
    assert run("new", "relu", "--solution", "--force").returncode == 0
    out = run("check", "relu_exercise.py")
    assert out.returncode == 0 and "5 passed, 0 failed" in out.stdout
    py = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "exercise", "-p", "no:cacheprovider",
                         "test_relu_grading.py"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert py.returncode == 0 and "5 passed" in py.stdout, py.stdout + py.stderr
    assert run("new", "nonsense").returncode == 2

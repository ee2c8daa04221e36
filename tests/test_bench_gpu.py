"""benchmarks/bench_gpu.py keeps running: its whole code path at tiny sizes on the simulated CUDA
device (``--simulated``), and without a GPU it says so and exits 0 instead of printing figures."""
from __future__ import annotations

import importlib.util
import pathlib

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "bench_gpu.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_gpu", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_bench_gpu_runs_on_the_simulated_device(capsys):
    from varlens.core import array as B
    prev = B._cuda[0]
    assert _bench().main(["--simulated"]) == 0
    assert B._cuda[0] is prev, "bench_gpu --simulated left the simulator on"
    out = capsys.readouterr().out
    assert "Simulated smoke check" in out and "These figures measure nothing" in out
    for row in ("(a) GPT step", "(b) MLP", "(c) matmul", "(d) peak GPU memory"):
        assert row in out, f"{row!r} missing from the report"


def test_bench_gpu_without_a_gpu_measures_nothing(capsys):
    from varlens.core import array as B
    if B.cuda_namespace(required=False) is not None:
        pytest.skip("a GPU (or the simulator) is the cuda device here: the full benchmark would run")
    assert _bench().main([]) == 0
    out = capsys.readouterr().out
    assert "no CUDA GPU with CuPy here" in out and "nothing measured" in out
    assert "|" not in out, "figures were printed without a GPU"


def test_bench_gpu_refuses_to_write_simulated_figures():
    with pytest.raises(SystemExit):
        _bench().main(["--simulated", "--write"])

"""Public-style PyTorch programs (tests/programs/) run unchanged on the CUDA device: their own
device code (``torch.accelerator.is_available()``, ``--accel``, ``--device cuda``) picks the
simulated CUDA library here (VARLENS_SIMULATED_CUDA=1), which refuses NumPy math on device
arrays and host arrays mixed into device ops.  Each must finish, put its model on the device (the
simulator's peak of device bytes is printed by run_as.py), and reach PyTorch's CPU loss within
the seed-noise tolerance of tests/test_programs.py (the device draws its own random numbers, so a
device run is one more seed of the same experiment)."""
import os
import re
import subprocess
import sys

import pytest

from test_programs import CASES, PROGRAMS, _final_loss, _start

TOL = {(p, tuple(a)): t for p, a, t in CASES}

# program, its arguments on the CPU (the key into CASES), the arguments that turn the device on
DEVICE_CASES = [
    ("mnist.py", [], []),                                   # torch.accelerator.is_available()
    ("vae.py", [], []),
    ("word_language_model.py", [], ["--accel"]),
    ("mnist_rnn.py", [], ["--accel"]),
    ("dcgan.py", [], ["--accel"]),
    ("super_resolution.py", [], ["--accel"]),
    ("makemore.py", ["--type", "transformer"], ["--device", "cuda"]),
    ("nn_tutorial.py", [], []),
]


def _start_on_device(program, args):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONWARNINGS="ignore", VARLENS_SIMULATED_CUDA="1")
    return subprocess.Popen([sys.executable, os.path.join(PROGRAMS, "run_as.py"), "varlens",
                             os.path.join(PROGRAMS, program), *args], cwd=PROGRAMS, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.parametrize("program,args,device_args", DEVICE_CASES,
                         ids=[" ".join([c[0]] + c[1] + c[2]) for c in DEVICE_CASES])
def test_program_runs_on_the_device_to_torchs_loss(program, args, device_args):
    pt, pv = _start("torch", program, args), _start_on_device(program, args + device_args)
    t = _final_loss(pt, "torch", program)
    out, _ = pv.communicate(timeout=900)
    assert pv.returncode == 0, f"{program} failed on the device:\n{out[-3000:]}"
    v = float(re.findall(r"^final_loss: (\S+)$", out, re.M)[-1])
    peak = int(re.findall(r"^device_peak_bytes: (\d+)$", out, re.M)[-1])
    assert peak > 0, f"{program}: nothing was put on the device"
    tol = TOL[(program, tuple(args))]
    allowed = max(tol or 0.0, 0.05 * abs(t))
    assert abs(v - t) <= allowed, f"{program} {args + device_args}: final loss on the device {v:.6g}, " \
                                  f"torch (CPU) {t:.6g} (allowed {allowed:.3g})"

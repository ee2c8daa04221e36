"""The process group: which process this is, how many there are, and how they reach each other.

varlens's one backend is MPI through mpi4py: the launcher (``mpiexec -n N``, a cluster's own
``mpirun``, Slurm's ``srun --mpi=pmi2``) starts the processes and tells each its rank, so there
is no rendezvous address to configure.  PyTorch's backend names ``"gloo"`` and ``"nccl"`` are
accepted and mean MPI here (docs/distributed.md), so unchanged PyTorch scripts run.

mpi4py is imported only when a group is initialised, so ``import varlens.distributed`` works
without it; ``init_process_group`` then says how to install it.

Failure handling (a job never hangs): after ``init_process_group`` an uncaught exception on
any rank prints its traceback and ``rank R of N failed with ...`` and calls MPI Abort, which
ends every rank; every wait in a collective is bounded by the group's ``timeout`` (PyTorch's
default, 30 minutes) and raises on expiry, which then aborts the same way.  A rank killed by
a signal is detected by the MPI launcher itself, which ends the others (MPICH's hydra within
a second on one machine).
"""
from __future__ import annotations

import datetime
import os
import sys
import time

_BACKENDS = ("mpi", "gloo", "nccl", "ucc")
DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)  # torch.distributed's default for CPU backends

# environment variables each MPI launcher sets: (rank, size, local rank, local size)
_LAUNCHER_ENV = (
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),  # MPICH / Intel MPI (hydra)
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"),  # Open MPI
    ("PMIX_RANK", None, None, None),
    ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", None),  # srun
)


def _launcher_env():
    """(rank, world size, local rank, local world size) as the MPI launcher set them, each
    None when unknown; all None when the process was not started by a launcher."""
    for names in _LAUNCHER_ENV:
        if names[0] in os.environ:
            return tuple(int(os.environ[n]) if n is not None and n in os.environ else None for n in names)
    return (None, None, None, None)


def export_launcher_env():
    """Set torchrun's RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE from the MPI launcher's
    variables where they are not already set, so a PyTorch script that reads
    ``os.environ["LOCAL_RANK"]`` before ``init_process_group`` runs unchanged under mpiexec.
    Called when varlens.distributed is imported; changes nothing outside a launcher."""
    vals = _launcher_env()
    for name, v in zip(("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"), vals):
        if v is not None and name not in os.environ:
            os.environ[name] = str(v)


class ProcessGroup:
    """A set of ranks and the MPI communicator that connects them (PyTorch's ProcessGroup).

    ``ranks`` are global ranks in group order; ``comm`` is None on a process that is not a
    member (PyTorch's GroupMember.NON_GROUP_MEMBER)."""

    def __init__(self, comm, ranks, timeout):
        self.comm = comm
        self.ranks = list(ranks)
        self.timeout = timeout

    def rank(self):
        return -1 if self.comm is None else self.comm.Get_rank()

    def size(self):
        return len(self.ranks)

    def group_rank(self, global_rank, what="src"):
        """The rank inside this group of global rank ``global_rank`` (PyTorch's collectives
        take global ranks for src/dst)."""
        try:
            return self.ranks.index(global_rank)
        except ValueError:
            raise ValueError(f"{what}={global_rank} is not a member of this group (its global ranks are "
                             f"{self.ranks})") from None

    def name(self):
        return "mpi"

    def __repr__(self):
        return f"ProcessGroup(backend='mpi', ranks={self.ranks})"


class _World:
    """The default group and the init state (one per process)."""
    group = None
    backend = None
    mpi = None  # the mpi4py.MPI module once initialised
    prev_excepthook = None


_world = _World()


class group:
    """``dist.group.WORLD``: the default group (None before init_process_group)."""
    WORLD = None


class GroupMember:
    WORLD = None
    NON_GROUP_MEMBER = -100


def is_available():
    """True: the distributed API exists (MPI itself is needed only by init_process_group)."""
    return True


def is_mpi_available():
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def is_gloo_available():
    return False


def is_nccl_available():
    return False


def is_initialized():
    return _world.group is not None


def is_torchelastic_launched():
    return "TORCHELASTIC_RUN_ID" in os.environ


def _mpi():
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise RuntimeError(
            "varlens.distributed needs MPI through mpi4py: `pip install mpi4py mpich` (or the extra "
            "`pip install varlens[distributed]`), or on a cluster build mpi4py against the cluster's MPI "
            f"(`pip install --no-binary mpi4py mpi4py`); the import failed with: {e}") from None
    return MPI


def _timeout_seconds(timeout):
    if timeout is None:
        timeout = DEFAULT_TIMEOUT
    if isinstance(timeout, datetime.timedelta):
        s = timeout.total_seconds()
    elif isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        s = float(timeout)
    else:
        raise TypeError(f"init_process_group: timeout must be a datetime.timedelta, got {type(timeout).__name__}")
    if s <= 0:
        raise ValueError(f"init_process_group: timeout must be positive, got {timeout}")
    return s


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                       group_name="", pg_options=None, device_id=None):
    """Join the job's default process group (torch.distributed.init_process_group).

    ``backend``: "mpi" (or None); PyTorch's "gloo", "nccl", "ucc" and "cpu:gloo,cuda:nccl" are
    accepted and run on MPI too.  Rank and world size come from the MPI launcher; ``rank``,
    ``world_size`` and torchrun's RANK / WORLD_SIZE / LOCAL_RANK variables, when given, must
    agree with it (a mismatch raises ValueError rather than training on the wrong shard).
    ``init_method`` and ``store`` are accepted and unused: MPI's launcher does the rendezvous.
    ``timeout`` (timedelta, default 30 min) bounds every collective's wait.
    """
    if _world.group is not None:
        raise ValueError("trying to initialize the default process group twice!")
    if backend is not None:
        if not isinstance(backend, str):
            raise TypeError(f"init_process_group: backend must be a str, got {type(backend).__name__}")
        for part in backend.lower().split(","):
            name = part.split(":")[-1].strip()
            if name not in _BACKENDS:
                raise ValueError(f"init_process_group: unknown backend {backend!r}; varlens runs every "
                                 f"backend on MPI and accepts {', '.join(repr(b) for b in _BACKENDS)}")
    tsec = _timeout_seconds(timeout)
    MPI = _mpi()
    comm = MPI.COMM_WORLD
    r, n = comm.Get_rank(), comm.Get_size()
    local = comm.Split_type(MPI.COMM_TYPE_SHARED, key=r)
    lr, ln = local.Get_rank(), local.Get_size()
    local.Free()
    checks = [("rank", rank, r), ("world_size", world_size, n)]
    for env, mpi_val in (("RANK", r), ("WORLD_SIZE", n), ("LOCAL_RANK", lr), ("LOCAL_WORLD_SIZE", ln)):
        if env in os.environ:
            try:
                checks.append((f"environment variable {env}", int(os.environ[env]), mpi_val))
            except ValueError:
                raise ValueError(f"init_process_group: environment variable {env} must be an integer, "
                                 f"got {os.environ[env]!r}") from None
    for what, given, actual in checks:
        if given is not None and given != -1 and given != actual:
            raise ValueError(f"init_process_group: {what} is {given} but the MPI launcher started this "
                             f"process as rank {r} of {n} (local rank {lr} of {ln}); launch with "
                             f"`mpiexec -n N` and leave {what} unset, or make them agree")
    for env, v in (("RANK", r), ("WORLD_SIZE", n), ("LOCAL_RANK", lr), ("LOCAL_WORLD_SIZE", ln)):
        os.environ.setdefault(env, str(v))
    _world.mpi = MPI
    _world.backend = "mpi"
    _world.group = ProcessGroup(comm, range(n), tsec)
    group.WORLD = GroupMember.WORLD = _world.group
    if n > 1:
        _install_abort_hook()
    if "VARLENS_DIST_RUN_DIR" in os.environ:  # started by varlens.distributed.run: let it name this rank
        from varlens.distributed.run import record_rank
        record_rank(r)


def _install_abort_hook():
    """An uncaught exception on this rank ends the whole job (MPI Abort) with a message naming
    the rank, instead of leaving the other ranks waiting in their next collective."""
    if _world.prev_excepthook is not None:
        return
    prev = _world.prev_excepthook = sys.excepthook

    def _abort(etype, value, tb):
        prev(etype, value, tb)
        if _world.group is not None and not issubclass(etype, (SystemExit, KeyboardInterrupt)):
            g = _world.group
            sys.stderr.write(f"varlens.distributed: rank {g.comm.Get_rank()} of {g.size()} failed with "
                             f"{etype.__name__}: {value}; aborting every rank of the job (MPI Abort)\n")
            _flush_before_abort()
            g.comm.Abort(1)
    sys.excepthook = _abort


def abort(message, errorcode=1):
    """End every rank of the job now, after writing ``message`` (naming this rank) to stderr."""
    g = _world.group
    r = g.comm.Get_rank() if g is not None else 0
    sys.stderr.write(f"varlens.distributed: rank {r}: {message}; aborting every rank of the job (MPI Abort)\n")
    _flush_before_abort()
    (g.comm if g is not None else _mpi().COMM_WORLD).Abort(errorcode)


def _flush_before_abort():
    """Flush both streams and give the launcher a moment to forward them: MPICH's launcher relays
    a rank's output asynchronously, and an immediate Abort could drop the message that names the
    failing rank (seen about once in ten jobs)."""
    import time
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed stream must not stop the abort
            pass
    time.sleep(0.2)


def destroy_process_group(group=None):
    """Leave the default group (or free ``group``).  MPI itself is finalised at exit."""
    if group is None or group is _world.group:
        if _world.group is None:
            raise ValueError("destroy_process_group: the default process group has not been initialized")
        _world.group = None
        globals()["group"].WORLD = GroupMember.WORLD = None
        if _world.prev_excepthook is not None:
            sys.excepthook = _world.prev_excepthook
            _world.prev_excepthook = None
        return
    if group.comm is not None:
        group.comm.Free()
        group.comm = None


def _default_group(g=None, what="this call"):
    if _world.group is None:
        raise ValueError(f"{what}: Default process group has not been initialized, please make sure to call "
                         "init_process_group.")
    return _world.group if g is None else g


def get_rank(group=None):
    """This process's rank in ``group`` (default: the world); -1 if it is not a member."""
    return _default_group(group, "get_rank").rank()


def get_world_size(group=None):
    g = _default_group(group, "get_world_size")
    return -1 if g.comm is None else g.size()


def get_backend(group=None):
    _default_group(group, "get_backend")
    return _world.backend


def get_global_rank(group, group_rank):
    return group.ranks[group_rank]


def get_process_group_ranks(group):
    return list(group.ranks)


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False):
    """A subgroup of the given global ranks (torch.distributed.new_group); every rank of the
    world calls it, non-members get a group on which collectives do nothing."""
    world = _default_group(None, "new_group")
    n = world.size()
    ranks = list(range(n)) if ranks is None else [int(r) for r in ranks]
    for r in ranks:
        if not 0 <= r < n:
            raise ValueError(f"new_group: rank {r} is out of range for a world of size {n}")
    if len(set(ranks)) != len(ranks):
        raise ValueError(f"new_group: ranks {ranks} contain duplicates")
    ranks = sorted(ranks)
    comm = world.comm.Create(world.comm.Get_group().Incl(ranks))
    MPI = _world.mpi
    tsec = world.timeout if timeout is None else _timeout_seconds(timeout)
    return ProcessGroup(None if comm == MPI.COMM_NULL else comm, ranks, tsec)


def wait_all(requests, what, group):
    """Wait for MPI requests, polling (so MPI progresses) and giving up after the group's
    timeout with an error naming the operation, which then aborts the job.  Polls without
    sleeping (yielding the core between polls) for the first 2 ms, since a short message
    completes in microseconds, then sleeps between polls, up to 1 ms, so a long wait leaves
    the core to the other ranks."""
    MPI = _world.mpi
    testall = MPI.Request.Testall
    if testall(requests):
        return
    now = time.monotonic
    t0 = now()
    spin_until = t0 + 2e-3
    yield_ = os.sched_yield if hasattr(os, "sched_yield") else (lambda: None)
    while now() < spin_until:
        if testall(requests):
            return
        yield_()  # on a machine with more processes than cores, let the other ranks run
    deadline = t0 + group.timeout
    pause = 2e-5
    while not testall(requests):
        time.sleep(pause)
        pause = min(pause * 1.5, 1e-3)
        if now() > deadline:
            raise RuntimeError(
                f"varlens.distributed: {what} on rank {group.comm.Get_rank()} did not complete within "
                f"the timeout of {group.timeout:g} s (another rank stopped, or took a different "
                "collective); set init_process_group(timeout=...) for longer steps")


PROGRESS_MODES = ("hooks", "thread", "none")


def progress_mode():
    """How DistributedDataParallel drives MPI while the backward runs, from the environment
    variable VARLENS_DDP_PROGRESS (docs/distributed.md, "Overlapping communication"):
    ``hooks`` (default) tests the allreduces in flight in every gradient hook; ``thread`` also
    runs a ProgressThread during the backward; ``none`` leaves them to the final wait (MPICH's
    own progress thread, MPIR_CVAR_ASYNC_PROGRESS=1, can then do it)."""
    mode = os.environ.get("VARLENS_DDP_PROGRESS", "hooks").strip().lower() or "hooks"
    if mode not in PROGRESS_MODES:
        raise ValueError(f"environment variable VARLENS_DDP_PROGRESS must be one of {', '.join(PROGRESS_MODES)}, "
                         f"got {os.environ['VARLENS_DDP_PROGRESS']!r}")
    return mode


class ProgressThread:
    """Keeps MPI's non-blocking operations moving while the main thread computes.

    MPICH advances a non-blocking allreduce only inside MPI calls; DistributedDataParallel's
    buckets would otherwise mostly wait for the end of backward.  Between ``start()`` and
    ``stop()`` this daemon thread makes a cheap MPI call (Iprobe on a private communicator) every ``interval``
    seconds; NumPy's matrix products release the GIL, so it runs during the backward's GEMMs."""

    def __init__(self, comm, interval=1e-4):
        import threading
        self._comm = comm.Dup()
        self._interval = interval
        self._on = threading.Event()
        self._thread = threading.Thread(target=self._run, name="varlens-mpi-progress", daemon=True)
        self._thread.start()

    def _run(self):
        comm, on, sleep, iv = self._comm, self._on, time.sleep, self._interval
        while True:
            on.wait()
            comm.Iprobe()
            sleep(iv)

    def start(self):
        self._on.set()

    def stop(self):
        self._on.clear()

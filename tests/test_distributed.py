"""varlens.distributed, DistributedDataParallel and SyncBatchNorm under ``mpiexec -n 2``.

Each MPI test runs a script of tests/mpi/ (or tests/programs/) as a 2-rank job on this machine
(MPICH from PyPI, shared memory on loopback) in a subprocess with a timeout, and checks its exit
status and output; the scripts compare every result with the single-process answer themselves.
"""
import os
import re
import subprocess
import sys
import time

import pytest

import varlens
import varlens.distributed as dist

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MPIEXEC = os.path.join(os.path.dirname(sys.executable), "mpiexec")
KILL_BOUND_S = 10.0  # a job with a dead or failed rank ends within this long after the failure (~1 s measured)


def _env():
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1", HYDRA_LAUNCHER="fork")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        env.pop(k, None)
    return env


def mpirun(*args, n=2, timeout=120, runner=False):
    """Run ``python ARGS`` as an n-rank MPI job; returns (exit status, output, seconds)."""
    if runner:
        cmd = [sys.executable, "-m", "varlens.distributed.run", "-n", str(n)] + list(args)
    else:
        cmd = [MPIEXEC, "-n", str(n), sys.executable] + list(args)
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout, time.monotonic() - t0


def test_mpi_runtime_installed():
    assert os.path.exists(MPIEXEC), "mpiexec missing: `pip install mpich` (a dependency of varlens[test])"
    import mpi4py  # noqa: F401


def test_every_collective_matches_one_process():
    rc, out, _ = mpirun("tests/mpi/collectives.py")
    assert rc == 0, out
    assert out.count("OK collectives rank") == 2, out


def test_ddp_two_ranks_equal_one_process_sgd_and_adam():
    rc, out, _ = mpirun("tests/mpi/ddp_equivalence.py")
    assert rc == 0, out
    assert out.count("OK ddp rank") == 2, out
    errs = [float(e) for e in re.findall(r"relative error (\S+) after", out)]
    assert len(errs) == 4 and max(errs) <= 1e-12, out


def test_syncbatchnorm_equals_batchnorm_over_the_whole_batch():
    rc, out, _ = mpirun("tests/mpi/syncbatchnorm.py")
    assert rc == 0, out
    assert out.count("OK syncbatchnorm rank") == 2, out


def test_plain_pytorch_ddp_script_runs_on_varlens(tmp_path):
    rc, out, _ = mpirun("tests/programs/run_as.py", "varlens", "tests/programs/ddp_train.py", str(tmp_path))
    assert rc == 0, out
    assert out.count("epoch ") == 4 and "final loss" in out, out  # rank 0 alone logs
    assert (tmp_path / "model.pt").exists()
    state = varlens.load(str(tmp_path / "model.pt"))
    assert sorted(state) == ["0.bias", "0.weight", "2.bias", "2.weight"]  # model.module's keys: no 'module.'


def test_trainer_rank0_logs_and_resume_restores_every_rank(tmp_path):
    rc, out, _ = mpirun("tests/mpi/trainer_resume.py", str(tmp_path))
    assert rc == 0, out
    assert out.count("OK trainer rank") == 2, out
    assert out.count("epoch   1  train loss") == 2, out  # runs a and b, printed by rank 0 only
    assert "2 ranks x local batch 8 = effective batch 16; learning rate 0.01" in out, out


def test_varlens_train_command_under_mpiexec(tmp_path):
    run_dir = tmp_path / "run"
    rc, out, _ = mpirun("-m", "varlens", "train", "digits-mlp", "--epochs", "1", "--hidden", "16",
                        "--out", str(run_dir), "--no-progress")
    assert rc == 0, out
    assert out.count("recipe digits-mlp") == 1 and out.count("test accuracy") == 1, out  # rank 0 alone
    assert "distributed: 2 ranks x local batch 32 = effective batch 64; learning rate 0.001" in out, out
    assert (run_dir / "summary.json").exists() and (run_dir / "curves.png").exists()
    assert len(list((run_dir / "checkpoints").glob("step-*.ckpt"))) == 1


def test_noise_scale_from_data_parallel_matches_closed_form():
    rc, out, _ = mpirun("tests/mpi/noise_scale.py")
    assert rc == 0, out
    assert out.count("OK noise scale rank") == 2, out


def _failure_job(mode, runner):
    """Run tests/mpi/failure.py MODE; returns (output, seconds from rank 1's failure to the job's end)."""
    rc, out, _ = mpirun("tests/mpi/failure.py", mode, runner=runner, timeout=60)
    end = time.time()
    assert rc != 0, out
    assert "finished: the failure went unnoticed" not in out, out
    m = re.search(r"failing at (\d+\.\d+)", out)
    assert m, out
    return out, end - float(m.group(1))


def test_killed_rank_ends_the_job_and_is_named():
    out, secs = _failure_job("kill", runner=True)
    assert "varlens.distributed.run: rank 1 (pid" in out and "died first, killed by signal 9" in out, out
    assert secs < KILL_BOUND_S, (secs, out)


def test_raising_rank_aborts_every_rank_with_its_name():
    out, secs = _failure_job("raise", runner=False)
    assert "rank 1 of 2 failed with ValueError: a deliberate failure on rank 1" in out, out
    assert secs < KILL_BOUND_S, (secs, out)


def test_silent_rank_trips_the_collective_timeout():
    out, secs = _failure_job("hang", runner=False)
    assert "all_reduce on rank 0 did not complete within the timeout of 2 s" in out, out
    assert 1.5 <= secs < 2 + KILL_BOUND_S, (secs, out)  # rank 1 would sleep 60 s: the 2 s timeout ended it


# ---------------------------------------------------------------- one process, no MPI launch
def test_api_before_init_is_clear():
    assert dist.is_available() and not dist.is_initialized()
    with pytest.raises(ValueError, match="has not been initialized"):
        dist.get_rank()
    with pytest.raises(ValueError, match="has not been initialized"):
        dist.all_reduce(varlens.ones(2))
    with pytest.raises(ValueError, match="unknown backend 'tcp'"):
        dist.init_process_group("tcp")
    with pytest.raises(TypeError, match="timeout must be a datetime.timedelta"):
        dist.init_process_group("mpi", timeout="1s")
    assert dist.ReduceOp.SUM is not dist.ReduceOp.AVG


def test_missing_mpi4py_is_named_by_init_process_group():
    code = ("import sys; sys.modules['mpi4py'] = None\n"
            "import varlens.distributed as d\n"
            "assert not d.is_mpi_available()\n"
            "try:\n    d.init_process_group()\n"
            "except RuntimeError as e:\n    print('ERR', e)\n")
    p = subprocess.run([sys.executable, "-c", code], env=_env(), cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "ERR varlens.distributed needs MPI through mpi4py: `pip install mpi4py mpich`" in p.stdout, p.stdout + p.stderr


def test_single_process_group_and_env_check():
    # no launcher: MPI's singleton start, a world of one; torchrun's variables must agree with it
    code = ("import varlens, varlens.distributed as d\n"
            "d.init_process_group('gloo')\n"
            "t = varlens.tensor([1., 2.]); d.all_reduce(t, op=d.ReduceOp.AVG)\n"
            "print('WORLD', d.get_rank(), d.get_world_size(), d.get_backend(), t.tolist())\n")
    p = subprocess.run([sys.executable, "-c", code], env=_env(), cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "WORLD 0 1 mpi [1.0, 2.0]" in p.stdout, p.stdout + p.stderr
    env = dict(_env(), RANK="1", WORLD_SIZE="2")
    p = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "environment variable RANK is 1 but the MPI launcher started this process as rank 0 of 1" in p.stderr, \
        p.stdout + p.stderr


def test_post_accumulate_grad_hook_sees_the_accumulated_grad_as_torch():
    import torch
    seen = {"v": [], "t": []}
    vw = varlens.tensor([1.0, -2.0, 3.0], requires_grad=True)
    tw = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    vw.register_post_accumulate_grad_hook(lambda p: seen["v"].append(p.grad.clone()))
    h = tw.register_post_accumulate_grad_hook(lambda p: seen["t"].append(p.grad.clone()))
    for _ in range(2):  # the second backward accumulates onto the first
        (varlens.tanh(vw) * 2).sum().backward()
        (torch.tanh(tw) * 2).sum().backward()
    assert len(seen["v"]) == len(seen["t"]) == 2
    for a, b in zip(seen["v"], seen["t"]):
        assert abs(a.numpy() - b.numpy()).max() < 1e-6
    h.remove()
    with pytest.raises(RuntimeError, match="non-leaf"):
        (vw * 2).register_post_accumulate_grad_hook(lambda p: None)


def test_data_parallel_is_a_passthrough_with_module_prefix():
    net = varlens.nn.Linear(3, 2)
    dp = varlens.nn.DataParallel(net)
    x = varlens.randn(4, 3)
    assert dp.module is net
    assert varlens.equal(dp(x), net(x))
    assert sorted(dp.state_dict()) == ["module.bias", "module.weight"]
    with pytest.raises(TypeError, match="must be an nn.Module"):
        varlens.nn.DataParallel(lambda x: x)


def test_distributed_sampler_partition_matches_torch():
    import torch
    ds = list(range(11))
    for drop_last in (False, True):
        for rank in range(3):
            v = varlens.utils.data.DistributedSampler(ds, num_replicas=3, rank=rank, shuffle=False,
                                                      drop_last=drop_last)
            t = torch.utils.data.DistributedSampler(ds, num_replicas=3, rank=rank, shuffle=False,
                                                    drop_last=drop_last)
            assert list(v) == list(t) and len(v) == len(t)
    s = varlens.utils.data.DistributedSampler(ds, num_replicas=2, rank=0, seed=3)
    first = list(s)
    s.set_epoch(1)
    assert list(s) != first and len(list(s)) == len(first)  # a new epoch, a new shuffle
    both = sorted(list(varlens.utils.data.DistributedSampler(ds, num_replicas=2, rank=0, seed=3))
                  + list(varlens.utils.data.DistributedSampler(ds, num_replicas=2, rank=1, seed=3)))
    assert set(both) == set(ds) and len(both) == 12  # every index, plus one padded repeat
    with pytest.raises(ValueError, match="Invalid rank 3"):
        varlens.utils.data.DistributedSampler(ds, num_replicas=3, rank=3)


# --------------------------------------------------------------- overlap of the gradient allreduces
class _FakeMPI:
    """A stand-in for mpi4py's MPI module whose non-blocking operations, like MPICH's, advance
    only inside MPI calls: each Test/Testall call is one step of progress for every operation
    in flight, and an operation completes ``steps`` steps after it started.  The allreduce
    acts as if the second rank held the same gradients (SUM doubles, MAX keeps)."""
    IN_PLACE = object()
    SUM, MAX = "sum", "max"

    def __init__(self, steps):
        self.steps = steps
        self.in_flight = []
        mpi = self

        class Request:
            @staticmethod
            def Test(req):
                mpi._progress()
                return req.done

            @staticmethod
            def Testall(reqs):
                mpi._progress()
                return all(r.done for r in reqs)
        self.Request = Request

    def _progress(self):
        for r in list(self.in_flight):
            r.left -= 1
            if r.left <= 0:
                r.done = True
                r.apply()
                self.in_flight.remove(r)

    def start(self, apply):
        req = type("FakeRequest", (), {})()
        req.left, req.done, req.apply = self.steps, False, apply
        self.in_flight.append(req)
        return req


class _FakeComm:
    def __init__(self, mpi):
        self.mpi = mpi
        self.allreduces = []  # the requests of the gradient allreduces, in start order

    def Get_rank(self):
        return 0

    def allgather(self, obj):
        return [obj, obj]

    def Ibcast(self, buf, root=0):
        return self.mpi.start(lambda: None)

    def Iallreduce(self, inplace, buf, op="sum"):
        assert inplace is self.mpi.IN_PLACE

        def apply():
            if op == "sum":
                buf[...] *= 2
        req = self.mpi.start(apply)
        if op == "sum":
            self.allreduces.append(req)
        return req


def _ddp_with_fake_mpi(monkeypatch, mode, steps=3):
    from varlens.distributed import process_group as pg
    mpi = _FakeMPI(steps)
    comm = _FakeComm(mpi)
    group = pg.ProcessGroup(comm, [0, 1], 60.0)
    monkeypatch.setattr(pg._world, "mpi", mpi)
    monkeypatch.setattr(pg._world, "group", group)
    monkeypatch.setenv("VARLENS_DDP_PROGRESS", mode)
    varlens.manual_seed(0)
    layers = []
    for _ in range(6):
        layers += [varlens.nn.Linear(4, 4, dtype=varlens.float64), varlens.nn.Tanh()]
    ddp = varlens.nn.parallel.DistributedDataParallel(varlens.nn.Sequential(*layers), bucket_cap_mb=1e-6)
    return ddp, comm  # a bucket per parameter


def _grads_two_steps(ddp, comm):
    x = varlens.randn(5, 4, dtype=varlens.float64)
    counts = []
    for _ in range(2):  # the first backward learns each parameter's deliveries; the second overlaps
        ddp.zero_grad()
        comm.allreduces.clear()
        ddp(x).pow(2).sum().backward()
        counts.append(ddp._timing["done_in_backward"])
        assert all(r.done for r in comm.allreduces)
    return x, counts


def test_ddp_drives_mpi_progress_so_early_buckets_complete_during_backward(monkeypatch):
    ddp, comm = _ddp_with_fake_mpi(monkeypatch, "hooks")
    assert len(ddp._buckets) == 12
    x, counts = _grads_two_steps(ddp, comm)
    # first backward: every bucket starts at the end, nothing completes before the final wait;
    # second: the gradient hooks' MPI_Test calls complete the early buckets while backward runs
    assert counts[0] == 0
    assert counts[1] >= 6, counts
    assert ddp._timing["early_buckets"] == 12
    # the average of two equal gradients is the gradient: same as one process
    ref_grads = [p.grad.clone() for p in ddp.module.parameters()]
    ddp.module.zero_grad()
    with ddp.no_sync():
        ddp(x).pow(2).sum().backward()
    for p, g in zip(ddp.module.parameters(), ref_grads):
        assert varlens.equal(p.grad, g)


def test_ddp_without_progress_driving_leaves_every_bucket_to_the_final_wait(monkeypatch):
    ddp, comm = _ddp_with_fake_mpi(monkeypatch, "none")
    _, counts = _grads_two_steps(ddp, comm)
    assert counts == [0, 0]  # started early, but no MPI call moved them: all done in the final wait
    assert ddp._timing["early_buckets"] == 12


def test_ddp_progress_mode_from_environment_is_checked(monkeypatch):
    from varlens.distributed import process_group as pg
    monkeypatch.setenv("VARLENS_DDP_PROGRESS", "sometimes")
    with pytest.raises(ValueError, match="VARLENS_DDP_PROGRESS must be one of hooks, thread, none, got 'sometimes'"):
        pg.progress_mode()

"""Distributed training on one machine: varlens.distributed (MPI) against torch.distributed (gloo).

Measured in the same jobs, rounds of the two libraries interleaved (the machine is shared), medians:

1. allreduce latency and bandwidth against message size (float32 SUM, 2 ranks, loopback):
   ``varlens.distributed.all_reduce`` (MPICH, shared memory) and ``torch.distributed.all_reduce``
   (gloo over TCP on 127.0.0.1);
2. the DistributedDataParallel step (zero_grad, forward, cross-entropy, backward with the
   gradient averaging, SGD step) of an MLP 512-1024-1024-1024-10 (2.6 M float32 parameters,
   10.5 MB of gradients) on a global batch of 64, for 1 rank (local batch 64) and 2 ranks
   (local batch 32 each), varlens DDP against torch DDP;
3. the share of varlens DDP's communication hidden behind the backward: 1 - (time the end of
   backward waits for the allreduces) / (time the same bucket allreduces take alone).

From (1) it fits the ring-allreduce model T(N, M) = 2(N-1) alpha + 2 (N-1)/N M / beta and, with
(2) and (3), predicts the step time on N machines (docs/distributed.md states the model and its
assumptions).

    python benchmarks/bench_distributed.py            # print the tables
    python benchmarks/bench_distributed.py --write    # also refresh its section of RESULTS.md
    python benchmarks/bench_distributed.py --quick    # fewer sizes and steps
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SECTION = "## Distributed data parallel on one machine (bench_distributed.py)"
ASSUMED_NETWORK = {"name": "10 GbE (assumed: alpha 50 us, beta 1.1 GB/s)", "alpha": 50e-6, "beta": 1.1e9}


# ---------------------------------------------------------------------------- worker (one rank)
def _median_time(fn, reps):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def worker(args):
    for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[v] = "1"
    import numpy as np
    import torch
    import torch.distributed as tdist
    from threadpoolctl import threadpool_limits

    import varlens as vl
    import varlens.distributed as vdist
    threadpool_limits(1, user_api="blas")
    torch.set_num_threads(1)
    vdist.init_process_group("mpi", timeout=datetime.timedelta(minutes=5))
    rank, n = vdist.get_rank(), vdist.get_world_size()
    tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank, world_size=n)
    out = {"world": n}
    rounds = 3 if args.quick else 5

    if n > 1:  # (1) allreduce sweep
        sizes = [2 ** k for k in (range(0, 25, 4) if args.quick else range(0, 25, 2))]  # floats: 4 B .. 64 MB
        rows = []
        for m in sizes:
            va = vl.ones(m, dtype=vl.float32)
            ta = torch.ones(m, dtype=torch.float32)
            reps = max(3, min(200, int(2e6 // max(m, 1))))
            vt, tt = [], []
            for _ in range(rounds):
                vdist.barrier()
                vt.append(_median_time(lambda: vdist.all_reduce(va), reps))
                tdist.barrier()
                tt.append(_median_time(lambda: tdist.all_reduce(ta), reps))
            rows.append({"bytes": 4 * m, "varlens_s": statistics.median(vt), "torch_s": statistics.median(tt)})
        out["allreduce"] = rows

    # (2) DDP step, global batch 64
    sizes = [512, 1024, 1024, 1024, 10]
    rng = np.random.default_rng(0)
    tl, vlayers = [], []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        tlin = torch.nn.Linear(a, b)
        vlin = vl.nn.Linear(a, b)
        vlin.weight._data = tlin.weight.detach().numpy().copy()
        vlin.bias._data = tlin.bias.detach().numpy().copy()
        tl.append(tlin)
        vlayers.append(vlin)
        if i < len(sizes) - 2:
            tl.append(torch.nn.ReLU())
            vlayers.append(vl.nn.ReLU())
    tm = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(*tl))
    vm = vl.nn.parallel.DistributedDataParallel(vl.nn.Sequential(*vlayers))
    local = 64 // n
    x = rng.normal(size=(local, sizes[0])).astype(np.float32)
    y = rng.integers(0, 10, local)
    vx, vy, tx, ty = vl.tensor(x), vl.tensor(y), torch.tensor(x), torch.tensor(y)
    vopt = vl.optim.SGD(vm.parameters(), lr=0.01)
    topt = torch.optim.SGD(tm.parameters(), lr=0.01)
    vloss, tloss = vl.nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss()

    def vstep():
        vopt.zero_grad()
        vloss(vm(vx), vy).backward()
        vopt.step()

    def tstep():
        topt.zero_grad()
        tloss(tm(tx), ty).backward()
        topt.step()
    steps = 5 if args.quick else 10
    for _ in range(3):
        vstep()
        tstep()
    vt, tt, waits = [], [], []
    for _ in range(rounds):
        vdist.barrier()
        for _ in range(steps):
            t0 = time.perf_counter()
            vstep()
            vt.append(time.perf_counter() - t0)
            waits.append(vm._timing["wait_s"])
        tdist.barrier()
        tt.append(_median_time(tstep, steps))
    out["ddp"] = {"local_batch": local, "varlens_s": statistics.median(vt), "torch_s": statistics.median(tt),
                  "params": sum(p.numel() for p in vm.parameters()), "buckets": len(vm._buckets)}
    if n > 1:  # (3) the same buckets' allreduces alone, back to back
        MPI = vdist.process_group._world.mpi
        comm = vdist.group.WORLD.comm

        def comm_alone():
            reqs = [comm.Iallreduce(MPI.IN_PLACE, b.flat) for b in vm._buckets]
            MPI.Request.Waitall(reqs)
        alone = []
        for _ in range(rounds):
            vdist.barrier()
            alone.append(_median_time(comm_alone, steps))
        a, w = statistics.median(alone), statistics.median(waits)
        out["ddp"].update(comm_alone_s=a, exposed_wait_s=w, hidden_share=max(0.0, 1 - w / a))
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump(out, f)
    tdist.destroy_process_group()


# ---------------------------------------------------------------------------- driver
def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_job(n, quick):
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "out.json")
        cmd = [mpiexec, "-n", str(n), sys.executable, os.path.abspath(__file__), "--worker", "--port",
               str(_free_port()), "--out", path] + (["--quick"] if quick else [])
        env = dict(os.environ, HYDRA_LAUNCHER="fork", PYTHONPATH=os.path.dirname(HERE))
        load0 = os.getloadavg()[0]
        subprocess.run(cmd, check=True, env=env, timeout=1800)
        with open(path) as f:
            out = json.load(f)
        out["loadavg"] = (load0, os.getloadavg()[0])
        return out


def fit_ring(rows, n=2):
    """Non-negative least-squares alpha, beta of T = 2(n-1) alpha + 2(n-1)/n M/beta, each point
    weighted by 1/T (relative error), from the varlens column."""
    import numpy as np
    from scipy.optimize import nnls
    M = np.array([r["bytes"] for r in rows], float)
    T = np.array([r["varlens_s"] for r in rows], float)
    A = np.stack([np.full_like(M, 2 * (n - 1)), 2 * (n - 1) / n * M], 1) / T[:, None]
    (alpha, inv_beta), _ = nnls(A, np.ones_like(T))
    return float(alpha), float(1 / inv_beta) if inv_beta > 0 else float("inf")


def ring_time(N, M, alpha, beta):
    return 0.0 if N == 1 else 2 * (N - 1) * alpha + 2 * (N - 1) / N * M / beta


def predict(one, two, alpha, beta, Ns=(1, 2, 4, 8, 16, 32)):
    """Step time on N machines for the fixed global batch 64: compute is linear in the local batch
    (fitted through the 1-rank step and the 2-rank step less its exposed wait), and the exposed
    communication is (1 - hidden share) of the ring allreduce of all gradients."""
    grad_bytes = 4 * one["ddp"]["params"]
    c64 = one["ddp"]["varlens_s"]
    c32 = two["ddp"]["varlens_s"] - two["ddp"]["exposed_wait_s"]
    slope = (c64 - c32) / 32
    c0 = c64 - 64 * slope
    h = two["ddp"]["hidden_share"]
    out = []
    for N in Ns:
        comp = c0 + slope * 64 / N
        comm = ring_time(N, grad_bytes, alpha, beta)
        out.append((N, comp, comm, comp + (1 - h) * comm))
    return out


def fmt_bytes(b):
    for unit in ("B", "KB", "MB", "GB"):
        if b < 1024 or unit == "GB":
            return f"{b:.0f} {unit}"
        b /= 1024


def report(one, two, quick):
    lines = [SECTION, "",
             f"{datetime.date.today()}, {_machine()}; MPICH {_mpich()} (pip), torch gloo; 2 ranks on one machine "
             f"(loopback), float32, BLAS 1 thread per rank; 1-minute load average {two['loadavg'][0]:.1f} at the "
             f"start of the 2-rank job, {two['loadavg'][1]:.1f} at its end ({os.cpu_count()} cores). "
             f"`python benchmarks/bench_distributed.py{' --quick' if quick else ''}`.", "",
             "allreduce (SUM), median seconds per call:", "",
             "| message | varlens (MPI) | torch (gloo) | torch / varlens | varlens GB/s |",
             "|---|---|---|---|---|"]
    for r in two["allreduce"]:
        lines.append(f"| {fmt_bytes(r['bytes'])} | {r['varlens_s'] * 1e6:.1f} us | {r['torch_s'] * 1e6:.1f} us | "
                     f"{r['torch_s'] / r['varlens_s']:.2f} | {r['bytes'] / r['varlens_s'] / 1e9:.3f} |")
    alpha, beta = fit_ring(two["allreduce"])
    d1, d2 = one["ddp"], two["ddp"]
    lines += ["", f"Ring model fitted to the varlens column: alpha = {alpha * 1e6:.1f} us, beta = {beta / 1e9:.2f} GB/s.",
              "", f"DDP step, MLP 512-1024-1024-1024-10 ({d1['params'] / 1e6:.2f} M parameters, "
              f"{d2['buckets']} buckets), global batch 64, median seconds:", "",
              "| ranks | local batch | varlens | torch | torch / varlens |", "|---|---|---|---|---|"]
    for d, n in ((d1, 1), (d2, 2)):
        lines.append(f"| {n} | {d['local_batch']} | {d['varlens_s'] * 1e3:.1f} ms | {d['torch_s'] * 1e3:.1f} ms | "
                     f"{d['torch_s'] / d['varlens_s']:.2f} |")
    lines += ["", f"Communication of the 2-rank varlens step: the bucket allreduces alone take "
              f"{d2['comm_alone_s'] * 1e3:.2f} ms; the end of backward waits {d2['exposed_wait_s'] * 1e3:.2f} ms for "
              f"them: {100 * d2['hidden_share']:.0f}% hidden behind the backward.", "",
              "Predicted varlens step time on N machines, global batch 64 (docs/distributed.md's model):", "",
              "| N | compute | allreduce (loopback alpha, beta) | step | allreduce (" + ASSUMED_NETWORK["name"]
              + ") | step |", "|---|---|---|---|---|---|"]
    p_loop = predict(one, two, alpha, beta)
    p_net = predict(one, two, ASSUMED_NETWORK["alpha"], ASSUMED_NETWORK["beta"])
    for (N, comp, c1, s1), (_, _, c2, s2) in zip(p_loop, p_net):
        lines.append(f"| {N} | {comp * 1e3:.1f} ms | {c1 * 1e3:.2f} ms | {s1 * 1e3:.1f} ms | {c2 * 1e3:.2f} ms | "
                     f"{s2 * 1e3:.1f} ms |")
    return "\n".join(lines) + "\n"


def _machine():
    sys.path.insert(0, HERE)
    from _common import machine
    return machine()


def _mpich():
    try:
        from importlib.metadata import version
        return version("mpich")
    except Exception:  # noqa: BLE001
        return "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--port", type=int)
    ap.add_argument("--out")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    one = run_job(1, args.quick)
    two = run_job(2, args.quick)
    text = report(one, two, args.quick)
    print(text)
    if args.write:
        sys.path.insert(0, HERE)
        from _common import write_section
        write_section(SECTION, text)


if __name__ == "__main__":
    main()

"""Distributed training on one machine: varlens.distributed (MPI) against torch.distributed (gloo).

Measured in the same jobs, rounds of the two libraries interleaved (the machine is shared), medians:

1. allreduce latency and bandwidth against message size (float32 SUM, 2 ranks, loopback):
   ``varlens.distributed.all_reduce`` (MPICH, shared memory) and ``torch.distributed.all_reduce``
   (gloo over TCP on 127.0.0.1);
2. the DistributedDataParallel step (zero_grad, forward, cross-entropy, backward with the
   gradient averaging, SGD step) of an MLP 512-1024x12-10 (13 Linear layers, 12.1 M float32
   parameters, 46 MB of gradients: three buckets of 4, 28 and 14 MB) on a global batch of 64, for 1 rank (local batch 64) and 2 ranks
   (local batch 32 each), varlens DDP against torch DDP;
3. the share of varlens DDP's communication hidden behind the backward, hidden = (C + A - S) / A
   from the same step without communication (C), the bucket allreduces alone (A) and the DDP
   step (S), for each way of moving the allreduces during the backward (``overlap()`` below).

From (1) it fits the ring-allreduce model T(N, M) = 2(N-1) alpha + 2 (N-1)/N M / beta and, with
(2) and (3), predicts the step time on N machines (docs/distributed.md states the model and its
assumptions).

    python benchmarks/bench_distributed.py            # print the tables
    python benchmarks/bench_distributed.py --write    # also refresh its section of RESULTS.md
    python benchmarks/bench_distributed.py --quick    # fewer sizes and steps
    python benchmarks/bench_distributed.py --overlap-only [--mpich-async-progress]   # (3) alone
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
LAYERS = [512] + [1024] * 12 + [10]  # the MLP: enough gradient bytes (46 MB) for three DDP buckets
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

    if n > 1 and not args.overlap_only:  # (1) allreduce sweep
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
    sizes = LAYERS
    rng = np.random.default_rng(0)
    tl, vlayers, plain = [], [], []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        tlin = torch.nn.Linear(a, b)
        tl.append(tlin)
        for layers in (vlayers, plain):
            vlin = vl.nn.Linear(a, b)
            vlin.weight._data = tlin.weight.detach().numpy().copy()
            vlin.bias._data = tlin.bias.detach().numpy().copy()
            layers.append(vlin)
        if i < len(sizes) - 2:
            tl.append(torch.nn.ReLU())
            vlayers.append(vl.nn.ReLU())
            plain.append(vl.nn.ReLU())
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
    if not args.overlap_only:
        vt, tt = [], []
        for _ in range(rounds):
            vdist.barrier()
            vt.append(_median_time(vstep, steps))
            tdist.barrier()
            tt.append(_median_time(tstep, steps))
        out["ddp"] = {"local_batch": local, "varlens_s": statistics.median(vt), "torch_s": statistics.median(tt),
                      "params": sum(p.numel() for p in vm.parameters()), "buckets": len(vm._buckets)}
    if n > 1:  # (3) how much of the allreduce the backward hides
        pmodel = vl.nn.Sequential(*plain)
        popt = vl.optim.SGD(pmodel.parameters(), lr=0.01)

        def pstep():
            popt.zero_grad()
            vloss(pmodel(vx), vy).backward()
            popt.step()
        modes = ["end", "hooks", "thread"] + (["none"] if os.environ.get("MPIR_CVAR_ASYNC_PROGRESS") == "1" else [])
        out["overlap"] = overlap(vm, pstep, vstep, modes, rounds, 4 * steps)
        out["overlap"].update(local_batch=local, params=sum(p.numel() for p in vm.parameters()),
                              buckets=[b.flat.nbytes for b in vm._buckets], modes=modes,
                              mpich_async=os.environ.get("MPIR_CVAR_ASYNC_PROGRESS") == "1")
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump(out, f)
    tdist.destroy_process_group()


def overlap(vm, pstep, vstep, modes, rounds, steps):
    """Share of the DDP step's communication hidden behind its backward, from three times
    measured in the same job, step by step interleaved, each between two barriers so that
    every kind pays the same synchronisation of the ranks:

    - C, compute: the same training step on an unwrapped copy of the model (no communication);
    - A, communication alone: the DDP's bucket allreduces started back to back and waited for
      with the reducer's own wait;
    - S(mode), the DDP step with the buckets' allreduces started at the end of the backward
      ("end": no overlap possible, the control), or started during it and moved by MPI_Test
      in the gradient hooks ("hooks", the default), also by a ProgressThread ("thread"), or
      by MPICH's own progress thread alone ("none", when MPIR_CVAR_ASYNC_PROGRESS=1).

    hidden(mode) = (C + A - S(mode)) / A: 0 when the step costs compute plus communication,
    1 when communication costs nothing extra, negative when the step costs more than both (the
    reducer's copies, and on an oversubscribed machine the scheduling).  Since the reducer's
    own copies are in S but not in C + A, also (S(end) - S(mode)) / A: the share of the
    communication time the overlap saves against the same reducer with no overlap.  Medians
    over all steps; the spread is the range of the per-round values."""
    import varlens.distributed as vdist
    from varlens.distributed import process_group as pg
    MPI = pg._world.mpi
    g = vdist.group.WORLD
    comm = g.comm

    def comm_alone():
        pg.wait_all([comm.Iallreduce(MPI.IN_PLACE, b.flat) for b in vm._buckets], "comm alone", g)

    def ddp(mode):
        def step():
            vm._set_progress_mode("hooks" if mode == "end" else mode, overlap=mode != "end")
            vstep()
        return step
    kinds = {"compute": pstep, "comm": comm_alone}
    kinds.update((m, ddp(m)) for m in modes)
    for m in modes:  # warm up each mode (the thread is made on first use)
        ddp(m)()
    times = {k: [[] for _ in range(rounds)] for k in kinds}
    done = {m: [] for m in modes}
    for r in range(rounds):
        for _ in range(steps):
            for k, fn in kinds.items():
                comm.Barrier()
                t0 = time.perf_counter()
                fn()
                comm.Barrier()
                times[k][r].append(time.perf_counter() - t0)
                if k in done:
                    done[k].append(vm._timing["done_in_backward"])
    vm._set_progress_mode("hooks")
    med = {k: statistics.median([t for rt in v for t in rt]) for k, v in times.items()}
    out = {"compute_s": med["compute"], "comm_alone_s": med["comm"], "rounds": rounds, "steps": steps}
    for m in modes:
        per_round = [(statistics.median(c) + statistics.median(a) - statistics.median(s)) / statistics.median(a)
                     for c, a, s in zip(times["compute"], times["comm"], times[m])]
        saved = [(statistics.median(e) - statistics.median(s)) / statistics.median(a)
                 for e, a, s in zip(times["end"], times["comm"], times[m])]
        out[m] = {"step_s": med[m], "hidden": (med["compute"] + med["comm"] - med[m]) / med["comm"],
                  "hidden_min": min(per_round), "hidden_max": max(per_round),
                  "vs_end": (med["end"] - med[m]) / med["comm"], "vs_end_min": min(saved), "vs_end_max": max(saved),
                  "done_in_backward": statistics.mean(done[m])}
    return out


# ---------------------------------------------------------------------------- driver
def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_job(n, quick, overlap_only=False, mpich_async=False):
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "out.json")
        cmd = [mpiexec, "-n", str(n), sys.executable, os.path.abspath(__file__), "--worker", "--port",
               str(_free_port()), "--out", path] + (["--quick"] if quick else []) + \
            (["--overlap-only"] if overlap_only else [])
        env = dict(os.environ, HYDRA_LAUNCHER="fork", PYTHONPATH=os.path.dirname(HERE))
        env.pop("VARLENS_DDP_PROGRESS", None)  # the default mode; the others are set step by step
        if mpich_async:
            env["MPIR_CVAR_ASYNC_PROGRESS"] = "1"
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
    (fitted through the 1-rank step and the 2-rank job's step without communication), and the
    exposed communication is (1 - h) of the ring allreduce of all gradients, h the default
    mode's measured hidden share clipped to [0, 1]."""
    grad_bytes = 4 * one["ddp"]["params"]
    c64 = one["ddp"]["varlens_s"]
    c32 = two["overlap"]["compute_s"]
    slope = (c64 - c32) / 32
    c0 = c64 - 64 * slope
    h = min(1.0, max(0.0, two["overlap"]["hooks"]["hidden"]))
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


MODE_NAMES = {"end": "buckets started at the end of backward (no overlap: the control)",
              "hooks": "started during backward, MPI_Test in the gradient hooks (default)",
              "thread": "as hooks, and a ProgressThread during backward (VARLENS_DDP_PROGRESS=thread)",
              "none": "started during backward, moved only by MPICH's progress thread"}


def overlap_lines(two):
    o = two["overlap"]
    mb = [f"{b / 2 ** 20:.1f}" for b in o["buckets"]]
    lines = [f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {_machine()}; 1-minute load "
             f"average {two['loadavg'][0]:.1f} at the start, {two['loadavg'][1]:.1f} at the end; MPICH progress thread "
             f"{'on (MPIR_CVAR_ASYNC_PROGRESS=1)' if o['mpich_async'] else 'off'}.", "",
             f"Communication hidden behind the backward, 2 ranks, local batch {o['local_batch']}, buckets of "
             f"{' + '.join(mb)} MB (bucket_cap_mb=25, the first bucket 1 MB as torch's): hidden = (C + A - S) / A "
             f"with C = {o['compute_s'] * 1e3:.2f} ms the same step without communication, A = "
             f"{o['comm_alone_s'] * 1e3:.2f} ms the bucket allreduces alone, S the DDP step; medians of "
             f"{o['rounds']} rounds x {o['steps']} steps interleaved step by step, range over the rounds:", "",
             "| buckets' allreduces | S | hidden (C + A - S) / A: median (range) | saved vs. the control "
             "(S_end - S) / A: median (range) | buckets done before the final wait (mean) |",
             "|---|---|---|---|---|"]
    for m in o["modes"]:
        r = o[m]
        lines.append(f"| {MODE_NAMES[m]} | {r['step_s'] * 1e3:.2f} ms | {100 * r['hidden']:.0f}% "
                     f"({100 * r['hidden_min']:.0f}% .. {100 * r['hidden_max']:.0f}%) | {100 * r['vs_end']:.0f}% "
                     f"({100 * r['vs_end_min']:.0f}% .. {100 * r['vs_end_max']:.0f}%) | "
                     + (f"{r['done_in_backward']:.2f} of {len(o['buckets'])} |" if m != "none" else
                        "not counted (no MPI_Test in the hooks) |"))
    return lines


def report(one, two, args):
    lines = [SECTION, "",
             f"{datetime.date.today()}, {_machine()}; MPICH {_mpich()} (pip), torch gloo; 2 ranks on one machine "
             f"(loopback), float32, BLAS 1 thread per rank; 1-minute load average {two['loadavg'][0]:.1f} at the "
             f"start of the 2-rank job, {two['loadavg'][1]:.1f} at its end ({os.cpu_count()} cores). "
             f"`python benchmarks/bench_distributed.py{' --quick' if args.quick else ''}"
             f"{' --mpich-async-progress' if args.mpich_async_progress else ''}`.", "",
             "allreduce (SUM), median seconds per call:", "",
             "| message | varlens (MPI) | torch (gloo) | torch / varlens | varlens GB/s |",
             "|---|---|---|---|---|"]
    for r in two["allreduce"]:
        lines.append(f"| {fmt_bytes(r['bytes'])} | {r['varlens_s'] * 1e6:.1f} us | {r['torch_s'] * 1e6:.1f} us | "
                     f"{r['torch_s'] / r['varlens_s']:.2f} | {r['bytes'] / r['varlens_s'] / 1e9:.3f} |")
    alpha, beta = fit_ring(two["allreduce"])
    d1, d2 = one["ddp"], two["ddp"]
    lines += ["", f"Ring model fitted to the varlens column: alpha = {alpha * 1e6:.1f} us, beta = {beta / 1e9:.2f} GB/s.",
              "", f"DDP step, MLP 512-1024x12-10 ({d1['params'] / 1e6:.2f} M parameters, "
              f"{d2['buckets']} buckets), global batch 64, median seconds:", "",
              "| ranks | local batch | varlens | torch | torch / varlens |", "|---|---|---|---|---|"]
    for d, n in ((d1, 1), (d2, 2)):
        lines.append(f"| {n} | {d['local_batch']} | {d['varlens_s'] * 1e3:.1f} ms | {d['torch_s'] * 1e3:.1f} ms | "
                     f"{d['torch_s'] / d['varlens_s']:.2f} |")
    lines += [""] + overlap_lines(two)[2:] + ["",
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
    ap.add_argument("--overlap-only", action="store_true",
                    help="only the 2-rank overlap measurement (3), printed; nothing written")
    ap.add_argument("--mpich-async-progress", action="store_true",
                    help="run the 2-rank job with MPICH's progress thread (MPIR_CVAR_ASYNC_PROGRESS=1)")
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    if args.overlap_only:
        two = run_job(2, args.quick, True, args.mpich_async_progress)
        print("\n".join(overlap_lines(two)))
        return
    one = run_job(1, args.quick)
    two = run_job(2, args.quick, mpich_async=args.mpich_async_progress)
    text = report(one, two, args)
    print(text)
    if args.write:
        sys.path.insert(0, HERE)
        from _common import write_section
        write_section(SECTION, text)


if __name__ == "__main__":
    main()

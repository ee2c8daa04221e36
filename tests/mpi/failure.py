"""A rank that fails must end the whole job, naming itself; run under ``mpiexec -n 2``.

``python tests/mpi/failure.py MODE``: rank 1 fails after one completed allreduce while rank 0
goes on to the next collective, where it would wait for ever without the failure handling.
MODE ``kill``: rank 1 SIGKILLs itself (the launcher ends rank 0); ``raise``: rank 1 raises
ValueError (varlens's excepthook prints the rank and calls MPI Abort); ``hang``: rank 1
sleeps instead of joining (rank 0's bounded wait raises after the 2 s timeout, then aborts).
"""
import datetime
import os
import signal
import sys
import time

import varlens as torch
import varlens.distributed as dist

mode = sys.argv[1]
dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=2))
rank = dist.get_rank()
t = torch.ones(4)
dist.all_reduce(t)
print(f"rank {rank} passed the first allreduce", flush=True)
if rank == 1:
    print(f"failing at {time.time():.3f}", flush=True)  # the test measures from here to the job's end
    if mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif mode == "raise":
        raise ValueError("a deliberate failure on rank 1")
    elif mode == "hang":
        time.sleep(60)
for _ in range(1000):
    dist.all_reduce(t)
print(f"rank {rank} finished: the failure went unnoticed", flush=True)

"""varlens.distributed: torch.distributed's API over MPI (mpi4py); see docs/distributed.md.

Launch with ``mpiexec -n N python train.py`` (or a cluster's ``mpirun`` / ``srun``); call
``init_process_group()`` and use the collectives below, ``nn.parallel.DistributedDataParallel``
and ``utils.data.DistributedSampler`` as with PyTorch.  Importing this package needs no MPI.
"""
from varlens.distributed.process_group import (DEFAULT_TIMEOUT, GroupMember, ProcessGroup, abort,  # noqa: F401
                                               destroy_process_group, export_launcher_env, get_backend,
                                               get_global_rank, get_process_group_ranks, get_rank,
                                               get_world_size, group, init_process_group, is_available,
                                               is_gloo_available, is_initialized, is_mpi_available,
                                               is_nccl_available, is_torchelastic_launched, new_group)
from varlens.distributed.collectives import (ReduceOp, Work, all_gather, all_gather_into_tensor,  # noqa: F401
                                             all_gather_object, all_reduce, all_to_all_single, barrier,
                                             broadcast, broadcast_object_list, gather, gather_object, irecv,
                                             isend, recv, reduce, reduce_scatter, reduce_scatter_tensor,
                                             scatter, send)


class Backend:
    """torch.distributed.Backend's names; each runs on MPI in varlens."""
    MPI = "mpi"
    GLOO = "gloo"
    NCCL = "nccl"
    UCC = "ucc"


export_launcher_env()

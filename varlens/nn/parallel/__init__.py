"""torch.nn.parallel: DistributedDataParallel (over MPI, varlens.distributed) and DataParallel
(a single-device pass-through)."""
from varlens.nn.parallel.data_parallel import DataParallel  # noqa: F401
from varlens.nn.parallel.distributed import DistributedDataParallel  # noqa: F401

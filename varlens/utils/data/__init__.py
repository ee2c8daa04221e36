"""varlens.utils.data: datasets, samplers and the DataLoader (``torch.utils.data``'s names)."""
from varlens.utils.data.dataset import (ChainDataset, ConcatDataset, Dataset,  # noqa: F401
                                        IterableDataset, StackDataset, Subset, TensorDataset,
                                        random_split)
from varlens.utils.data.sampler import (BatchSampler, RandomSampler, Sampler,  # noqa: F401
                                        SequentialSampler, SubsetRandomSampler,
                                        WeightedRandomSampler)
from varlens.utils.data.collate import default_collate, default_convert  # noqa: F401
from varlens.utils.data.worker import WorkerInfo, get_worker_info  # noqa: F401
from varlens.utils.data.distributed import DistributedSampler  # noqa: F401
from varlens.utils.data.dataloader import DataLoader  # noqa: F401

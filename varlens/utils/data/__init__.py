"""varlens.utils.data: datasets, samplers and the DataLoader (``torch.utils.data``'s names)."""
from varlens.utils.data.dataset import (ConcatDataset, Dataset, Subset, TensorDataset,  # noqa: F401
                                        random_split)
from varlens.utils.data.sampler import (BatchSampler, RandomSampler, Sampler,  # noqa: F401
                                        SequentialSampler, SubsetRandomSampler)
from varlens.utils.data.dataloader import DataLoader, default_collate  # noqa: F401

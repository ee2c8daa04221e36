"""varlens runs on the CPU through NumPy: this module answers PyTorch scripts that ask."""


def is_available():
    return False


def device_count():
    return 0


def manual_seed(seed):
    """No CUDA generator to seed (kept so ``torch.cuda.manual_seed`` lines run unchanged)."""


manual_seed_all = manual_seed


def synchronize(device=None):
    pass

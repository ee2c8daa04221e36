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


def empty_cache():
    """Nothing to free (no GPU memory); scripts call it unconditionally."""


def current_device():
    raise RuntimeError("varlens.cuda.current_device(): no CUDA device (varlens runs on the CPU)")


def memory_allocated(device=None):
    return 0


max_memory_allocated = memory_reserved = max_memory_reserved = memory_allocated


def reset_peak_memory_stats(device=None):
    pass


def is_bf16_supported(including_emulation=True):
    return False


def is_initialized():
    return False


def get_device_name(device=None):
    raise RuntimeError("varlens.cuda.get_device_name(): no CUDA device (varlens runs on the CPU)")


def get_device_capability(device=None):
    raise RuntimeError("varlens.cuda.get_device_capability(): no CUDA device (varlens runs on the CPU)")


from varlens.cuda import amp  # noqa: E402,F401  (torch.cuda.amp.autocast / GradScaler)


def set_device(device):
    """No CUDA device to select: a negative index is ignored (as torch), any other is an error."""
    idx = getattr(device, "index", device)
    if isinstance(idx, int) and idx < 0:
        return
    raise RuntimeError(f"varlens.cuda.set_device({device!r}): no CUDA device (varlens runs on the CPU)")


class device:  # noqa: N801  (torch.cuda.device)
    """``with torch.cuda.device(i):``: an error for any real index (no CUDA device); -1/None is a no-op."""

    def __init__(self, device):
        idx = getattr(device, "index", device)
        if idx is not None and not (isinstance(idx, int) and idx < 0):
            raise RuntimeError(f"varlens.cuda.device({device!r}): no CUDA device (varlens runs on the CPU)")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

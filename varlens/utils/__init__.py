"""varlens.utils: ``data`` (Dataset, DataLoader, ...) and ``checkpoint`` (torch.utils.checkpoint's API)."""


def __getattr__(name):
    if name in ("data", "checkpoint"):
        import importlib
        return importlib.import_module(f"varlens.utils.{name}")
    raise AttributeError(f"module 'varlens.utils' has no attribute '{name}'")

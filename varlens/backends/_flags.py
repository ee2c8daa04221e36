"""The ``flags(...)`` context manager shared by the switch modules of varlens.backends."""
import contextlib


def flags_of(module, names):
    """A ``flags(**switches)`` context manager for ``module``: sets the given switches (None
    leaves one unchanged) and restores them on exit, as torch.backends.cudnn.flags does."""

    @contextlib.contextmanager
    def flags(**kwargs):
        unknown = set(kwargs) - set(names)
        if unknown:
            raise TypeError(f"{module.__name__}.flags() got unexpected switches {sorted(unknown)}; "
                            f"it takes {list(names)}")
        old = {k: getattr(module, k) for k in kwargs}
        for k, v in kwargs.items():
            if v is not None:
                setattr(module, k, v)
        try:
            yield
        finally:
            for k, v in old.items():
                setattr(module, k, v)
    return flags

"""torch.hub, answered for varlens: loading models from a hub repository is not supported.

torch.hub downloads a repository and runs its ``hubconf.py``, which builds PyTorch models; those
are not varlens models, and varlens makes no network access.  ``load``, ``list``, ``help`` and
the download helpers raise NotImplementedError saying so; ``get_dir``/``set_dir`` keep a cache
directory name so code that only asks for it runs.
"""
import os as _os

__all__ = ["load", "list", "help", "load_state_dict_from_url", "download_url_to_file", "get_dir", "set_dir"]

_hub_dir = [None]


def _refuse(what):
    def refuse(*args, **kwargs):
        raise NotImplementedError(
            f"varlens.hub.{what}: torch.hub is not supported. Hub entry points build PyTorch models and need "
            "network access; varlens does neither. Download the weights yourself and load them with "
            "model.load_state_dict(varlens.load(path)) (a PyTorch state_dict loads into the same varlens "
            "architecture)")
    refuse.__name__ = what
    refuse.__varlens_unsupported__ = True
    return refuse


load = _refuse("load")
list = _refuse("list")  # noqa: A001  (torch.hub.list)
help = _refuse("help")  # noqa: A001  (torch.hub.help)
load_state_dict_from_url = _refuse("load_state_dict_from_url")
download_url_to_file = _refuse("download_url_to_file")


def get_dir():
    """The hub cache directory: set_dir's value, else $TORCH_HOME/hub (~/.cache/torch/hub), as torch."""
    if _hub_dir[0] is not None:
        return _hub_dir[0]
    home = _os.environ.get("TORCH_HOME", _os.path.join(_os.environ.get("XDG_CACHE_HOME", "~/.cache"), "torch"))
    return _os.path.join(_os.path.expanduser(home), "hub")


def set_dir(d):
    _hub_dir[0] = _os.path.expanduser(str(d))

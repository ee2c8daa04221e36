"""torch.backends.cudnn: varlens has no cuDNN.  The switches can be set and change nothing;
``is_available()`` is False and ``version()`` None, as on a PyTorch build without cuDNN."""
import sys as _sys

from varlens.backends._flags import flags_of as _flags_of

enabled = True
benchmark = False
benchmark_limit = 10
deterministic = False
allow_tf32 = True


def is_available():
    return False


def version():
    return None


def is_acceptable(tensor):
    return False


flags = _flags_of(_sys.modules[__name__], ("enabled", "benchmark", "benchmark_limit", "deterministic",
                                            "allow_tf32"))

"""torch.backends.mkldnn (oneDNN): not used by varlens; ``enabled`` can be set, to no effect."""
import sys as _sys

from varlens.backends._flags import flags_of as _flags_of

enabled = True
deterministic = False
allow_tf32 = False


def is_available():
    return False


flags = _flags_of(_sys.modules[__name__], ("enabled", "deterministic", "allow_tf32"))

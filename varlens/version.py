"""torch.version's fields, answered for varlens (a CPU-only NumPy framework), and the two version
strings (docs/conventions.md, "Version strings").

``varlens`` is varlens's own version (the package's).  ``__version__`` (also ``varlens.__version__``)
is the PyTorch API version varlens follows, with varlens's version as the local part:
``2.13.0+varlens.0.1.0``.  Programs gate features on ``torch.__version__ >= '2.0'`` or
``version.parse(torch.__version__)``; they must see the API level they are written for.  As
PyTorch's TorchVersion it compares as a version, not as text (``'2.13.0' < '2.2'`` is True for
plain strings, False here).
"""
import re as _re

varlens = "0.1.0"        # varlens's own version (the package's)
torch_api = "2.13.0"     # the PyTorch API varlens follows (names, defaults, messages)
cuda = None              # no CUDA build: version gates such as `if torch.version.cuda:` take the CPU branch
hip = None
xpu = None
debug = False
git_version = "unknown"


def _key(v):
    """(release numbers, is-not-a-prerelease) of a version string, for comparison."""
    s = str(v).split("+", 1)[0]
    m = _re.match(r"(\d+(?:\.\d+)*)(.*)", s.strip())
    if not m:
        raise ValueError(f"cannot compare a version with {v!r}: it is not a version string")
    nums = tuple(int(p) for p in m.group(1).split("."))
    nums = nums + (0,) * (4 - len(nums))
    return nums, m.group(2) == ""


class TorchVersion(str):
    """A version string that compares as a version against strings, tuples and other versions
    (torch.torch_version.TorchVersion's behaviour)."""

    def _cmp_key(self, other):
        if isinstance(other, (tuple, list)):
            other = ".".join(str(p) for p in other)
        return _key(self), _key(other)

    def __lt__(self, other):
        a, b = self._cmp_key(other)
        return a < b

    def __le__(self, other):
        a, b = self._cmp_key(other)
        return a <= b

    def __gt__(self, other):
        a, b = self._cmp_key(other)
        return a > b

    def __ge__(self, other):
        a, b = self._cmp_key(other)
        return a >= b

    def __eq__(self, other):
        try:
            a, b = self._cmp_key(other)
        except ValueError:
            return str.__eq__(self, other)
        return a == b

    __hash__ = str.__hash__


__version__ = TorchVersion(f"{torch_api}+varlens.{varlens}")

"""torch.backends for scripts that set the usual reproducibility and speed switches.

varlens computes on the CPU through NumPy, so none of these switches change anything:
there is no cuDNN, MPS or TF32, and every varlens op is already deterministic.  The
attributes exist (and can be set) so that boilerplate such as
``torch.backends.cudnn.deterministic = True`` or ``torch.backends.mps.is_available()``
runs unchanged; the ``is_available()`` answers describe varlens honestly.
"""
from __future__ import annotations


class _Switches:
    """A namespace whose attributes can be read and set; setting one has no effect."""

    def __init__(self, name, **attrs):
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_attrs", dict(attrs))

    def __getattr__(self, key):
        attrs = object.__getattribute__(self, "_attrs")
        if key in attrs:
            return attrs[key]
        raise AttributeError(f"module '{self._name}' has no attribute {key!r}")

    def __setattr__(self, key, value):
        self._attrs[key] = value

    def __repr__(self):
        return f"<varlens backend switches {self._name}>"

    def flags(self, **kwargs):
        """Context manager that sets switches and restores them on exit (torch.backends.cudnn.flags)."""
        import contextlib

        @contextlib.contextmanager
        def _cm():
            old = {k: self._attrs.get(k) for k in kwargs}
            self._attrs.update({k: v for k, v in kwargs.items() if v is not None})
            try:
                yield
            finally:
                self._attrs.update(old)
        return _cm()


def _false():
    return False


def _true():
    return True


def _none():
    return None


cudnn = _Switches("varlens.backends.cudnn", enabled=True, benchmark=False, deterministic=False,
                  allow_tf32=True, benchmark_limit=10, is_available=_false, version=_none,
                  is_acceptable=lambda tensor: False)
cuda = _Switches("varlens.backends.cuda", is_built=_false,
                 matmul=_Switches("varlens.backends.cuda.matmul", allow_tf32=False,
                                  allow_fp16_reduced_precision_reduction=True,
                                  allow_bf16_reduced_precision_reduction=True),
                 flash_sdp_enabled=_false, mem_efficient_sdp_enabled=_false, math_sdp_enabled=_true,
                 enable_flash_sdp=lambda enabled: None, enable_mem_efficient_sdp=lambda enabled: None,
                 enable_math_sdp=lambda enabled: None, preferred_linalg_library=lambda backend=None: None)
mps = _Switches("varlens.backends.mps", is_available=_false, is_built=_false)
mkldnn = _Switches("varlens.backends.mkldnn", enabled=True, is_available=_false)
mkl = _Switches("varlens.backends.mkl", is_available=_false)
openmp = _Switches("varlens.backends.openmp", is_available=_false)
opt_einsum = _Switches("varlens.backends.opt_einsum", enabled=False, strategy=None, is_available=_false)
cpu = _Switches("varlens.backends.cpu", get_cpu_capability=lambda: "NumPy")

__all__ = ["cudnn", "cuda", "mps", "mkldnn", "mkl", "openmp", "opt_einsum", "cpu"]

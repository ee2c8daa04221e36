"""torch.backends.cuda for varlens.  ``is_built()`` is True when varlens can compute on CUDA (CuPy
imports and sees a GPU, or the simulated device is on).  ``matmul.allow_tf32`` and the
scaled-dot-product attention switches can be set and change nothing: varlens's attention is
always the math kernel, and CuPy's TF32 matmuls are chosen by its environment variable
CUPY_TF32=1 (read by CuPy, docs/gpu.md)."""
import contextlib as _contextlib

from varlens.core import array as _B


class _MatmulSwitches:
    """torch.backends.cuda.matmul: settable flags with no effect."""

    def __init__(self):
        self.allow_tf32 = False
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True
        self.fp32_precision = "none"

    def __repr__(self):
        return "<varlens.backends.cuda.matmul switches (no effect: CuPy's TF32 is CUPY_TF32=1)>"


matmul = _MatmulSwitches()


def is_built():
    """True when the CUDA device can be used (CuPy with a GPU, or the simulator)."""
    return _B.cuda_namespace(required=False) is not None


def flash_sdp_enabled():
    return False


def mem_efficient_sdp_enabled():
    return False


def cudnn_sdp_enabled():
    return False


def math_sdp_enabled():
    return True


def enable_flash_sdp(enabled):
    """Accepted; varlens has only the math attention kernel."""


enable_mem_efficient_sdp = enable_cudnn_sdp = enable_flash_sdp


def enable_math_sdp(enabled):
    """Accepted; the math kernel is the one varlens has, so it stays in use."""


def preferred_linalg_library(backend=None):
    return None


def preferred_blas_library(backend=None):
    return None


@_contextlib.contextmanager
def sdp_kernel(enable_flash=True, enable_math=True, enable_mem_efficient=True, enable_cudnn=True):
    """Context manager choosing attention kernels: accepted, varlens always uses the math one."""
    yield

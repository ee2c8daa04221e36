"""torch.backends for scripts that set the usual reproducibility and speed switches.

varlens computes on the CPU through NumPy, so none of these switches change anything: there is
no cuDNN, MPS or TF32, and every varlens op is already deterministic.  Each backend is a real
module (``import torch.backends.cudnn as cudnn`` works) whose attributes can be read and set,
so boilerplate such as ``torch.backends.cudnn.deterministic = True`` or
``torch.backends.mps.is_available()`` runs unchanged; the ``is_available()`` answers describe
varlens honestly (False).
"""
from varlens.backends import cpu, cuda, cudnn, mkl, mkldnn, mps, openmp, opt_einsum  # noqa: F401

__all__ = ["cpu", "cuda", "cudnn", "mkl", "mkldnn", "mps", "openmp", "opt_einsum"]

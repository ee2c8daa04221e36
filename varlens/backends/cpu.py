"""torch.backends.cpu."""


def get_cpu_capability():
    """The SIMD level PyTorch reports ('AVX2'...); varlens computes through NumPy."""
    return "NumPy"

"""torch.backends.mkl: varlens calls MKL only through whatever BLAS NumPy was built with."""


def is_available():
    return False

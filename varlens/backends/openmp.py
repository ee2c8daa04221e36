"""torch.backends.openmp: varlens does not use OpenMP itself."""


def is_available():
    return False

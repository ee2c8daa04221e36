"""varlens.nn: modules, layers, initialisers and losses (PyTorch's names and shapes)."""
from varlens.nn.parameter import Parameter  # noqa: F401

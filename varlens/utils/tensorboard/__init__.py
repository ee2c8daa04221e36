"""torch.utils.tensorboard's face: SummaryWriter writing real TensorBoard event files.

The event-file format and the protocol buffers come from the ``tensorboard`` package (as in
PyTorch, it is an optional dependency: ``pip install tensorboard``, included in varlens's
``test`` extra). varlens writes scalars, histograms, images, figures, text and hyperparameters
with PyTorch's method names and arguments.
"""
from varlens.utils.tensorboard.writer import SummaryWriter

__all__ = ["SummaryWriter"]

"""varlens.optim: optimisers, learning-rate schedules and batch-size scaling (PyTorch's names).

See docs/conventions.md, "Optimisers and schedules", for the choices where the notes and
PyTorch differ (momentum forms, Adam's eps, Adadelta's name, coupled vs decoupled decay).
"""
from varlens.optim.optimizer import Optimizer
from varlens.optim.sgd import SGD
from varlens.optim.adagrad import Adagrad
from varlens.optim.rmsprop import RMSprop
from varlens.optim.adadelta import Adadelta
from varlens.optim.adam import Adam
from varlens.optim.adamw import AdamW
from varlens.optim.nadam import NAdam
from varlens.optim.radam import RAdam
from varlens.optim.adamax import Adamax
from varlens.optim.asgd import ASGD
from varlens.optim.rprop import Rprop
from varlens.optim.adafactor import Adafactor
from varlens.optim.muon import Muon
from varlens.optim.lbfgs import LBFGS
from varlens.optim import lr_scheduler, scaling, swa_utils
from varlens.optim.scaling import scale_lr

__all__ = ["Optimizer", "SGD", "Adagrad", "RMSprop", "Adadelta", "Adam", "AdamW",
           "NAdam", "RAdam", "Adamax", "ASGD", "Rprop", "LBFGS", "Adafactor", "Muon",
           "lr_scheduler", "swa_utils", "scaling", "scale_lr"]

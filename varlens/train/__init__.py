"""varlens.train: the Trainer, checkpoints, metrics and curves.

    from varlens.train import Trainer, fit
    trainer = fit(model, optimizer, loss_fn, train_loader, val_loader, epochs=10, out_dir="runs/x")

Named recipes (data, model, optimiser, schedule) are in varlens.train.recipes; the `varlens train`/`eval`
commands in varlens.commands only dispatch to them.
"""
from varlens.train.checkpoint import CheckpointError, load as load_checkpoint, save as save_checkpoint  # noqa: F401
from varlens.train.callbacks import Callback, EarlyStopping, JSONLinesLogger  # noqa: F401
from varlens.train.metrics import accuracy  # noqa: F401
from varlens.train.trainer import (NonFiniteGradientError, NonFiniteLossError, Trainer, fit, latest_checkpoint,  # noqa: F401,E501
                                   list_checkpoints)
from varlens.train.plots import plot_curves  # noqa: F401

"""varlens.commands: the command-line layer of training (the top of the layer stack).

``train`` and ``eval`` are the ``varlens train`` and ``varlens eval`` subcommands; they parse
arguments and dispatch to the named recipes of ``varlens.train.recipes`` and to the Trainer.
"""

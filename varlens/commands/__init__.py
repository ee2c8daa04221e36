"""varlens.commands: the command-line layer of training (the top of the layer stack).

``recipes`` names complete runs (data, model, optimiser, schedule) and builds them, which is
why it sits here, above ``varlens.models`` and ``varlens.train``; ``train`` and ``eval`` are
the ``varlens train`` and ``varlens eval`` subcommands.
"""

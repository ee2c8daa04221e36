"""The ``varlens`` command line: one dispatcher, each subcommand in the package it belongs to.

A subcommand module provides ``add_arguments(parser)`` and ``run(args) -> int``.
"""
from __future__ import annotations

import argparse
import importlib
import sys

# name -> (module, one-line help); modules are imported only when their command runs
COMMANDS = {
    "train": ("varlens.commands.train", "train a model from a named recipe"),
    "eval": ("varlens.commands.eval", "evaluate a saved checkpoint"),
    "lens": ("varlens.lens.cli", "variance-lens report: predicted vs measured second moments"),
    "check": ("varlens.theory.cli", "check the closed-form claims of the notes by Monte Carlo"),
    "compress": ("varlens.info.cli_compress", "compress a file with a language model + arithmetic coding"),
    "decompress": ("varlens.info.cli_decompress", "decompress a file made by `varlens compress`"),
    "cnn": ("varlens.vision.cli", "CNN experiments: FGSM/PGD, degradation, filters, edge filter (PNGs)"),
    "seq": ("varlens.text.cli", "sequence models: seq2seq with attention, char-LM, vanishing gradients"),
    "teach": ("varlens.teach.cli", "backward-pass exercises: hand them out, grade them"),
}


def _available():
    out = {}
    for name, (mod, help_) in COMMANDS.items():
        if importlib.util.find_spec(mod) is not None:
            out[name] = (mod, help_)
    return out


def build_parser():
    p = argparse.ArgumentParser(
        prog="varlens",
        description="varlens: deep learning on NumPy with its own autograd and a variance lens.",
        epilog="Run `varlens COMMAND --help` for the options of one command.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name, (mod, help_) in _available().items():
        sp = sub.add_parser(name, help=help_, description=help_)
        importlib.import_module(mod).add_arguments(sp)
    return p


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    if not argv:
        parser.print_help()
        return 0
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    mod = importlib.import_module(COMMANDS[args.command][0])
    return int(mod.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())

"""``varlens compress IN OUT``: arithmetic coding driven by a next-byte model (seed 003 §2.5)."""
from __future__ import annotations

import sys
import time

from varlens.info.models import AdaptiveOrder0Model, PPMModel, UniformModel


def add_arguments(parser):
    parser.add_argument("input", help="file to compress ('-' for stdin)")
    parser.add_argument("output", help="compressed file to write ('-' for stdout)")
    parser.add_argument("--model", choices=["ppm", "order0", "uniform"], default="ppm",
                        help="next-byte model driving the coder (default: ppm)")
    parser.add_argument("--order", type=int, default=6, help="ppm: context length in bytes (default 6)")
    parser.add_argument("--discount", type=float, default=0.75, help="ppm: absolute discount (default 0.75)")
    parser.add_argument("--no-exclusion", action="store_true", help="ppm: turn off update exclusion")
    parser.add_argument("--precision", type=int, default=32, choices=[32, 64],
                        help="arithmetic coder register width in bits (default 32)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing")


def _read(path):
    if path == "-":
        return sys.stdin.buffer.read()
    with open(path, "rb") as fh:
        return fh.read()


def _write(path, data):
    if path == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    with open(path, "wb") as fh:
        fh.write(data)


def make_model(args):
    if args.model == "ppm":
        return PPMModel(order=args.order, discount=args.discount, exclusion=not args.no_exclusion)
    if args.model == "order0":
        return AdaptiveOrder0Model()
    return UniformModel()


def run(args) -> int:
    from varlens.info.compress import compress
    try:
        data = _read(args.input)
    except OSError as e:
        print(f"varlens compress: cannot read {args.input}: {e}", file=sys.stderr)
        return 2
    try:
        model = make_model(args)
    except ValueError as e:
        print(f"varlens compress: {e}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    blob = compress(data, model, precision=args.precision)
    dt = time.perf_counter() - t0
    _write(args.output, blob)
    if not args.quiet and args.output != "-":
        bpc = 8 * len(blob) / max(len(data), 1)
        print(f"{args.input}: {len(data)} -> {len(blob)} bytes, {bpc:.4f} bits/char "
              f"({model.spec()}, {dt:.1f} s)", file=sys.stderr)
    return 0

"""``varlens compress IN OUT``: arithmetic coding driven by a next-byte model (seed 003 §2.5).

``--model lstm --checkpoint PATH`` drives the coder with a trained char-LSTM
(varlens.info.neural); ``varlens compress --train-model PATH`` trains one on the KJV
training split and saves it."""
from __future__ import annotations

import sys
import time

from varlens.info.models import AdaptiveOrder0Model, PPMModel, UniformModel


def add_arguments(parser):
    parser.add_argument("input", nargs="?", help="file to compress ('-' for stdin)")
    parser.add_argument("output", nargs="?", help="compressed file to write ('-' for stdout)")
    parser.add_argument("--model", choices=["ppm", "order0", "uniform", "lstm", "mix"], default="ppm",
                        help="next-byte model driving the coder (default: ppm; mix = lstm and ppm mixed)")
    parser.add_argument("--checkpoint", help="lstm: a checkpoint written by --train-model "
                        "(its SHA-256 goes into the header; decompress needs the same file)")
    parser.add_argument("--train-model", metavar="PATH",
                        help="instead of compressing: train a char-LSTM on the KJV training split "
                             "(first 90%%) and save it to PATH")
    parser.add_argument("--train-seconds", type=float, default=600.0,
                        help="--train-model: CPU-time budget in seconds, one core (default 600)")
    parser.add_argument("--hidden-size", type=int, default=256, help="--train-model: LSTM width (default 256)")
    parser.add_argument("--order", type=int, default=6, help="ppm: context length in bytes (default 6)")
    parser.add_argument("--discount", type=float, default=0.75, help="ppm: absolute discount (default 0.75)")
    parser.add_argument("--no-exclusion", action="store_true", help="ppm: turn off update exclusion")
    parser.add_argument("--precision", type=int, default=32, choices=[32, 64],
                        help="arithmetic coder register width in bits (default 32)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing")


def _read(path):
    """The bytes of ``path`` ('-': stdin); directories, devices (/dev/zero) and FIFOs are refused
    with a ValueError, before anything is read."""
    if path == "-":
        return sys.stdin.buffer.read()
    from varlens.serialization import open_regular_file
    fh, size = open_regular_file(path, "input")
    with fh:
        return fh.read(size)


def _write(path, data):
    """Write ``data`` to ``path`` ('-': stdout) atomically (varlens.serialization.atomic_write_bytes:
    a temporary file renamed into place, so a failure such as a full disk leaves no truncated
    output; /dev/null and FIFOs are written to directly; a directory raises IsADirectoryError)."""
    if path == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    from varlens.serialization import atomic_write_bytes
    atomic_write_bytes(path, data)


def _fail(cmd, path, e):
    """One line for an OSError/RuntimeError while reading or writing ``path``."""
    why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
    print(f"varlens {cmd}: {path}: {why}", file=sys.stderr)
    return 1


def make_model(args):
    if args.model in ("lstm", "mix"):
        if not args.checkpoint:
            raise ValueError(f"--model {args.model} needs --checkpoint PATH (train one with --train-model PATH)")
        from varlens.info.models import MixtureModel
        from varlens.info.neural import LSTMModel
        lstm = LSTMModel(args.checkpoint)
        if args.model == "lstm":
            return lstm
        return MixtureModel([lstm, PPMModel(order=args.order, discount=args.discount,
                                            exclusion=not args.no_exclusion)])
    if args.checkpoint:
        raise ValueError(f"--checkpoint: only --model lstm takes a checkpoint, got --model {args.model}")
    if args.model == "ppm":
        return PPMModel(order=args.order, discount=args.discount, exclusion=not args.no_exclusion)
    if args.model == "order0":
        return AdaptiveOrder0Model()
    return UniformModel()


def _train(args) -> int:
    from varlens.info.neural import kjv_split, train_lstm
    train, _ = kjv_split()
    log = None if args.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    r = train_lstm(train, hidden_size=args.hidden_size, cpu_seconds=args.train_seconds,
                   checkpoint=args.train_model, log=log)
    if not args.quiet:
        print(f"saved {args.train_model}: {r['steps']} steps, train {r['train_bpc']:.3f} bpc, "
              f"cpu {r['cpu_seconds']:.0f} s, sha256 {r['sha256']}", file=sys.stderr)
    return 0


def run(args) -> int:
    from varlens.info.compress import compress
    if args.train_model:
        return _train(args)
    if args.input is None or args.output is None:
        print("varlens compress: expected INPUT and OUTPUT paths (or --train-model PATH)", file=sys.stderr)
        return 2
    try:
        data = _read(args.input)
    except (OSError, ValueError) as e:
        print(f"varlens compress: cannot read {args.input}: {getattr(e, 'strerror', None) or e}", file=sys.stderr)
        return 2
    try:
        model = make_model(args)
    except (ValueError, FileNotFoundError) as e:
        print(f"varlens compress: {e}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    blob = compress(data, model, precision=args.precision)
    dt = time.perf_counter() - t0
    try:
        _write(args.output, blob)
    except (OSError, RuntimeError) as e:   # full disk, missing folder: no partial output is left
        return _fail("compress", args.output, e)
    if not args.quiet and args.output != "-":
        bpc = 8 * len(blob) / max(len(data), 1)
        print(f"{args.input}: {len(data)} -> {len(blob)} bytes, {bpc:.4f} bits/char "
              f"({model.spec()}, {dt:.1f} s)", file=sys.stderr)
        for m in getattr(model, "models", [model]):
            if hasattr(m, "size_report"):
                print(f"model size (needed to decompress too): {m.size_report()}", file=sys.stderr)
    return 0

"""``varlens decompress IN OUT``: invert ``varlens compress`` (the model is named in the header)."""
from __future__ import annotations

import sys
import time

from varlens.info.cli_compress import _fail, _read, _write


def add_arguments(parser):
    parser.add_argument("input", help="file written by `varlens compress` ('-' for stdin)")
    parser.add_argument("output", help="where to write the original bytes ('-' for stdout)")
    parser.add_argument("--checkpoint", help="lstm files: the checkpoint to use instead of the path in the "
                        "header (it must be the same file: its SHA-256 is checked)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing")


def run(args) -> int:
    from varlens.info.compress import decompress
    try:
        blob = _read(args.input)
    except (OSError, ValueError) as e:
        print(f"varlens decompress: cannot read {args.input}: {getattr(e, 'strerror', None) or e}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    try:
        data = decompress(blob, checkpoint=args.checkpoint)
    except (ValueError, OSError) as e:   # CompressedFileError, a missing or special checkpoint file
        print(f"varlens decompress: {args.input}: {e}", file=sys.stderr)
        return 1
    try:
        _write(args.output, data)
    except (OSError, RuntimeError) as e:   # full disk, missing folder: no partial output is left
        return _fail("decompress", args.output, e)
    if not args.quiet and args.output != "-":
        print(f"{args.input}: {len(blob)} -> {len(data)} bytes ({time.perf_counter() - t0:.1f} s)",
              file=sys.stderr)
    return 0

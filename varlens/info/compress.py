"""A language model as a compressor (seed 003 §2.5.3): arithmetic coding driven by a
next-byte model, plus the measurement of bits per character against gzip, bz2 and xz.

File format (all integers big-endian)::

    b"VLAC"  version:u8  precision:u8  spec_len:u16  spec (UTF-8 JSON of Model.spec())
    n_bytes:u64  crc32:u32  payload (the arithmetic code)

The model spec in the header lets ``decompress`` rebuild the same model; the CRC32 of the
original bytes catches a model that is not deterministic across the two runs.
"""
from __future__ import annotations

import bz2
import gzip
import json
import lzma
import math
import struct
import time
import zlib

import numpy as np

from varlens.info.coding import ArithmeticDecoder, ArithmeticEncoder
from varlens.info.models import Model, PPMModel, from_spec

__all__ = ["compress", "decompress", "read_header", "model_code_length", "compare_compressors", "default_corpus",
           "MAGIC", "CompressedFileError", "max_symbols"]

def single_blas_thread():
    from varlens.info.neural import single_blas_thread as s   # one BLAS thread while coding
    return s()


MAGIC = b"VLAC"
VERSION = 1


def _default_model():
    return PPMModel(order=6)


def compress(data, model=None, precision=32):
    """Compress ``data`` (bytes) with the arithmetic coder driven by ``model`` (default: the
    adaptive order-6 :class:`~varlens.info.models.PPMModel`).  Returns the file bytes."""
    if isinstance(data, str):
        raise TypeError("data: expected bytes, got str (encode it first, e.g. text.encode('utf-8'))")
    data = bytes(data)
    model = _default_model() if model is None else model
    if not isinstance(model, Model):
        raise TypeError(f"model: expected a varlens.info.models.Model, got {type(model).__name__}")
    model.reset()
    spec = json.dumps(model.spec(), sort_keys=True).encode("utf-8")
    enc = ArithmeticEncoder(precision)
    encode, freqs, update = enc.encode, model.frequencies, model.update
    with single_blas_thread():   # same reduction order as the decoder (neural models)
        for b in data:
            f = freqs()
            total = int(f.sum())
            lo = int(f[:b].sum())
            encode(lo, lo + int(f[b]), total)
            update(b)
    payload = enc.finish()
    header = (MAGIC + struct.pack(">BBH", VERSION, precision, len(spec)) + spec
              + struct.pack(">QI", len(data), zlib.crc32(data)))
    return header + payload


class CompressedFileError(ValueError):
    """A file that is not a well-formed ``varlens compress`` output: the message names the problem
    (bad magic, truncated header, invalid model spec, a declared length the payload cannot hold,
    a stream that ends early)."""


MAX_SPEC_DEPTH = 8     # "mix" specs nest other specs; more levels than this are refused


def _depth(x, d=0):
    if d > MAX_SPEC_DEPTH:
        return d
    if isinstance(x, dict):
        return max([_depth(v, d + 1) for v in x.values()] + [d + 1])
    if isinstance(x, list):
        return max([_depth(v, d + 1) for v in x] + [d + 1])
    return d


def read_header(blob):
    """(model spec dict, original length, crc32, precision, payload offset) of a compressed file.

    Every field is checked (CompressedFileError names the first problem); the declared length
    must fit what the payload can hold (see :func:`max_symbols`)."""
    blob = memoryview(bytes(blob[:(1 << 16) + 32]) if not isinstance(blob, (bytes, bytearray)) else blob)
    if bytes(blob[:4]) != MAGIC:
        raise CompressedFileError(f"blob: expected a varlens compressed file starting with {MAGIC!r}, got {bytes(blob[:4])!r}")
    if len(blob) < 8:
        raise CompressedFileError(f"truncated header: {len(blob)} bytes, the fixed part alone has 8")
    version, precision, slen = struct.unpack(">BBH", blob[4:8])
    if version != VERSION:
        raise CompressedFileError(f"expected format version {VERSION}, got {version}")
    if precision not in (32, 64):
        raise CompressedFileError(f"coder precision {precision} bits: expected 32 or 64")
    if len(blob) < 20 + slen:
        raise CompressedFileError(f"truncated header: it declares a {slen}-byte model spec, and with the length and "
                                  f"CRC needs {20 + slen} bytes, but the file has {len(blob)}")
    try:
        spec = json.loads(bytes(blob[8:8 + slen]).decode("utf-8"))
    except (ValueError, RecursionError) as e:
        raise CompressedFileError(f"the model spec in the header is not valid UTF-8 JSON ({type(e).__name__})") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise CompressedFileError(f"the model spec in the header must be an object with a 'name', got {str(spec)[:60]}")
    if _depth(spec) > MAX_SPEC_DEPTH:
        raise CompressedFileError(f"the model spec in the header is nested more than {MAX_SPEC_DEPTH} levels deep")
    n, crc = struct.unpack(">QI", blob[8 + slen:20 + slen])
    payload = len(blob) - (20 + slen)
    if n > max_symbols(payload, precision):
        raise CompressedFileError(f"the header declares {n} bytes of output, more than a {payload}-byte payload can "
                                  f"hold (at most {max_symbols(payload, precision)} with this coder); the file is "
                                  "corrupt or truncated")
    return spec, n, crc, precision, 20 + slen


def max_symbols(payload_bytes, precision):
    """The most symbols a payload of this size can decode to.  Every model's frequency table sums
    to at most DEFAULT_TOTAL with each of the 256 bytes at frequency >= 1, so a symbol costs at
    least -log2(1 - 255/DEFAULT_TOTAL) > 255/DEFAULT_TOTAL bits; the decoder reads at most the
    payload's bits plus ``precision``."""
    from varlens.info.models import DEFAULT_TOTAL
    return (8 * payload_bytes + precision) * DEFAULT_TOTAL // 255 + 1


def _with_checkpoint(spec, path):
    """(spec with every nested 'checkpoint' replaced by ``path``, whether there was one)."""
    if "checkpoint" in spec:
        return {**spec, "checkpoint": path}, True
    if "models" in spec:
        subs = [_with_checkpoint(m, path) for m in spec["models"]]
        return {**spec, "models": [m for m, _ in subs]}, any(f for _, f in subs)
    return spec, False


def decompress(blob, model=None, checkpoint=None):
    """Invert :func:`compress`.  The model is rebuilt from the header unless one is given
    (needed for models that are not in ``varlens.info.models.MODELS``).  ``checkpoint``
    replaces the checkpoint path stored in the header of a neural model's file (its SHA-256
    must still match the header's)."""
    blob = bytes(blob)
    spec, n, crc, precision, start = read_header(blob)
    if model is None:
        if checkpoint is not None:
            spec, found = _with_checkpoint(spec, str(checkpoint))
            if not found:
                raise ValueError(f"checkpoint: the file was coded with model {spec.get('name')!r}, "
                                 "which takes no checkpoint")
        try:
            model = from_spec(spec)
        except (FileNotFoundError, CompressedFileError):
            raise
        except (TypeError, ValueError, KeyError, AttributeError, RecursionError, OverflowError) as e:
            raise CompressedFileError(f"the model spec in the header cannot be built: {str(e)[:300]}") from None
    model.reset()
    payload = blob[start:]
    dec = ArithmeticDecoder(payload, precision)
    limit = 8 * len(payload) + precision      # a well-formed stream never reads past this many bits
    out = bytearray()
    freqs, update = model.frequencies, model.update
    with single_blas_thread():
        for i in range(n):
            f = freqs()
            c = np.cumsum(f)
            total = int(c[-1])
            if total <= 0:
                raise CompressedFileError("the model gave an empty frequency table")
            t = dec.target(total)
            b = int(np.searchsorted(c, t, side="right"))
            if b >= len(c):
                raise CompressedFileError(f"the stream is corrupt: it decodes outside the alphabet at byte {i}")
            lo = int(c[b - 1]) if b else 0
            dec.consume(lo, int(c[b]), total)
            update(b)
            out.append(b)
            if dec.inp.position > limit:
                raise CompressedFileError(f"the stream ends after {i + 1} of the {n} bytes its header declares; the "
                                          "file is truncated or corrupt")
    out = bytes(out)
    if zlib.crc32(out) != crc:
        raise CompressedFileError("CRC mismatch after decoding; the model is not the one used to compress "
                         "(or is not deterministic), or the file is corrupt")
    return out


def model_code_length(data, model=None):
    """The ideal code length -sum log2 P(x_i | x_<i) in bits of ``data`` under the model's
    quantised frequencies: the model's cross-entropy on the text times its length
    (003 Remark 2.5.7).  The arithmetic coder's output is within a few bits of it."""
    model = _default_model() if model is None else model
    model.reset()
    bits = 0.0
    with single_blas_thread():
        for b in bytes(data):
            f = model.frequencies()
            bits -= math.log2(int(f[b]) / int(f.sum()))
            model.update(b)
    return bits


def default_corpus():
    """Real English text available offline: the text of Python's own documentation topics
    (the strings of ``pydoc_data.topics.topics`` in the standard library, joined in sorted
    key order with blank lines), UTF-8 encoded, and a description of where it came from."""
    import pydoc_data.topics as t
    text = "\n\n".join(t.topics[k] for k in sorted(t.topics))
    return text.encode("utf-8"), f"pydoc_data.topics.topics ({t.__file__})"


def compare_compressors(data, model=None, check_roundtrip=True):
    """Bits per character of ``data`` for gzip -9, bz2 -9, xz -9e and the arithmetic coder
    with ``model`` (the whole file size, header included).  Returns a dict."""
    data = bytes(data)
    n = len(data)
    res = {"n_bytes": n}
    res["gzip"] = 8 * len(gzip.compress(data, 9, mtime=0)) / n
    res["bz2"] = 8 * len(bz2.compress(data, 9)) / n
    res["xz"] = 8 * len(lzma.compress(data, preset=9 | lzma.PRESET_EXTREME)) / n
    model = _default_model() if model is None else model
    t0 = time.perf_counter()
    blob = compress(data, model)
    res["encode_seconds"] = time.perf_counter() - t0
    res["model"] = model.spec()
    res["varlens"] = 8 * len(blob) / n
    if hasattr(model, "_tables"):   # PPM: state built while coding (nothing is stored in the file)
        res["model_contexts"] = sum(len(t) for t in model._tables)
        res["model_counts"] = sum(len(node[1]) for t in model._tables for node in t.values())
    for m in getattr(model, "models", [model]):
        if hasattr(m, "size_report"):   # neural: the weights the decoder needs as well
            res["model_size"] = m.size_report()
    if check_roundtrip:
        t0 = time.perf_counter()
        res["roundtrip"] = decompress(blob) == data
        res["decode_seconds"] = time.perf_counter() - t0
    return res


def main(argv=None):
    """``python -m varlens.info.bench [FILE | --kjv-test] [--offset N] [--length N]
    [--model ppm|lstm ...] [--checkpoint PATH]``: print the bits-per-character comparison
    (default: the whole default corpus, the PPM model)."""
    import argparse
    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("file", nargs="?", help="text file (default: the text of Python's pydoc_data.topics)")
    ap.add_argument("--kjv-test", action="store_true",
                    help="the held-out KJV test text (last 10%%, varlens.info.neural.kjv_split)")
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--length", type=int, default=10 ** 9)
    ap.add_argument("--model", action="append", choices=["ppm", "lstm", "mix"],
                    help="model(s) to run (repeatable; default ppm)")
    ap.add_argument("--checkpoint", help="lstm: checkpoint written by varlens.info.neural / `varlens compress --train-model`")
    ap.add_argument("--order", type=int, default=6)
    ap.add_argument("--discount", type=float, default=0.75)
    a = ap.parse_args(argv)
    if a.kjv_test:
        from varlens.info.neural import kjv_split
        data, path = kjv_split()[1], "KJV held-out test text (last 10%, varlens.info.neural.kjv_split)"
    elif a.file:
        with open(a.file, "rb") as fh:
            data, path = fh.read(), a.file
    else:
        data, path = default_corpus()
    data = data[a.offset:a.offset + a.length]
    print(f"text: {path} bytes [{a.offset}, {a.offset + len(data)})", flush=True)
    ok = True
    for i, name in enumerate(a.model or ["ppm"]):
        if name in ("lstm", "mix"):
            if not a.checkpoint:
                ap.error(f"--model {name} needs --checkpoint PATH")
            from varlens.info.models import MixtureModel
            from varlens.info.neural import LSTMModel
            model = LSTMModel(a.checkpoint)
            if name == "mix":
                model = MixtureModel([model, PPMModel(order=a.order, discount=a.discount)])
        else:
            model = PPMModel(order=a.order, discount=a.discount)
        r = compare_compressors(data, model)
        if i == 0:
            for k in ("gzip", "bz2", "xz"):
                print(f"  {k:8s} {r[k]:.4f} bits/char")
        print(f"  {name:8s} {r['varlens']:.4f} bits/char  encode {r['encode_seconds']:.1f} s  decode "
              f"{r.get('decode_seconds', 0):.1f} s  round-trip {'OK' if r.get('roundtrip') else 'FAILED'}")
        print(f"    model {r['model']}")
        if "model_contexts" in r:
            print(f"    model size: 0 bytes stored (adaptive); state at the end: {r['model_contexts']} contexts, "
                  f"{r['model_counts']} (context, byte) counts")
        if "model_size" in r:
            print(f"    model size: {r['model_size']}")
        ok = ok and r.get("roundtrip", True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

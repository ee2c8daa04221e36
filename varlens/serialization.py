"""Saving and loading (varlens.save / varlens.load): files that cannot run code on load,
written so a crash never leaves a broken one.  Checkpoints (varlens.train) use this format.

Format: a short header, then a standard ``.npz`` archive (a zip of ``.npy`` arrays) that
is read with ``allow_pickle=False``.  The header is the magic line ``VARLENS-CKPT 1`` and
the SHA-256 of the archive in hex, so any truncation or flipped bit anywhere in the file
is refused with a clear error before anything is parsed.  (``tail -c +81 FILE > x.npz``
gives the plain archive.)  Any nested structure of dicts, lists, tuples, numbers,
strings, None, NumPy arrays and varlens Tensors is split into

- the arrays, stored as ``a0, a1, ...`` entries, and
- a JSON description of everything else (``__meta__``, stored as a uint8 array), where an
  array is ``{"__array__": "a0"}`` (with ``"tensor": true`` for Tensors) and dicts keep
  their key types (an optimiser's integer parameter ids stay ints).

We chose npz over safetensors: it needs nothing beyond NumPy, and one archive holds
the arrays and our JSON.

Writing is atomic: the bytes go to a temporary file in the target's directory, which is
flushed and fsync'ed, then ``os.replace``d onto the final name, and the directory is
fsync'ed so the rename itself survives a power cut.  A reader sees the old file or the
new one, never half of one.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import zipfile

import numpy as np

from varlens.tensor import Tensor

FORMAT = "varlens-checkpoint"
VERSION = 1


class CheckpointError(RuntimeError):
    """A checkpoint file that is missing, truncated, corrupted or not a varlens checkpoint."""


# ---------------------------------------------------------------------- structure <-> (json, arrays)
def _c(a):
    """C-contiguous, keeping 0-d arrays 0-d (np.ascontiguousarray would make them 1-d)."""
    return a if a.flags.c_contiguous else a.copy(order="C")


def _pack(obj, arrays):
    if isinstance(obj, Tensor):
        name = f"a{len(arrays)}"
        arrays[name] = _c(obj._data)
        return {"__array__": name, "tensor": True}
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in "biuf":
            raise TypeError(f"checkpoint: arrays of dtype {obj.dtype} cannot be saved (only bool, int, "
                            "float); object arrays would need pickle")
        name = f"a{len(arrays)}"
        arrays[name] = _c(obj)
        return {"__array__": name}
    if isinstance(obj, np.generic):
        return obj.item()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, dict):
        return {"__dict__": [[_pack(k, arrays), _pack(v, arrays)] for k, v in obj.items()]}
    if isinstance(obj, tuple):
        return {"__tuple__": [_pack(v, arrays) for v in obj]}
    if isinstance(obj, list):
        return [_pack(v, arrays) for v in obj]
    raise TypeError(f"checkpoint: cannot save an object of type {type(obj).__name__}; expected dicts, "
                    "lists, tuples, numbers, strings, None, NumPy arrays or Tensors")


def _unpack(obj, arrays):
    if isinstance(obj, list):
        return [_unpack(v, arrays) for v in obj]
    if isinstance(obj, dict):
        if "__array__" in obj:
            a = arrays[obj["__array__"]]
            return Tensor._make(a) if obj.get("tensor") else a
        if "__dict__" in obj:
            return {_unpack(k, arrays): _unpack(v, arrays) for k, v in obj["__dict__"]}
        if "__tuple__" in obj:
            return tuple(_unpack(v, arrays) for v in obj["__tuple__"])
        raise CheckpointError(f"checkpoint: unknown entry in metadata: {sorted(obj)}")
    return obj


# ---------------------------------------------------------------------- atomic write
def atomic_write_bytes(path, data):
    """Write ``data`` to ``path`` atomically (temp file, flush, fsync, rename, fsync dir)."""
    path = os.fspath(path)
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:
        dfd = os.open(d, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


MAGIC = b"VARLENS-CKPT 1\n"
_HEADER = len(MAGIC) + 64 + 1


def save(obj, path):
    """Save a nested structure of state dicts to ``path``, atomically; returns ``path``."""
    arrays = {}
    body = _pack(obj, arrays)
    meta = json.dumps({"format": FORMAT, "version": VERSION, "body": body},
                      allow_nan=True, separators=(",", ":")).encode()
    buf = io.BytesIO()
    np.savez(buf, __meta__=np.frombuffer(meta, dtype=np.uint8), **arrays)
    payload = buf.getvalue()
    digest = hashlib.sha256(payload).hexdigest().encode()
    atomic_write_bytes(path, MAGIC + digest + b"\n" + payload)
    return path


def load(path):
    """Load a checkpoint written by ``save``; refuses truncated, altered or foreign files."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise CheckpointError(f"checkpoint {path!r} does not exist")
    with open(path, "rb") as f:
        raw = f.read()
    if not raw.startswith(MAGIC[:8]):
        raise CheckpointError(f"{path!r} is not a varlens checkpoint (it does not start with {MAGIC[:-1]!r})")
    if len(raw) < _HEADER or not raw.startswith(MAGIC) or raw[_HEADER - 1:_HEADER] != b"\n":
        raise CheckpointError(f"checkpoint {path!r} is truncated or corrupted (bad header) and was refused; "
                              "use an earlier checkpoint")
    payload = raw[_HEADER:]
    if hashlib.sha256(payload).hexdigest().encode() != raw[len(MAGIC):_HEADER - 1]:
        raise CheckpointError(f"checkpoint {path!r} is truncated or corrupted: its SHA-256 checksum does not "
                              f"match ({len(raw)} bytes on disk); it was refused, use an earlier checkpoint")
    try:
        with np.load(io.BytesIO(payload), allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        meta = json.loads(arrays.pop("__meta__").tobytes())
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError) as e:
        raise CheckpointError(f"checkpoint {path!r} has a valid checksum but could not be read and was "
                              f"refused ({type(e).__name__}: {e})") from None
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"{path!r} is not a varlens checkpoint (format {meta.get('format')!r})")
    if meta.get("version", 0) > VERSION:
        raise CheckpointError(f"checkpoint {path!r} has format version {meta['version']}; this varlens "
                              f"reads up to {VERSION}")
    return _unpack(meta["body"], arrays)

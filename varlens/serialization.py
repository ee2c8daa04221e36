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
  array is ``{"__array__": "a0"}`` (with ``"tensor": true`` for Tensors, plus
  ``"requires_grad"``/``"parameter"`` flags for tensors that require grad (they load as leaves) and
  ``nn.Parameter``s) and dicts keep their key types (an optimiser's integer parameter ids
  stay ints).  Arrays that are views of one C-contiguous buffer of their own dtype and are
  saved together store that buffer once plus ``"view": [byte offset, shape, strides]``,
  so they share memory again after loading (as torch.save keeps shared storages); other
  views are saved as independent copies.  dtypes and devices are stored by name.

A whole ``nn.Module`` (or optimiser) is refused with a message pointing to
``state_dict()``: saving one would need pickle, which could run code on load.

We chose npz over safetensors: it needs nothing beyond NumPy, and one archive holds
the arrays and our JSON.

``f`` is a path or a binary file-like object.  Writing to a path is atomic: the bytes go to a temporary file in the target's directory, which is
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

from varlens.backend import to_dtype
from varlens.tensor import Tensor
from varlens.tensor import device as _device

FORMAT = "varlens-checkpoint"
VERSION = 1


class CheckpointError(RuntimeError):
    """A checkpoint file that is missing, truncated, corrupted or not a varlens checkpoint."""


# ---------------------------------------------------------------------- structure <-> (json, arrays)
def _c(a):
    """C-contiguous, keeping 0-d arrays 0-d (np.ascontiguousarray would make them 1-d)."""
    return a if a.flags.c_contiguous else a.copy(order="C")


def _root(a):
    """The array that owns ``a``'s memory, when views of it can be rebuilt from it (a C-contiguous
    owner of ``a``'s dtype, of a kind we save); else None."""
    r = a
    while isinstance(r.base, np.ndarray):
        r = r.base
    if r.base is not None or not r.flags.c_contiguous or r.dtype != a.dtype or a.dtype.kind not in "biufc":
        return None
    return r


class _Packer:
    """Walks the structure; arrays that are views of one buffer (and saved together) are stored
    once, as that buffer plus (offset, shape, strides), so they share memory again on load."""

    def __init__(self, shared_roots):
        self.arrays = {}
        self.roots = {}                 # id(root) -> name of the stored root
        self.shared_roots = shared_roots

    def array(self, a):
        r = _root(a)
        if r is not None and id(r) in self.shared_roots:
            name = self.roots.get(id(r))
            if name is None:
                name = self.roots[id(r)] = f"a{len(self.arrays)}"
                self.arrays[name] = r
            off = a.__array_interface__["data"][0] - r.__array_interface__["data"][0]
            return {"__array__": name, "view": [off, list(a.shape), list(a.strides)]}
        name = f"a{len(self.arrays)}"
        self.arrays[name] = _c(a)
        return {"__array__": name}

    def pack(self, obj):
        if isinstance(obj, Tensor):
            d = self.array(obj._data)
            d["tensor"] = True
            if obj.requires_grad:
                d["requires_grad"] = True
            if type(obj).__name__ == "Parameter":
                d["parameter"] = True
            return d
        if isinstance(obj, np.ndarray):
            if obj.dtype.kind not in "biufc":
                raise TypeError(f"checkpoint: arrays of dtype {obj.dtype} cannot be saved (only bool, int, "
                                "float, complex); object arrays would need pickle")
            return self.array(obj)
        if isinstance(obj, np.generic):
            return obj.item()
        if obj is None or isinstance(obj, (bool, int, float, str)):
            return obj
        if isinstance(obj, dict):
            return {"__dict__": [[self.pack(k), self.pack(v)] for k, v in obj.items()]}
        if isinstance(obj, tuple):
            return {"__tuple__": [self.pack(v) for v in obj]}
        if isinstance(obj, list):
            return [self.pack(v) for v in obj]
        if isinstance(obj, np.dtype) or (isinstance(obj, type) and issubclass(obj, np.generic)) \
                or type(obj).__name__.lower().endswith("dtype"):
            return {"__dtype__": to_dtype(obj).name}
        if isinstance(obj, _device):
            return {"__device__": str(obj)}
        if callable(getattr(obj, "state_dict", None)):
            kind = type(obj).__name__
            raise TypeError(f"checkpoint: cannot save a whole {kind} object: varlens files hold no pickled "
                            f"code (they are safe to load). Save its state instead, e.g. "
                            f"varlens.save(model.state_dict(), path), and restore it into a freshly built "
                            f"{kind} with .load_state_dict(varlens.load(path))")
        raise TypeError(f"checkpoint: cannot save an object of type {type(obj).__name__}; expected dicts, "
                        "lists, tuples, numbers, strings, None, dtypes, NumPy arrays or Tensors")


def _shared_roots(obj):
    """ids of the buffers that two or more saved Tensors/arrays use (the same array twice, or
    views of one buffer): those are stored once.  Only the simple case is handled (see _root);
    other views are saved as independent copies."""
    count, stack = {}, [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, Tensor):
            o = o._data
        if isinstance(o, np.ndarray):
            r = _root(o)
            if r is not None:
                count[id(r)] = count.get(id(r), 0) + 1
        elif isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, (list, tuple)):
            stack.extend(o)
    return {k for k, n in count.items() if n > 1}


def _pack(obj, arrays):
    """Split ``obj`` into a JSON-able description and the ``arrays`` dict (filled in place)."""
    p = _Packer(_shared_roots(obj))
    p.arrays = arrays
    return p.pack(obj)


def _unpack(obj, arrays, place=None):
    if isinstance(obj, list):
        return [_unpack(v, arrays, place) for v in obj]
    if isinstance(obj, dict):
        if "__array__" in obj:
            a = arrays[obj["__array__"]]
            if "view" in obj:
                off, shape, strides = obj["view"]
                a = np.ndarray(tuple(shape), a.dtype, buffer=a, offset=int(off), strides=tuple(strides))
            if not obj.get("tensor"):
                return a
            if obj.get("parameter"):
                from varlens.nn.parameter import Parameter   # lazy: nn sits above this module
                t = Parameter(Tensor._make(a), requires_grad=bool(obj.get("requires_grad")))
            else:
                t = Tensor._make(a)
                if obj.get("requires_grad"):
                    t.requires_grad_(True)
            return t if place is None else place(t)
        if "__dict__" in obj:
            return {_unpack(k, arrays, place): _unpack(v, arrays, place) for k, v in obj["__dict__"]}
        if "__tuple__" in obj:
            return tuple(_unpack(v, arrays, place) for v in obj["__tuple__"])
        if "__dtype__" in obj:
            import varlens    # the public dtype object (varlens.float32), whatever its type
            return getattr(varlens, obj["__dtype__"], None) or np.dtype(obj["__dtype__"])
        if "__device__" in obj:
            return _device(obj["__device__"])
        raise CheckpointError(f"checkpoint: unknown entry in metadata: {sorted(obj)}")
    return obj


# ---------------------------------------------------------------------- atomic write
def atomic_write_bytes(path, data):
    """Write ``data`` to ``path`` atomically (temp file, flush, fsync, rename, fsync dir)."""
    path = os.fspath(path)
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise RuntimeError(f"Parent directory {d} does not exist (cannot write {path!r}; create it first, "
                           "e.g. os.makedirs(dirname, exist_ok=True))")
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


def _is_path(f):
    return isinstance(f, (str, os.PathLike))


def save(obj, f, pickle_module=None, pickle_protocol=2, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False):
    """Save a nested structure (state dicts, tensors, arrays, numbers, strings...) to ``f``.

    ``f`` is a path (``str`` or ``os.PathLike``; written atomically, and its parent directory
    must exist, as in PyTorch) or a binary file-like object with ``write`` (``io.BytesIO``,
    ``open(path, 'wb')``).  The format holds no pickle, so ``pickle_module`` and
    ``pickle_protocol`` are accepted for compatibility and have no effect.  Parameters and
    tensors that require grad load back the same way (as leaves); Tensors that are views of one
    buffer share memory again after loading.  Returns None (as torch.save).
    """
    if not (_is_path(f) or callable(getattr(f, "write", None))):
        raise AttributeError(f"save: expected 'f' to be a string, path, or a file-like object with a "
                             f"'write' attribute, got {type(f).__name__}")
    arrays = {}
    body = _pack(obj, arrays)
    meta = json.dumps({"format": FORMAT, "version": VERSION, "body": body},
                      allow_nan=True, separators=(",", ":")).encode()
    buf = io.BytesIO()
    np.savez(buf, __meta__=np.frombuffer(meta, dtype=np.uint8), **arrays)
    payload = buf.getvalue()
    digest = hashlib.sha256(payload).hexdigest().encode()
    data = MAGIC + digest + b"\n" + payload
    if _is_path(f):
        atomic_write_bytes(f, data)
    else:
        f.write(data)
        if callable(getattr(f, "flush", None)):
            f.flush()


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
    """``load`` of a path that does not exist (both a CheckpointError and a FileNotFoundError)."""


def _placer(map_location):
    """A function applied to every loaded Tensor for ``map_location`` (None: keep as is).

    varlens tensors live on the CPU, so every form that maps to the CPU is accepted: None,
    'cpu', a device object whose type is cpu, a dict {saved location: target} (files hold
    'cpu' tensors), or torch's callable ``f(storage, location)``.  A target that is not the CPU
    ('cuda:0', 'mps', ...) raises, as torch.load does on a machine without that device."""
    if map_location is None:
        return None
    if isinstance(map_location, dict):
        return _placer(map_location.get("cpu", map_location.get(_device("cpu"), "cpu")))
    if isinstance(map_location, (str, _device)) or hasattr(map_location, "type") and not callable(map_location):
        name = str(map_location)
        if _device(name).type != "cpu":
            raise RuntimeError(f"load: map_location={name!r}: device {_device(name).type!r} is not "
                               "available; varlens runs on the CPU. Load with map_location='cpu' (or leave "
                               "it out)")
        return None
    if callable(map_location):
        def place(t):
            out = map_location(t, "cpu")
            return t if out is None else out
        return place
    raise TypeError(f"load: map_location must be None, a string such as 'cpu', a device, a dict or a "
                    f"callable(storage, location); got {type(map_location).__name__}")


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, **pickle_load_args):
    """Load what ``save`` wrote, from a path or a binary file-like object with ``read``.

    Refuses truncated, altered or foreign files (``CheckpointError``); a missing path raises
    ``CheckpointNotFoundError``, a ``FileNotFoundError``.  The format cannot run code on load, so
    ``weights_only`` (True or False) changes nothing: it is always as safe as
    ``weights_only=True``.  ``map_location``: see ``_placer`` (everything lands on the CPU).
    ``mmap`` is accepted for paths and ignored (the file is read into memory);
    ``pickle_module`` and extra pickle arguments are accepted and ignored.
    """
    if weights_only not in (None, True, False):
        raise TypeError(f"load: weights_only must be None, True or False, got {weights_only!r}")
    place = _placer(map_location)
    if _is_path(f):
        path = os.fspath(f)
        if not os.path.exists(path):
            raise CheckpointNotFoundError(
                f"checkpoint {path!r} does not exist (no such file or directory; current directory "
                f"{os.getcwd()!r})")
        with open(path, "rb") as fh:
            raw = fh.read()
        where = repr(path)
    elif callable(getattr(f, "read", None)):
        if mmap:
            raise ValueError("load: mmap=True needs 'f' to be a file path, got a file-like object")
        raw = f.read()
        where = f"the {type(f).__name__} object"
        if not raw:
            raise CheckpointError(f"load: {where} is empty at its current position; after writing to it, "
                                  "call .seek(0) before loading")
    else:
        raise AttributeError(f"load: expected 'f' to be a string, path, or a file-like object with a 'read' "
                             f"attribute, got {type(f).__name__}")
    if not raw.startswith(MAGIC[:8]):
        raise CheckpointError(f"{where} is not a varlens checkpoint (it does not start with {MAGIC[:-1]!r}; "
                              "files written by PyTorch's pickle format cannot be read)")
    if len(raw) < _HEADER or not raw.startswith(MAGIC) or raw[_HEADER - 1:_HEADER] != b"\n":
        raise CheckpointError(f"checkpoint {where} is truncated or corrupted (bad header) and was refused; "
                              "use an earlier checkpoint")
    payload = raw[_HEADER:]
    if hashlib.sha256(payload).hexdigest().encode() != raw[len(MAGIC):_HEADER - 1]:
        raise CheckpointError(f"checkpoint {where} is truncated or corrupted: its SHA-256 checksum does not "
                              f"match ({len(raw)} bytes read); it was refused, use an earlier checkpoint")
    try:
        with np.load(io.BytesIO(payload), allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        meta = json.loads(arrays.pop("__meta__").tobytes())
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError) as e:
        raise CheckpointError(f"checkpoint {where} has a valid checksum but could not be read and was "
                              f"refused ({type(e).__name__}: {e})") from None
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"{where} is not a varlens checkpoint (format {meta.get('format')!r})")
    if meta.get("version", 0) > VERSION:
        raise CheckpointError(f"checkpoint {where} has format version {meta['version']}; this varlens "
                              f"reads up to {VERSION}")
    return _unpack(meta["body"], arrays, place)

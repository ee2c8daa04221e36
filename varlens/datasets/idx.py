"""IDX files (the MNIST format): a magic number, the dimensions, then raw big-endian data.

Magic: two zero bytes, a type code (0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32,
0x0D float32, 0x0E float64) and the number of dimensions; then one big-endian uint32
per dimension.  Files may be gzip-compressed (detected from the content, not the name).
"""
from __future__ import annotations

import gzip
import zlib
import os

import numpy as np

_TYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path):
    """Read one IDX file (gzip or raw) into a NumPy array of its stored shape."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"read_idx: no such file: {path}")
    with open(path, "rb") as f:
        head = f.read(2)
    opener = gzip.open if head == b"\x1f\x8b" else open
    try:
        with opener(path, "rb") as f:
            raw = f.read()
    except (EOFError, OSError, zlib.error) as e:   # a truncated or corrupt gzip stream
        raise ValueError(f"read_idx: {path} is damaged ({type(e).__name__}: {e}); delete it and fetch it "
                         "again (for Fashion-MNIST: `make data`)") from e
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ValueError(f"read_idx: {path} is not an IDX file (its magic number does not start with "
                         "two zero bytes)")
    code, ndim = raw[2], raw[3]
    if code not in _TYPES:
        raise ValueError(f"read_idx: {path} has unknown IDX type code 0x{code:02X}; expected one of "
                         + ", ".join(f"0x{c:02X}" for c in _TYPES))
    dims = np.frombuffer(raw, dtype=">u4", count=ndim, offset=4).astype(np.int64)
    offset = 4 + 4 * ndim
    dtype = np.dtype(_TYPES[code])
    count = int(np.prod(dims)) if ndim else 1
    need = offset + count * dtype.itemsize
    if len(raw) < need:
        raise ValueError(f"read_idx: {path} is truncated: header says shape {tuple(dims.tolist())} "
                         f"({need} bytes) but the file has {len(raw)} bytes")
    data = np.frombuffer(raw, dtype=dtype, count=count, offset=offset)
    return data.astype(dtype.newbyteorder("=")).reshape(tuple(dims.tolist()))


def write_idx(path, array, compress=None):
    """Write an array as an IDX file (gzip if ``compress`` or the name ends in .gz)."""
    array = np.asarray(array)
    codes = {np.dtype(np.uint8): 0x08, np.dtype(np.int8): 0x09, np.dtype(np.int16): 0x0B,
             np.dtype(np.int32): 0x0C, np.dtype(np.float32): 0x0D, np.dtype(np.float64): 0x0E}
    if array.dtype not in codes:
        raise TypeError(f"write_idx: array dtype must be one of {sorted(map(str, codes))}, got {array.dtype}")
    head = bytes([0, 0, codes[array.dtype], array.ndim]) + np.asarray(array.shape, dtype=">u4").tobytes()
    body = array.astype(array.dtype.newbyteorder(">")).tobytes()
    compress = str(path).endswith(".gz") if compress is None else compress
    with (gzip.open if compress else open)(path, "wb") as f:
        f.write(head + body)


def _find(root, stem):
    for name in (stem + ".gz", stem):
        p = os.path.join(root, name)
        if os.path.exists(p):
            return p
    return None


def load_idx_dir(root, train=True, images="{split}-images-idx3-ubyte", labels="{split}-labels-idx1-ubyte",
                 hint=None):
    """Read an MNIST-layout directory: ``train-*`` or ``t10k-*`` images and labels (gz or raw).

    Returns ``(images uint8 (N, H, W), labels int64 (N,))``.
    """
    split = "train" if train else "t10k"
    out = []
    for pattern in (images, labels):
        stem = pattern.format(split=split)
        p = _find(root, stem)
        if p is None:
            msg = f"IDX file {stem}[.gz] not found in {root!r}."
            raise FileNotFoundError(msg + (" " + hint if hint else ""))
        out.append(read_idx(p))
    X, y = out
    if len(X) != len(y):
        raise ValueError(f"load_idx_dir: {len(X)} images but {len(y)} labels in {root!r}")
    return X, y.astype(np.int64)

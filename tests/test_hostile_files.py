"""varlens.load on hostile files (issue 16): bounded memory, only CheckpointError, only tensors
and plain data.  Generated cases (Hypothesis) mutate valid checkpoints at the byte, zip-field,
.npy-header and JSON levels, with the checksum recomputed so the parser itself is exercised."""
import hashlib
import io
import json
import os
import struct
import tracemalloc
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import varlens as vl
from varlens import serialization as S
from varlens.serialization import CheckpointError

# VARLENS_FUZZ_EXAMPLES=20000 runs a longer, randomised campaign (default: 150 fixed examples each)
_LONG = int(os.environ.get("VARLENS_FUZZ_EXAMPLES", "0"))
FUZZ = settings(max_examples=_LONG or 150, deadline=None, suppress_health_check=list(HealthCheck),
                derandomize=not _LONG, database=None)


def wrap(payload):
    """Header + a correct checksum around any payload bytes."""
    return S.MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload


def npz(**arrays):
    b = io.BytesIO()
    np.savez(b, **arrays)
    return b.getvalue()


def meta_array(body, **top):
    doc = {"format": S.FORMAT, "version": 1, "body": body, **top}
    return np.frombuffer(json.dumps(doc).encode(), dtype=np.uint8)


def valid_file():
    vl.manual_seed(0)
    base = vl.arange(12.0).reshape(3, 4)
    m = vl.nn.Linear(3, 2)
    obj = {"model": m.state_dict(), "base": base, "rows": base[1:], "t": base.t(), "i": np.arange(5),
           "opt": {"state": {0: {"step": vl.tensor(3.0)}}, "groups": [{"lr": 0.1, "betas": (0.9, 0.99)}]},
           "dtype": vl.float32, "dev": vl.device("cpu"), "s": {1, 2}, "n": None, "f": float("inf")}
    b = io.BytesIO()
    vl.save(obj, b)
    return b.getvalue()


VALID = valid_file()
PAYLOAD = VALID[S._HEADER:]
PLAIN = (type(None), bool, int, float, str, np.ndarray, vl.Tensor, np.dtype, type(vl.device("cpu")))


def only_plain(x):
    """Loading returned tensors and plain data only."""
    if isinstance(x, (list, tuple, set, frozenset)):
        return all(only_plain(v) for v in x)
    if isinstance(x, dict):
        return all(only_plain(k) and only_plain(v) for k, v in x.items())
    return isinstance(x, PLAIN)


def description_size(data):
    """Bytes of the __meta__ entry when the archive can be read, else the whole file's size."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            return z.getinfo("__meta__.npy").file_size
    except Exception:  # noqa: BLE001 - hostile bytes
        return len(data)


def load_bounded(data, k=4, per_description_byte=64, const=1 << 20):
    """load ``data``; return the result or the CheckpointError, asserting the stated memory bound
    (docs/serialization.md: 4 x file + 64 x description + 1 MiB) and that no other exception
    type escapes."""
    bound = k * len(data) + per_description_byte * min(description_size(data), len(data)) + const
    tracemalloc.start()
    try:
        out = vl.load(io.BytesIO(data))
    except CheckpointError as e:
        out = e
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak < bound, f"peak {peak} bytes for a {len(data)}-byte file"
    if not isinstance(out, CheckpointError):
        assert only_plain(out), out
    return out


def test_valid_file_loads_within_the_memory_bound():
    big = io.BytesIO()
    vl.save({"w": vl.randn(512, 512), "v": vl.randn(1000)}, big)
    out = load_bounded(big.getvalue(), per_description_byte=0, k=3, const=1 << 16)   # arrays: < 3 x file
    assert out["w"].shape == (512, 512)
    assert load_bounded(VALID)["base"].shape == (3, 4)


@pytest.mark.parametrize("item", ["[]", '{"__dict__":[]}', "1.5", '{"__tuple__":[]}', '"x"', "null"])
def test_description_heavy_files_stay_within_the_stated_bound(item):
    text = ('{"format":"%s","version":1,"body":[' % S.FORMAT + ",".join([item] * 30000) + "]}").encode()
    out = load_bounded(wrap(npz(__meta__=np.frombuffer(text, dtype=np.uint8))))
    assert len(out) == 30000


def test_checkpoint_error_types_match_torch_load():
    import pickle
    assert issubclass(CheckpointError, RuntimeError) and issubclass(CheckpointError, pickle.UnpicklingError)


# ------------------------------------------------------------------ special files and the magic first
def test_dev_zero_directory_and_fifo_are_refused_without_reading(tmp_path):
    for p in ("/dev/zero", "/dev/urandom", str(tmp_path)):
        with pytest.raises(CheckpointError, match="not a regular file|is a directory|character device"):
            vl.load(p)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(CheckpointError, match="FIFO"):          # would block forever if opened
        vl.load(fifo)


def test_magic_is_checked_before_reading_the_rest():
    class Endless(io.RawIOBase):
        reads = 0

        def readable(self):
            return True

        def read(self, n=-1):
            Endless.reads += 1
            assert n != -1 and n < 1 << 20, "read without a bound"
            return b"\0" * n
    with pytest.raises(CheckpointError, match="not a varlens checkpoint"):
        vl.load(Endless())
    assert Endless.reads == 1


# ------------------------------------------------------------------ the cases named in the issue
def test_compressed_entry_cannot_inflate():
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("__meta__.npy", npz_entry(meta_array({"__array__": "a0"})))
        z.writestr("a0.npy", npz_entry(np.zeros(1 << 23, dtype=np.uint8)))   # 8 MB of zeros -> ~8 kB
    data = wrap(b.getvalue())
    assert len(data) < 100_000
    err = load_bounded(data)
    assert isinstance(err, CheckpointError) and "compressed" in str(err)


def npz_entry(a):
    b = io.BytesIO()
    np.save(b, a, allow_pickle=False)
    return b.getvalue()


@pytest.mark.parametrize("shape", [(10 ** 12,), (10 ** 6, 10 ** 6), (2 ** 62, 2 ** 62), (-1,), (3.0,),
                                   (True,), (1,) * 100, "x"])
def test_declared_shapes_are_checked_against_bytes_present(shape):
    hdr = "{'descr': '<f8', 'fortran_order': False, 'shape': %r, }" % (shape,)
    entry = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + b"\0" * 64
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w") as z:
        z.writestr("__meta__.npy", npz_entry(meta_array({"__array__": "a0"})))
        z.writestr("a0.npy", entry)
    err = load_bounded(wrap(b.getvalue()))
    assert isinstance(err, CheckpointError), err


@pytest.mark.parametrize("view", [[0, [10 ** 6, 10 ** 6], [0, 0]], [0, [4], [0]], [0, [3, 4], [8, 8]],
                                  [8, [4], [8]], [-8, [2], [8]], [0, [2], [-8]], [4, [1], [8]], [0, [2], [12]],
                                  [0, [2, 2], [8]], ["0", [1], [8]], [0, [2 ** 70], [8]], [0, [1], [2 ** 70]]])
def test_views_are_bounded_and_never_overlap(view):
    data = wrap(npz(__meta__=meta_array({"__array__": "a0", "view": view, "tensor": True}),
                    a0=np.arange(4.0)))
    err = load_bounded(data)
    assert isinstance(err, CheckpointError), (view, err)


def test_legal_views_load():
    for view, expect in [([8, [2], [16]], [1.0, 3.0]), ([24, [4], [-8]], [3.0, 2.0, 1.0, 0.0]),
                         ([0, [2, 2], [8, 16]], [[0.0, 2.0], [1.0, 3.0]]), ([0, [0], [8]], [])]:
        out = vl.load(io.BytesIO(wrap(npz(__meta__=meta_array({"__array__": "a0", "view": view}),
                                          a0=np.arange(4.0)))))
        assert out.tolist() == expect


def test_deep_json_is_refused():
    for depth in (S.MAX_DEPTH + 5, 100_000):
        body = json.loads("[" * depth + "]" * depth) if depth < 900 else None
        text = ('{"format":"%s","version":1,"body":' % S.FORMAT + "[" * depth + "]" * depth + "}").encode()
        data = wrap(npz(__meta__=np.frombuffer(text, dtype=np.uint8)))
        err = load_bounded(data)
        assert isinstance(err, CheckpointError) and "levels deep" in str(err), err
        del body


@pytest.mark.parametrize("tag", ["__builtins__", "np", "numpy", "save", "load", "nn", "object", "O", "V8",
                                 "float128", "Tensor", "manual_seed", "str", 7, None, ["float32"]])
def test_dtype_tags_are_an_allow_list(tag):
    err = load_bounded(wrap(npz(__meta__=meta_array({"__dtype__": tag}))))
    assert isinstance(err, CheckpointError) and "dtype" in str(err)


@pytest.mark.parametrize("dev", ["cpu:0:0", "evil", "cuda:-1", "__import__", 5, "", "cpu:99999999"])
def test_device_tags_are_an_allow_list(dev):
    err = load_bounded(wrap(npz(__meta__=meta_array({"__device__": dev}))))
    assert isinstance(err, CheckpointError) and "device" in str(err)


def test_every_allowed_dtype_and_device_loads():
    for name in S.ALLOWED_DTYPES:
        assert vl.load(io.BytesIO(wrap(npz(__meta__=meta_array({"__dtype__": name}))))) == np.dtype(name)
    for dev in ("cpu", "cuda:0", "meta"):
        assert str(vl.load(io.BytesIO(wrap(npz(__meta__=meta_array({"__device__": dev})))))) == dev


@pytest.mark.parametrize("body", [
    {"__dict__": [[[1], 2]]}, {"__dict__": [[1]]}, {"__dict__": 5}, {"__dict__": [], "x": 1},
    {"__tuple__": 3}, {"__set__": [[1]]}, {"__array__": "zz"}, {"__array__": 3}, {"__array__": "a0", "tensor": 1},
    {"__array__": "a0", "requires_grad": True, "tensor": True, "parameter": "yes"}, {"__ref__": 0}, {"__ref__": "x"},
    {"__module__": 3}, {"__global__": ["os", "system"]}, {"what": 1}, {"__array__": "a0", "tensor": True, "id": 0,
                                                                      "extra": 1}])
def test_malformed_entries_raise_checkpoint_error(body):
    data = wrap(npz(__meta__=meta_array(body), a0=np.arange(3)))
    err = load_bounded(data)
    assert isinstance(err, CheckpointError), (body, err)


@pytest.mark.parametrize("top", [{"version": "1"}, {"version": 99}, {"format": 3}, {"body": None, "x": 1}])
def test_malformed_top_level(top):
    doc = {"format": S.FORMAT, "version": 1, "body": None, **top}
    data = wrap(npz(__meta__=np.frombuffer(json.dumps(doc).encode(), dtype=np.uint8)))
    out = load_bounded(data)
    assert isinstance(out, CheckpointError) or out is None


def test_long_int_literals_and_bad_utf8():
    text = ('{"format":"%s","version":1,"body":' % S.FORMAT + "9" * 100_000 + "}").encode()
    assert isinstance(load_bounded(wrap(npz(__meta__=np.frombuffer(text, dtype=np.uint8)))), CheckpointError)
    assert isinstance(load_bounded(wrap(npz(__meta__=np.frombuffer(b"\xff\xfe{", dtype=np.uint8)))),
                      CheckpointError)
    assert isinstance(load_bounded(wrap(npz(__meta__=np.zeros(3, dtype=np.float32)))), CheckpointError)
    assert isinstance(load_bounded(wrap(npz(a0=np.zeros(3)))), CheckpointError)          # no __meta__


def test_zip_with_duplicate_foreign_or_encrypted_entries():
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w") as z:
        z.writestr("__meta__.npy", npz_entry(meta_array(None)))
        z.writestr("../../etc/passwd", b"x")
    assert "unexpected entry" in str(load_bounded(wrap(b.getvalue())))
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w") as z:
        z.writestr("__meta__.npy", npz_entry(meta_array(None)))
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            z.writestr("__meta__.npy", npz_entry(meta_array(None)))
    assert "twice" in str(load_bounded(wrap(b.getvalue())))
    raw = bytearray(npz(__meta__=meta_array(None)))
    for sig in (b"PK\x03\x04", b"PK\x01\x02"):               # set the encryption flag in both headers
        i = raw.index(sig)
        off = i + (6 if sig == b"PK\x03\x04" else 8)
        raw[off] |= 1
    assert isinstance(load_bounded(wrap(bytes(raw))), CheckpointError)
    # other compression methods (bzip2, lzma, unknown 99) are refused before zipfile would raise
    for method in (12, 14, 99):
        raw = bytearray(npz(__meta__=meta_array(None)))
        for sig, off in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):
            i = raw.index(sig)
            raw[i + off:i + off + 2] = struct.pack("<H", method)
        err = load_bounded(wrap(bytes(raw)))
        assert isinstance(err, CheckpointError) and "compressed" in str(err)


# ------------------------------------------------------------------ generated mutations
@FUZZ
@given(st.lists(st.tuples(st.integers(0, len(PAYLOAD) - 1), st.integers(0, 255)), min_size=1, max_size=8))
def test_fuzz_byte_flips_with_recomputed_checksum(edits):
    p = bytearray(PAYLOAD)
    for pos, val in edits:
        p[pos] = val
    load_bounded(wrap(bytes(p)))


INT_FIELDS = [0, 1, 0x7F, 0xFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 10 ** 9]


@FUZZ
@given(st.lists(st.tuples(st.integers(0, len(PAYLOAD) - 4), st.sampled_from(INT_FIELDS), st.sampled_from([2, 4])),
                min_size=1, max_size=4))
def test_fuzz_length_and_offset_fields(edits):
    """Overwrite little-endian u16/u32 fields (zip sizes, offsets, counts, .npy header lengths)."""
    p = bytearray(PAYLOAD)
    for pos, val, width in edits:
        p[pos:pos + width] = (val & ((1 << (8 * width)) - 1)).to_bytes(width, "little")
    load_bounded(wrap(bytes(p)))


@FUZZ
@given(st.integers(0, len(PAYLOAD)), st.integers(0, len(PAYLOAD)), st.binary(max_size=64))
def test_fuzz_cut_and_splice(start, length, insert):
    p = PAYLOAD[:start] + insert + PAYLOAD[start + length:]
    load_bounded(wrap(p))
    load_bounded(VALID[:start])                                     # plain truncation, checksum wrong


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70), st.floats(), st.text(max_size=8),
                      st.sampled_from(["a0", "a1", "float32", "cpu", "os", "system", "varlens"]))
MARKERS = ["__array__", "__dict__", "__tuple__", "__set__", "__dtype__", "__device__", "__module__", "__global__",
           "__ref__", "view", "tensor", "parameter", "requires_grad", "id", "ordered", "frozen", "module",
           "qualname", "state"]
json_values = st.recursive(json_leaf, lambda c: st.one_of(
    st.lists(c, max_size=4), st.dictionaries(st.sampled_from(MARKERS) | st.text(max_size=4), c, max_size=4)),
    max_leaves=30)


@FUZZ
@given(json_values)
def test_fuzz_descriptions(body):
    """Arbitrary JSON built from the format's own keys: a result of plain data or CheckpointError."""
    data = wrap(npz(__meta__=meta_array(body), a0=np.arange(6.0), a1=np.arange(3, dtype=np.int32)))
    for wo in (True, False):
        try:
            out = vl.load(io.BytesIO(data), weights_only=wo)
        except CheckpointError:
            continue
        if wo:
            assert only_plain(out)


@FUZZ
@given(st.sampled_from(["<f8", "<f4", "|b1", "<i8", "|O", "<U3", "V16", "<M8", "f8", "x", 3, None]),
       st.one_of(st.booleans(), st.integers()), st.lists(st.integers(-2, 2 ** 40), max_size=4).map(tuple),
       st.integers(0, 200), st.sampled_from([1, 2, 3, 4]))
def test_fuzz_npy_headers(descr, fortran, shape, nbytes, version):
    hdr = repr({"descr": descr, "fortran_order": fortran, "shape": shape}).encode()
    lenfmt = "<H" if version == 1 else "<I"
    entry = b"\x93NUMPY" + bytes([version, 0]) + struct.pack(lenfmt, len(hdr)) + hdr + b"\1" * nbytes
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w") as z:
        z.writestr("__meta__.npy", npz_entry(meta_array({"__array__": "a0", "tensor": True})))
        z.writestr("a0.npy", entry)
    out = load_bounded(wrap(b.getvalue()))
    if not isinstance(out, CheckpointError):
        assert out.numel() * out.element_size() == nbytes

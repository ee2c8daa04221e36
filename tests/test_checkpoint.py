"""Checkpoint format: round trip, no code on load, checksums, atomic writes."""
import os

import numpy as np
import pytest

import varlens as vl
from varlens.train import checkpoint as C


def _obj():
    return {"model": {"w": vl.randn(3, 2), "b": vl.zeros(2, dtype=vl.float64)},
            "optimizer": {"state": {0: {"step": vl.tensor(3.0), "exp_avg": vl.ones(3, 2)}},
                          "param_groups": [{"lr": 0.1, "betas": (0.9, 0.999), "params": [0, 1],
                                            "nesterov": False, "foreach": None}]},
            "ints": np.arange(4, dtype=np.int32), "big": 2 ** 100 + 1, "inf": float("inf"),
            "rng": C.rng_state()}


def test_roundtrip_keeps_types_keys_and_bits(tmp_path):
    obj = _obj()
    C.save(obj, tmp_path / "c.npz")
    back = C.load(tmp_path / "c.npz")
    assert isinstance(back["model"]["w"], vl.Tensor)
    np.testing.assert_array_equal(back["model"]["w"].numpy(), obj["model"]["w"].numpy())
    assert back["model"]["b"].dtype == vl.float64
    assert back["optimizer"]["state"][0]["step"].shape == ()           # 0-d stays 0-d
    assert list(back["optimizer"]["state"]) == [0]                    # int keys stay ints
    assert back["optimizer"]["param_groups"][0]["betas"] == (0.9, 0.999)
    assert back["optimizer"]["param_groups"][0]["foreach"] is None
    assert back["ints"].dtype == np.int32 and back["big"] == 2 ** 100 + 1 and back["inf"] == float("inf")
    a = vl.randn(5)
    C.set_rng_state(back["rng"])                                      # RNG state restores the stream
    b = vl.randn(5)
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def _forge(path, **arrays):
    """A file with a correct header and checksum around an arbitrary npz payload."""
    import hashlib
    import io
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    payload = buf.getvalue()
    path.write_bytes(C.MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)


def test_loads_without_pickle(tmp_path):
    p = tmp_path / "evil.npz"
    _forge(p, __meta__=np.array([{"x": 1}], dtype=object))      # a pickled object array
    with pytest.raises(C.CheckpointError, match="malformed and was refused.*dtype '\|O' is not allowed"):
        C.load(p)
    with pytest.raises(TypeError, match="cannot be saved"):
        C.save({"x": np.array([object()])}, tmp_path / "o.npz")
    with pytest.raises(TypeError, match="cannot save an object of type object"):
        C.save({"x": {1, object()}}, tmp_path / "o.npz")


def test_truncated_and_corrupted_files_are_refused(tmp_path):
    good = tmp_path / "good.npz"
    C.save(_obj(), good)
    data = good.read_bytes()
    for cut in (10, len(data) // 2, len(data) - 1):
        (tmp_path / "t.npz").write_bytes(data[:cut])
        with pytest.raises(C.CheckpointError, match="truncated or corrupted|not a varlens"):
            C.load(tmp_path / "t.npz")
    # flip one bit in every region of the file: each must be refused, never loaded silently
    for pos in range(0, len(data), max(1, len(data) // 40)):
        b = bytearray(data)
        b[pos] ^= 0x10
        (tmp_path / "x.npz").write_bytes(bytes(b))
        with pytest.raises(C.CheckpointError):
            C.load(tmp_path / "x.npz")
    assert C.load(good)["big"] == 2 ** 100 + 1                       # the good one is untouched


def test_checksum_catches_consistent_rewrite(tmp_path):
    """A well-formed archive (valid zip CRCs) with changed contents still fails the SHA-256."""
    import io
    p = tmp_path / "c.npz"
    C.save({"w": np.ones(3)}, p)
    raw = p.read_bytes()
    head, payload = raw[:C._HEADER], raw[C._HEADER:]
    with np.load(io.BytesIO(payload)) as z:
        parts = {k: z[k] for k in z.files}
    parts["a0"] = np.full(3, 2.0)
    buf = io.BytesIO()
    np.savez(buf, **parts)
    p.write_bytes(head + buf.getvalue())
    with pytest.raises(C.CheckpointError, match="checksum"):
        C.load(p)


def test_atomic_write_leaves_no_temp_and_old_file_survives_failure(tmp_path, monkeypatch):
    p = tmp_path / "ck.npz"
    C.save({"v": np.arange(3)}, p)

    def boom(src, dst):
        raise OSError("disk full (simulated)")
    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="simulated"):
        C.save({"v": np.arange(5)}, p)
    monkeypatch.undo()
    assert C.load(p)["v"].tolist() == [0, 1, 2]                       # old contents intact
    assert sorted(os.listdir(tmp_path)) == ["ck.npz"]                 # no temp file left behind


def test_missing_and_foreign_files(tmp_path):
    with pytest.raises(C.CheckpointError, match="does not exist"):
        C.load(tmp_path / "nope.npz")
    np.savez(tmp_path / "plain.npz", x=np.ones(2))
    with pytest.raises(C.CheckpointError, match="not a varlens checkpoint"):
        C.load(tmp_path / "plain.npz")

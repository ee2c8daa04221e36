"""`varlens compress` / `varlens decompress` on hostile input (issue 16): declared lengths bounded
by what the payload can hold, special files refused, one clear error per malformed case (no
traceback), outputs written atomically."""
import errno
import json
import os
import struct
import time
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from varlens.cli import main
from varlens.info.compress import MAGIC, CompressedFileError, compress, decompress, max_symbols, read_header
from varlens.info.models import AdaptiveOrder0Model, UniformModel

TEXT = b"the quick brown fox jumps over the lazy dog. " * 4
GOOD = compress(TEXT, AdaptiveOrder0Model())
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


def forge(spec, n, payload=b"\0" * 80, precision=32, version=1):
    s = json.dumps(spec).encode() if not isinstance(spec, bytes) else spec
    return MAGIC + struct.pack(">BBH", version, precision, len(s)) + s + struct.pack(">QI", n, 0) + payload


def decode_or_error(blob, budget_s=20.0):
    """decompress ``blob``: the bytes or a CompressedFileError/ValueError/FileNotFoundError, in bounded time."""
    t0 = time.perf_counter()
    try:
        out = decompress(blob)
    except (CompressedFileError, ValueError, FileNotFoundError) as e:
        out = e
    assert time.perf_counter() - t0 < budget_s
    return out


@pytest.mark.parametrize("n", [10 ** 9, 2 ** 63, 2 ** 64 - 1])
def test_declared_length_is_bounded_by_the_payload(n):
    t0 = time.perf_counter()
    with pytest.raises(CompressedFileError, match="more than a 80-byte payload can hold"):
        decompress(forge({"name": "order0"}, n))
    assert time.perf_counter() - t0 < 1.0
    assert max_symbols(80, 32) < 10 ** 9


def test_a_stream_that_ends_early_is_refused_quickly():
    # a legal length for the bound, but the uniform model needs 8 bits a byte: 80 bytes hold ~80
    t0 = time.perf_counter()
    with pytest.raises(CompressedFileError, match="stream ends after"):
        decompress(forge({"name": "uniform"}, 10 ** 6))
    assert time.perf_counter() - t0 < 5.0


def test_round_trips_still_work_at_the_bound():
    for data in (b"", b"a", bytes(3000), TEXT):
        for model in (AdaptiveOrder0Model(), UniformModel()):
            assert decompress(compress(data, model)) == data
    assert decompress(compress(TEXT)) == TEXT                        # the default PPM model


def test_every_truncation_of_a_header_is_one_clear_error():
    spec_end = 8 + struct.unpack(">H", GOOD[6:8])[0] + 12
    for cut in range(spec_end):
        out = decode_or_error(GOOD[:cut])
        assert isinstance(out, CompressedFileError), (cut, out)


@pytest.mark.parametrize("spec", [
    {"name": "ppm", "order": 10 ** 9}, {"name": "ppm", "order": "6"}, {"name": "ppm", "bogus": 1},
    {"name": "mix", "models": 5}, {"name": "mix", "models": [{"name": "uniform"}]}, {"name": "static", "freqs": [0]},
    {"name": "lstm", "checkpoint": "/dev/zero", "sha256": "00"}, {"name": "lstm", "checkpoint": 3},
    {"name": "lstm", "checkpoint": "/nonexistent/x.npz"}, {"name": "lstm", "checkpoint": "/tmp", "sha256": "0"},
    {"name": "__class__"}, {"name": 5}, [1, 2], "x", None,
    {"name": "mix", "models": [{"name": "mix", "models": []}] * 2}])
def test_invalid_model_specs(spec):
    out = decode_or_error(forge(spec, 10))
    assert isinstance(out, (CompressedFileError, ValueError, FileNotFoundError)), out


def test_deeply_nested_spec_is_refused():
    spec = {"name": "uniform"}
    for _ in range(50):
        spec = {"name": "mix", "models": [spec, {"name": "uniform"}]}
    text = b'{"name":"mix","models":[' * 2000 + b"]}" * 2000
    for s in (spec, text):
        out = decode_or_error(forge(s, 10))
        assert isinstance(out, CompressedFileError), out


@FUZZ
@given(st.lists(st.tuples(st.integers(0, len(GOOD) - 1), st.integers(0, 255)), min_size=1, max_size=6))
def test_fuzz_byte_edits(edits):
    b = bytearray(GOOD)
    for pos, val in edits:
        b[pos] = val
    out = decode_or_error(bytes(b))
    assert isinstance(out, (bytes, CompressedFileError, ValueError, FileNotFoundError))


@FUZZ
@given(st.integers(0, 2 ** 64 - 1), st.binary(max_size=40), st.sampled_from([16, 32, 64, 0, 255]),
       st.sampled_from(['{"name":"order0"}', '{"name":"uniform"}', '{"name":"ppm","order":2}', '{}', '{"name"']))
def test_fuzz_headers(n, payload, precision, spec):
    out = decode_or_error(forge(spec.encode(), n, payload, precision), budget_s=20.0)
    if isinstance(out, bytes):
        assert len(out) == n


# ------------------------------------------------------------------ the commands
def test_commands_refuse_special_files_without_traceback(tmp_path, capsys):
    good = tmp_path / "g.vlac"
    good.write_bytes(GOOD)
    os.mkfifo(tmp_path / "fifo")
    for cmd in (["decompress", "/dev/zero", str(tmp_path / "o")], ["compress", "/dev/zero", str(tmp_path / "o")],
                ["decompress", str(tmp_path), str(tmp_path / "o")], ["decompress", str(tmp_path / "fifo"), str(tmp_path / "o")],
                ["decompress", str(good), str(tmp_path / "o"), "--checkpoint", "/dev/zero"]):
        capsys.readouterr()
        code = main(cmd)
        err = capsys.readouterr().err
        assert code in (1, 2) and "Traceback" not in err and len(err.strip().splitlines()) == 1, (cmd, err)
        assert not (tmp_path / "o").exists()


def _flip_crc(blob):
    b = bytearray(blob)
    b[8 + struct.unpack(">H", blob[6:8])[0] + 8] ^= 1          # first byte of the CRC field
    return bytes(b)


def test_malformed_files_give_one_line(tmp_path, capsys):
    cases = {"short": GOOD[:6], "bigN": forge({"name": "order0"}, 2 ** 63), "badjson": forge(b"{nope", 3),
             "spec": forge({"name": "ppm", "order": -1}, 3), "crc": _flip_crc(GOOD),
             "empty": b""}
    for name, blob in cases.items():
        p = tmp_path / name
        p.write_bytes(blob)
        capsys.readouterr()
        code = main(["decompress", str(p), str(tmp_path / "out")])
        err = capsys.readouterr().err
        assert code == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1, (name, err)
        assert not (tmp_path / "out").exists()


def test_outputs_are_atomic_when_the_disk_fills(tmp_path, capsys, monkeypatch):
    src = tmp_path / "in.txt"
    src.write_bytes(TEXT)
    blob = tmp_path / "in.vlac"
    assert main(["compress", str(src), str(blob), "--model", "order0", "-q"]) == 0
    old = tmp_path / "old.txt"
    old.write_bytes(b"previous contents")
    real = os.fsync

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "fsync", full)
    for cmd, out in ((["decompress", str(blob)], old), (["compress", str(src), "--model", "order0"], tmp_path / "new")):
        capsys.readouterr()
        assert main(cmd[:2] + [str(out)] + cmd[2:] + ["-q"]) == 1
        err = capsys.readouterr().err
        assert "No space left on device" in err and "Traceback" not in err
    monkeypatch.setattr(os, "fsync", real)
    assert old.read_bytes() == b"previous contents"                  # untouched, not truncated
    assert sorted(os.listdir(tmp_path)) == ["in.txt", "in.vlac", "old.txt"]   # no partial or temp files
    assert main(["decompress", str(blob), "/dev/null", "-q"]) == 0    # devices are written, never replaced
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")
    assert zlib.crc32(decompress(blob.read_bytes())) == zlib.crc32(TEXT)
    assert read_header(blob.read_bytes())[1] == len(TEXT)

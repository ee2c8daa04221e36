"""Huffman codes, the streaming arithmetic coder, byte models and `varlens compress`
(seed 003 §2.5; inventory §11.10-11.12, items 59-66)."""
import bz2
import gzip
import math
import os
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from varlens import cli
from varlens.info import coding, models
from varlens.info import entropy as entropy_fn
from varlens.info.compress import (compare_compressors, compress, decompress, default_corpus,
                                   model_code_length)


@pytest.fixture(scope="module")
def text():
    data, _ = default_corpus()
    return data[20000:24000]


# ------------------------------------------------------------------ Huffman
def test_item59_huffman_within_one_bit_of_entropy_on_random_distributions():
    rng = np.random.default_rng(3)
    for _ in range(200):
        k = int(rng.integers(1, 60))
        p = rng.dirichlet(np.full(k, float(rng.choice([0.05, 0.3, 1.0, 5.0]))))
        code = coding.huffman_code(p)
        L = coding.expected_length(code, p)
        H = float(-(p[p > 0] * np.log2(p[p > 0])).sum())
        assert H - 1e-9 <= L < H + 1
        assert coding.is_prefix_free(list(code.values()))
        # Kraft equality for a full binary tree (k >= 2)
        if k >= 2:
            assert abs(sum(2.0 ** -len(w) for w in code.values()) - 1) < 1e-12


def test_huffman_two_flip_lengths_and_bad_input():
    code = coding.huffman_code({"TT": 0.64, "TH": 0.16, "HT": 0.16, "HH": 0.04})
    assert sorted(map(len, code.values())) == [1, 2, 3, 3]
    with pytest.raises(ValueError, match="probs"):
        coding.huffman_code([0.5, -0.1])
    with pytest.raises(ValueError, match="probs"):
        coding.huffman_code([])


def test_item63_two_flip_table_is_not_prefix_free_as_the_inventory_notes():
    rows = coding.arithmetic_code_table({"T": 0.8, "H": 0.2}, 2)
    assert not coding.is_prefix_free([r["code"] for r in rows])


# ------------------------------------------------------------------ arithmetic coder
@pytest.mark.parametrize("precision", [16, 32, 64])
def test_roundtrip_random_tables(precision):
    rng = np.random.default_rng(precision)
    for _ in range(10):
        K = int(rng.integers(1, 300))
        f = rng.integers(1, 40, size=K)
        n = int(rng.integers(0, 300))
        s = rng.choice(K, size=n, p=f / f.sum())
        blob = coding.encode_symbols(s, lambda i, h: f, precision=precision)
        assert coding.decode_symbols(blob, n, lambda i, h: f, precision=precision) == list(s)


@pytest.mark.parametrize("precision", [32, 64])
def test_extreme_skew_exercises_pending_bits(precision):
    """Probabilities near 1 and near 2**-(precision-2) force long runs of underflow (pending)
    bits and carries; the stream must still decode exactly and cost about -log2 P."""
    big = (1 << (precision - 2)) - 1
    f = np.array([1, big], dtype=np.int64)
    rng = np.random.default_rng(0)
    s = (rng.random(3000) < 0.999).astype(np.int64)
    s[::500] = 0
    blob = coding.encode_symbols(s, lambda i, h: f, precision=precision)
    assert coding.decode_symbols(blob, len(s), lambda i, h: f, precision=precision) == list(s)
    ideal = -np.log2(f[s] / f.sum()).sum()
    assert 8 * len(blob) <= ideal + 2 + 8


def test_adaptive_freqs_depend_on_history():
    def freqs(i, hist):
        f = np.ones(4, dtype=np.int64)
        for h in hist[-3:]:
            f[h] += 5
        return f
    s = [0, 0, 1, 3, 3, 3, 2, 0, 1] * 20
    blob = coding.encode_symbols(s, freqs)
    assert coding.decode_symbols(blob, len(s), freqs) == s


def test_coder_errors_name_arguments():
    enc = coding.ArithmeticEncoder(32)
    with pytest.raises(ValueError, match="cum_low"):
        enc.encode(3, 3, 10)
    with pytest.raises(ValueError, match="total"):
        enc.encode(0, 1, 1 << 31)
    with pytest.raises(ValueError, match="precision"):
        coding.ArithmeticEncoder(8)
    with pytest.raises(ValueError, match="frequency 0"):
        coding.encode_symbols([1], lambda i, h: np.array([1, 0, 1]))


def test_item61_to_64_interval_table_exact():
    rows = {r["outcome"]: r for r in coding.arithmetic_code_table({"T": 0.8, "H": 0.2}, 2)}
    assert [float(x) for x in rows["TH"]["interval"]] == [0.64, 0.8]
    assert [float(x) for x in rows["HH"]["interval"]] == [0.96, 1.0]
    assert {k: r["code"] for k, r in rows.items()} == {"TT": "1", "TH": "11", "HT": "111", "HH": "11111"}
    assert abs(sum(float(r["prob"]) * len(r["code"]) for r in rows.values()) - 1.64) < 1e-12


# ------------------------------------------------------------------ models
def test_quantize_floor_of_one_and_total():
    p = np.zeros(256)
    p[65] = 1.0
    f = models.quantize(p)
    assert f.min() == 1 and f.sum() <= models.DEFAULT_TOTAL and f[65] > 1000 * f[0]
    with pytest.raises(ValueError, match="probs"):
        models.quantize([0.5, np.nan])


def test_ppm_frequencies_are_valid_and_learn(text):
    m = models.PPMModel(order=3)
    for b in text[:500]:
        f = m.frequencies()
        assert f.shape == (256,) and f.min() >= 1 and f.sum() <= models.DEFAULT_TOTAL
        m.update(b)
    m2 = models.from_spec(m.spec())
    assert m2.spec() == m.spec()
    with pytest.raises(ValueError, match="order"):
        models.PPMModel(order=-1)
    with pytest.raises(ValueError, match="unknown model name"):
        models.from_spec({"name": "nope"})


def test_item66_code_length_equals_model_cross_entropy(text):
    """Arithmetic-coded size = the model's summed surprisal (its cross-entropy on the text
    times its length) + a handful of bits of header/termination (003 Remark 2.5.7)."""
    model = models.PPMModel(order=3)
    ideal = model_code_length(text, model)
    blob = compress(text, models.PPMModel(order=3))
    header_len = len(compress(b"", models.PPMModel(order=3))) - 1    # an empty payload is 1 byte
    payload_bits = 8 * (len(blob) - header_len)
    assert ideal - 1 <= payload_bits <= ideal + 2 + 8, (payload_bits, ideal)


# ------------------------------------------------------------------ compress / decompress
@settings(max_examples=25, deadline=None)
@given(st.binary(max_size=300))
def test_compress_roundtrips_any_bytes(data):
    assert decompress(compress(data, models.PPMModel(order=2))) == data


@pytest.mark.parametrize("model", [models.UniformModel(), models.AdaptiveOrder0Model(),
                                   models.PPMModel(order=4, exclusion=False)])
def test_roundtrip_models_and_64_bit(model, text):
    data = text[:1500] + bytes(range(256)) + b"\x00" * 300
    assert decompress(compress(data, model)) == data
    assert decompress(compress(data, model, precision=64)) == data


def test_uniform_model_costs_8_bits_per_byte():
    data = os.urandom(2000)
    blob = compress(data, models.UniformModel())
    assert abs(len(compress(b"", models.UniformModel())) + len(data) - len(blob)) <= 2


def test_text_compresses_better_than_gzip_and_bz2(text):
    blob = compress(text)
    assert decompress(blob) == text
    bpc = 8 * len(blob) / len(text)
    assert bpc < 8 * len(gzip.compress(text, 9)) / len(text)
    assert bpc < 8 * len(bz2.compress(text, 9)) / len(text)
    assert bpc < 3.2


def test_probability_model_adapter_roundtrip(text):
    """The plug-in path for a neural model: any deterministic history -> probabilities."""
    counts = np.ones((256, 256))
    for a, b in zip(text[:2000], text[1:2001]):
        counts[a, b] += 1
    table = counts / counts.sum(1, keepdims=True)

    def probs(history):
        return table[history[-1]] if history else np.full(256, 1 / 256)

    m = models.ProbabilityModel(probs, name="bigram")
    data = text[2000:3000]
    assert decompress(compress(data, m), model=models.ProbabilityModel(probs, name="bigram")) == data
    with pytest.raises(TypeError, match="prob_fn"):
        models.ProbabilityModel(3)


def test_corrupt_or_foreign_files_raise(text):
    blob = bytearray(compress(text[:500], models.PPMModel(order=2)))
    with pytest.raises(ValueError, match="blob: expected a varlens compressed file"):
        decompress(b"GZIP" + bytes(blob[4:]))
    blob[-3] ^= 0xFF
    with pytest.raises(ValueError, match="CRC"):
        decompress(bytes(blob))
    with pytest.raises(TypeError, match="data: expected bytes"):
        compress("text")


def test_compare_compressors_reports_all(text):
    r = compare_compressors(text[:1500], models.PPMModel(order=3))
    assert r["roundtrip"] and set(r) >= {"gzip", "bz2", "xz", "varlens"}
    assert abs(r["gzip"] - 8 * len(gzip.compress(text[:1500], 9, mtime=0)) / 1500) < 1e-12


def test_cli_compress_decompress_roundtrip(tmp_path, text):
    src = tmp_path / "in.txt"
    src.write_bytes(text)
    packed, out = tmp_path / "x.vlac", tmp_path / "out.txt"
    assert cli.main(["compress", str(src), str(packed), "--order", "4", "-q"]) == 0
    assert cli.main(["decompress", str(packed), str(out), "-q"]) == 0
    assert out.read_bytes() == text
    assert packed.stat().st_size < len(text) / 2
    assert zlib.crc32(out.read_bytes()) == zlib.crc32(text)
    assert cli.main(["decompress", str(src), str(out), "-q"]) == 1          # not a varlens file
    assert cli.main(["compress", str(tmp_path / "missing"), str(out), "-q"]) == 2


def test_entropy_reexport_is_function():
    assert math.isclose(entropy_fn([0.5, 0.5]), 1.0)

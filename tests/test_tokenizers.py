"""Character and byte-level BPE tokenisers: exact round trips, learned merges, save/load."""
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from varlens.text.tokenizers import BPETokenizer, CharTokenizer

TEXT = ("In the beginning the lens looked at the variance of the signal. The signal flowed "
        "through the network, and the variance stayed the same: that is the whole trick. ") * 20


@pytest.fixture(scope="module")
def bpe():
    return BPETokenizer.train(TEXT + "naïve café — ünïcödé 12345", vocab_size=320)


def test_bpe_learns_merges_and_compresses(bpe):
    assert bpe.vocab_size == 320
    ids = bpe.encode(TEXT)
    assert len(ids) < 0.5 * len(TEXT.encode())
    # the most frequent word piece became one token
    assert len(bpe.encode(" the")) == 1


@settings(max_examples=60, deadline=None)
@given(st.text())
def test_bpe_round_trip_any_text(s):
    tok = _SMALL
    assert tok.decode(tok.encode(s)) == s


_SMALL = BPETokenizer.train(TEXT, vocab_size=300)


def test_bpe_save_load(tmp_path, bpe):
    p = tmp_path / "bpe.json"
    bpe.save(p)
    again = BPETokenizer.load(p)
    assert again.merges == bpe.merges
    assert again.encode(TEXT[:200]) == bpe.encode(TEXT[:200])


def test_bpe_load_refuses_bad_files(tmp_path):
    p = tmp_path / "x.json"
    p.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        BPETokenizer.load(p)
    p.write_text(json.dumps({"type": "bpe", "merges": [[1, 999]]}))
    with pytest.raises(ValueError, match="merge 0 is malformed"):
        BPETokenizer.load(p)
    p.write_text(json.dumps({"type": "char", "chars": ["a"]}))
    with pytest.raises(ValueError, match="does not hold a 'bpe'"):
        BPETokenizer.load(p)


def test_char_tokenizer_round_trip_and_unknown(tmp_path):
    tok = CharTokenizer.train(TEXT)
    assert tok.decode(tok.encode(TEXT)) == TEXT
    tok.save(tmp_path / "c.json")
    assert CharTokenizer.load(tmp_path / "c.json").encode("the") == tok.encode("the")
    with pytest.raises(ValueError, match="'Z' was not in the training"):
        tok.encode("Z")

"""The char-LSTM as the arithmetic coder's model (varlens.info.neural; seed 003 §2.5.3 and
Remark 2.5.7: the code length is the model's cross-entropy on the text)."""
import math

import numpy as np
import pytest
import torch

from varlens.cli import main as cli_main
from varlens.info.compress import compress, decompress, read_header
from varlens.info.models import from_spec
from varlens.info.neural import (DEFAULT_ESCAPE, LSTMModel, file_sha256, kjv_split, load_checkpoint,
                                 save_checkpoint, train_lstm)
from varlens.models.char_rnn import CharRNN

TEXT = (b"In the beginning God created the heaven and the earth.\n"
        b"And the earth was without form, and void; and darkness was upon the face of the deep.\n"
        b"And the Spirit of God moved upon the face of the waters.\n") * 12


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny LSTM after a few dozen Adam steps on a short English text (byte vocabulary)."""
    path = tmp_path_factory.mktemp("ckpt") / "tiny.npz"
    r = train_lstm(TEXT, hidden_size=24, embed_dim=8, seq_len=16, batch_size=8, lr=1e-2,
                   cpu_seconds=None, max_steps=150, checkpoint=str(path), log=None)
    return path, r


@pytest.fixture(scope="module")
def other_ckpt(tmp_path_factory):
    """A second checkpoint: random weights, same shapes."""
    import varlens as vl
    vl.manual_seed(7)
    vocab = bytes(sorted(set(TEXT)))
    m = CharRNN(len(vocab), 24, 1, 8, cell="lstm")
    path = tmp_path_factory.mktemp("ckpt2") / "random.npz"
    save_checkpoint(path, m, vocab)
    return path


def test_training_learns(trained):
    path, r = trained
    V = len(set(TEXT))
    assert r["steps"] == 150 and r["sha256"] == file_sha256(path)
    # a uniform guess over the vocabulary costs log2(V) = 4.86 bits; 150 steps must do much better
    assert r["train_bpc"] < math.log2(V) - 1.0, r["train_bpc"]


def test_roundtrip_any_bytes_including_escapes(trained):
    path, _ = trained
    m = LSTMModel(str(path))
    rng = np.random.default_rng(0)
    data = (TEXT[:300] + "naïve café — ∑ 東京\n".encode("utf-8") + bytes(range(256))
            + rng.integers(0, 256, 200, dtype=np.uint8).tobytes() + b"\x00\xff" + TEXT[:50])
    assert any(b not in m.vocab for b in data)          # bytes the model cannot predict
    blob = compress(data, m)
    assert decompress(blob) == data                      # model rebuilt from the header
    assert decompress(compress(b"", m)) == b""
    assert decompress(compress(b"\xfe", m)) == b"\xfe"


def _torch_bits(path, data):
    """Independent oracle: torch's Embedding/LSTM/Linear in float64 with the checkpoint's
    weights, run over the whole byte sequence at once; returns -sum log2 P(byte) with the
    escape rule of the module docstring."""
    w, vocab, cfg = load_checkpoint(path)
    V, H = len(vocab), cfg["hidden_size"]
    emb = torch.nn.Embedding(V, cfg["embed_dim"]).double()
    lstm = torch.nn.LSTM(cfg["embed_dim"], H).double()
    head = torch.nn.Linear(H, V).double()
    with torch.no_grad():
        emb.weight.copy_(torch.from_numpy(w["embed.weight"]))
        for k in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
            getattr(lstm, k).copy_(torch.from_numpy(w["rnn." + k]))
        head.weight.copy_(torch.from_numpy(w["head.weight"]))
        head.bias.copy_(torch.from_numpy(w["head.bias"]))
    # input: a line break, then every in-vocabulary byte (escaped bytes are not fed)
    inp = [vocab.index(b"\n")] + [vocab.index(bytes([b])) for b in data if bytes([b]) in vocab]
    with torch.no_grad():
        out, _ = lstm(emb(torch.tensor(inp)[:, None]))
        logp = torch.log_softmax(head(out[:, 0]), -1).numpy() / math.log(2)
    bits, k = 0.0, 0
    for b in data:
        if bytes([b]) in vocab:
            bits -= logp[k, vocab.index(bytes([b]))] + math.log2(1 - DEFAULT_ESCAPE)
            k += 1
        else:
            bits -= math.log2(DEFAULT_ESCAPE / (256 - V))
    return bits, logp


def test_stepwise_probabilities_match_torch_forward(trained):
    path, _ = trained
    data = TEXT[:120]
    _, logp = _torch_bits(path, data)
    m = LSTMModel(str(path))
    m.reset()
    ids = np.frombuffer(m.vocab, dtype=np.uint8)
    for t, b in enumerate(data[:60]):
        p = m.probabilities()[ids]
        # quantisation (1 + floor(p * (2**24 - 256))) shifts each probability by at most ~256/2**24 relative
        np.testing.assert_allclose(p, (1 - DEFAULT_ESCAPE) * np.exp2(logp[t]), rtol=3e-5, atol=2e-7)
        m.update(b)


def test_code_length_equals_cross_entropy(trained):
    path, _ = trained
    data = TEXT[7:900] + "é".encode("utf-8") + TEXT[:100]
    bits, _ = _torch_bits(path, data)
    blob = compress(data, LSTMModel(str(path)))
    payload_bits = 8 * (len(blob) - read_header(blob)[4])
    # the arithmetic code is within a few bytes of the cross-entropy (quantisation ~256/2**24 per byte)
    assert abs(payload_bits - bits) < 32, (payload_bits, bits)
    assert bits / len(data) < math.log2(len(set(TEXT))) - 1.0    # and the model is better than uniform


def test_wrong_or_missing_checkpoint_refused(trained, other_ckpt, tmp_path):
    path, _ = trained
    blob = compress(TEXT[:200], LSTMModel(str(path)))
    spec = read_header(blob)[0]
    assert spec["name"] == "lstm" and spec["sha256"] == file_sha256(path)
    with pytest.raises(ValueError, match="sha256"):
        decompress(blob, checkpoint=str(other_ckpt))
    with pytest.raises(FileNotFoundError, match="checkpoint"):
        decompress(blob, checkpoint=str(tmp_path / "nope.npz"))
    with pytest.raises(ValueError, match="sha256"):
        from_spec({**spec, "checkpoint": str(other_ckpt)})
    bad = tmp_path / "bad.npz"
    np.savez(bad, x=np.zeros(3))
    with pytest.raises(ValueError, match="checkpoint"):
        LSTMModel(str(bad))
    with pytest.raises(ValueError, match="escape"):
        LSTMModel(str(path), escape=0.0)
    with pytest.raises(ValueError, match="checkpoint"):     # a PPM file takes no checkpoint
        decompress(compress(b"abc"), checkpoint=str(path))


def test_cli_roundtrip_and_refusal(trained, other_ckpt, tmp_path, capsys):
    path, _ = trained
    src, z, out = tmp_path / "in.txt", tmp_path / "in.vlac", tmp_path / "out.txt"
    src.write_bytes(TEXT[:400] + b"\x01\x80")
    assert cli_main(["compress", str(src), str(z), "--model", "lstm", "--checkpoint", str(path)]) == 0
    err = capsys.readouterr().err
    assert "parameters" in err and "bits/char" in err
    assert cli_main(["decompress", str(z), str(out)]) == 0
    assert out.read_bytes() == src.read_bytes()
    assert cli_main(["decompress", str(z), str(out), "--checkpoint", str(other_ckpt)]) == 1
    assert "sha256" in capsys.readouterr().err
    assert cli_main(["compress", str(src), str(z), "--model", "lstm"]) == 2
    assert "--checkpoint" in capsys.readouterr().err


def test_kjv_split_is_disjoint_and_ten_percent():
    train, test = kjv_split()
    n = len(train) + len(test)
    assert train.endswith(b"\n") and 0.099 < len(test) / n < 0.101
    from varlens.datasets.text import load_kjv
    assert train + test == load_kjv().encode("utf-8")


def test_info_and_stats_claims_are_in_varlens_check():
    from varlens.theory import REGISTRY
    from varlens.theory.info_stats import _wrap
    from varlens.info.claims import CLAIMS as info_claims
    from varlens.stats.claims import CLAIMS as stats_claims
    assert {f"info.{c[0]}" for c in info_claims} | {f"stats.{c[0]}" for c in stats_claims} <= set(REGISTRY)
    r = REGISTRY["info.003-64"].run()          # expected length 1.64 bits (two 0.8-flips)
    assert r.passed and abs(r.expected - 1.64) < 1e-12
    assert REGISTRY["info.003-82"].corrected   # the notes' Student-t value is wrong as printed
    bad = _wrap(lambda seed=0: {"ok": False, "measured": (1, 2), "expected": 3.0, "detail": "x"})()
    assert not bad.passed and bad.expected == 3.0 and bad.measured != bad.measured and "(1, 2)" in bad.note


def test_cli_train_model_then_compress(tmp_path, capsys):
    ck, src, z, out = tmp_path / "m.npz", tmp_path / "a.txt", tmp_path / "a.vlac", tmp_path / "b.txt"
    assert cli_main(["compress", "--train-model", str(ck), "--train-seconds", "0.5", "--hidden-size", "16"]) == 0
    assert "sha256" in capsys.readouterr().err
    _, vocab, cfg = load_checkpoint(str(ck))
    train = kjv_split()[0]
    assert cfg["hidden_size"] == 16 and cfg["steps"] >= 1 and cfg["data_bytes"] == len(train)
    assert vocab == bytes(sorted(set(train)))           # trained on the training split's bytes
    src.write_bytes("And Jesus wept. — Ünïcode\n".encode("utf-8"))
    assert cli_main(["compress", str(src), str(z), "--model", "lstm", "--checkpoint", str(ck), "-q"]) == 0
    assert cli_main(["decompress", str(z), str(out), "-q"]) == 0
    assert out.read_bytes() == src.read_bytes()


def test_mixture_of_lstm_and_ppm(trained, other_ckpt, tmp_path):
    from varlens.info.models import MixtureModel, PPMModel
    path, _ = trained
    lstm, ppm = LSTMModel(str(path)), PPMModel(order=3)
    mix = MixtureModel([lstm, ppm], decay=0.9)
    data = TEXT[:500] + bytes([200, 3]) + TEXT[:200]
    blob = compress(data, mix)
    assert decompress(blob) == data
    with pytest.raises(ValueError, match="sha256"):            # the nested LSTM is checked too
        decompress(blob, checkpoint=str(other_ckpt))
    # by hand: the mixture of the members' probabilities with posterior weights (decay 0.9)
    lstm.reset(), ppm.reset(), mix.reset()
    logw = np.zeros(2)
    for b in data[:80]:
        p1 = lstm.probabilities()
        p2 = ppm.probabilities()
        w = np.exp(logw - logw.max())
        w /= w.sum()
        np.testing.assert_allclose(mix.probabilities(), w[0] * p1 + w[1] * p2, rtol=3e-5, atol=1e-7)
        np.testing.assert_allclose(mix.weights(), w, rtol=1e-9)
        logw = 0.9 * logw + np.log([p1[b], p2[b]])
        mix.update(b)          # updates lstm and ppm too
    with pytest.raises(ValueError, match="decay"):
        MixtureModel([lstm, ppm], decay=0.0)
    with pytest.raises(ValueError, match="models"):
        MixtureModel([lstm])

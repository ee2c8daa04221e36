"""Every module's fresh parameters are drawn as PyTorch 2.13 draws them: the same parameter names
and shapes, and the same distribution of values (distribution family, bounds, which parameters
are re-initialised).  Each module is built with the same configuration in both frameworks,
repeatedly, until each parameter has >= 3000 values; then per parameter:
- constant parameters (ones/zeros) must be equal exactly;
- otherwise a two-sample Kolmogorov-Smirnov test must not reject at p < 1e-4 (a wrong
  distribution, bound or gain moves the KS statistic far beyond that at these sample sizes: a
  uniform bound off by a factor sqrt(2) or xavier-vs-kaiming gives p < 1e-30), and the observed
  ranges of bounded (uniform) parameters must agree to 5% of the scale.
The random numbers differ (varlens draws from NumPy's PCG64), so values are compared as
samples, never entry by entry."""
import numpy as np
import pytest
import torch
from scipy import stats

import varlens as vl

CASES = [
    ("Linear", (64, 32), {}),
    ("Linear", (5, 3), {"bias": False}),
    ("Bilinear", (8, 6, 5), {}),
    ("Conv1d", (4, 8, 3), {}),
    ("Conv2d", (4, 8, 3), {}),
    ("Conv2d", (4, 8, 3), {"groups": 2}),
    ("Conv3d", (2, 4, 3), {}),
    ("ConvTranspose1d", (4, 8, 3), {}),
    ("ConvTranspose2d", (4, 8, 3), {}),
    ("ConvTranspose2d", (4, 8, 3), {"groups": 2}),
    ("ConvTranspose3d", (2, 4, 3), {}),
    ("Embedding", (100, 16), {}),
    ("Embedding", (100, 16), {"padding_idx": 0}),
    ("EmbeddingBag", (100, 16), {}),
    ("RNN", (8, 16, 2), {}),
    ("LSTM", (8, 16), {"bidirectional": True}),
    ("GRU", (8, 16), {}),
    ("RNNCell", (8, 16), {}),
    ("LSTMCell", (8, 16), {}),
    ("GRUCell", (8, 16), {}),
    ("MultiheadAttention", (32, 4), {}),
    ("MultiheadAttention", (32, 4), {"kdim": 8, "vdim": 12}),
    ("MultiheadAttention", (32, 4), {"add_bias_kv": True}),
    ("TransformerEncoderLayer", (32, 4, 64), {}),
    ("TransformerDecoderLayer", (32, 4, 64), {}),
    ("Transformer", (), {"d_model": 32, "nhead": 4, "num_encoder_layers": 1, "num_decoder_layers": 1,
                         "dim_feedforward": 64}),
    ("LayerNorm", (16,), {}),
    ("GroupNorm", (2, 8), {}),
    ("BatchNorm1d", (8,), {}),
    ("BatchNorm2d", (8,), {}),
    ("InstanceNorm2d", (8,), {"affine": True}),
    ("RMSNorm", (16,), {}),
    ("PReLU", (), {"num_parameters": 3}),
]


def _samples(lib, name, args, kw, want=3000):
    out, shapes = {}, None
    while True:
        m = getattr(lib.nn, name)(*args, **kw)
        params = {k: np.asarray(p.detach().numpy(), dtype=np.float64).ravel() for k, p in m.named_parameters()}
        shapes = shapes or {k: tuple(p.shape) for k, p in m.named_parameters()}
        for k, v in params.items():
            out.setdefault(k, []).append(v)
        if all(sum(len(a) for a in v) >= want for v in out.values()) or not out:
            return {k: np.concatenate(v) for k, v in out.items()}, shapes


@pytest.mark.parametrize("name,args,kw", CASES, ids=[f"{c[0]}{c[2] or ''}" for c in CASES])
def test_fresh_parameters_are_distributed_as_torch(name, args, kw):
    vl.manual_seed(0)
    torch.manual_seed(0)
    v, vshapes = _samples(vl, name, args, kw)
    t, tshapes = _samples(torch, name, args, kw)
    assert [(k, tuple(s)) for k, s in vshapes.items()] == [(k, tuple(s)) for k, s in tshapes.items()], \
        f"{name}: parameter names/shapes differ"
    for k in t:
        a, b = v[k], t[k]
        if np.ptp(b) == 0:
            assert np.ptp(a) == 0 and a[0] == b[0], f"{name}.{k}: torch fills {b[0]}, varlens {a[:3]}..."
            continue
        scale = np.abs(b).max()
        p = stats.ks_2samp(a, b).pvalue
        assert p > 1e-4, (f"{name}.{k}: distribution differs from torch's (KS p={p:.2g}; varlens mean {a.mean():.4g} "
                          f"std {a.std():.4g} range [{a.min():.4g}, {a.max():.4g}]; torch mean {b.mean():.4g} "
                          f"std {b.std():.4g} range [{b.min():.4g}, {b.max():.4g}])")
        if np.ptp(b) < 4 * b.std():   # bounded (uniform: range = 3.46 std; a normal's 3000 draws span ~7 std)
            assert abs(a.max() - b.max()) < 0.05 * scale and abs(a.min() - b.min()) < 0.05 * scale, \
                f"{name}.{k}: range [{a.min():.4g}, {a.max():.4g}] vs torch's [{b.min():.4g}, {b.max():.4g}]"


def test_transformer_re_initialises_its_matrices_with_xavier_uniform():
    """nn.Transformer's >1-dim parameters come from xavier_uniform_ (bound sqrt(6/(fan_in+fan_out))),
    not from the layers' own Linear init; biases keep the Linear init."""
    m = vl.nn.Transformer(d_model=32, nhead=4, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=64)
    w = m.encoder.layers[0].linear1.weight.detach().numpy()          # (64, 32)
    bound = np.sqrt(6.0 / (32 + 64))
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert np.abs(w).max() > 1.0 / np.sqrt(32)   # the Linear init's bound would be 1/sqrt(32) = 0.177 < 0.25

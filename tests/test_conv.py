"""Convolution ops (varlens.ops.nn.conv): PyTorch parity of values and gradients over random
geometries (strides, asymmetric/'same' padding, dilation, groups, odd sizes, windows that do
not tile the input), float64 finite-difference checks, second derivatives, and errors."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import varlens as vl
from varlens.autograd import gradcheck, gradgradcheck
from varlens.ops.nn import conv as C

from conftest import assert_close, to_torch


def _conv2d_cases(n, seed):
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        g = int(rng.choice([1, 1, 2, 3]))
        cin, cout = g * int(rng.integers(1, 3)), g * int(rng.integers(1, 3))
        kh, kw = (int(v) for v in rng.integers(1, 5, size=2))
        s = tuple(int(v) for v in rng.integers(1, 4, size=2))
        d = tuple(int(v) for v in rng.integers(1, 3, size=2))
        p = tuple(int(v) for v in rng.integers(0, 3, size=2))
        H, W = (int(v) for v in rng.integers(3, 12, size=2))
        if H + 2 * p[0] < d[0] * (kh - 1) + 1 or W + 2 * p[1] < d[1] * (kw - 1) + 1:
            continue
        out.append(dict(N=int(rng.integers(1, 4)), cin=cin, cout=cout, k=(kh, kw), stride=s,
                        padding=p, dilation=d, groups=g, H=H, W=W, bias=bool(rng.integers(0, 2))))
    return out


@pytest.mark.parametrize("cfg", _conv2d_cases(24, 1), ids=lambda c: f"k{c['k']}s{c['stride']}p{c['padding']}d{c['dilation']}g{c['groups']}")
@pytest.mark.parametrize("layout", ["flat", "per_sample", "per_sample_chunked"])
def test_conv2d_matches_torch(cfg, layout, monkeypatch):
    monkeypatch.setattr(C, "SHIFTED_MAX_WASTE", 0.0)  # these layouts, not the stride-1 one
    monkeypatch.setattr(C, "PER_SAMPLE_MIN_PIXELS", 10 ** 9 if layout == "flat" else 0)
    if layout == "per_sample_chunked":
        monkeypatch.setattr(C, "COLUMN_CHUNK", 1)  # one sample per column buffer
    rng = np.random.default_rng(0)
    x = vl.tensor(rng.standard_normal((cfg["N"], cfg["cin"], cfg["H"], cfg["W"])), requires_grad=True)
    w = vl.tensor(rng.standard_normal((cfg["cout"], cfg["cin"] // cfg["groups"]) + cfg["k"]), requires_grad=True)
    b = vl.tensor(rng.standard_normal(cfg["cout"]), requires_grad=True) if cfg["bias"] else None
    kw = dict(stride=cfg["stride"], padding=cfg["padding"], dilation=cfg["dilation"], groups=cfg["groups"])
    out = C.conv2d(x, w, b, **kw)
    tx, tw = to_torch(x), to_torch(w)
    tb = to_torch(b) if b is not None else None
    tout = TF.conv2d(tx, tw, tb, **kw)
    assert_close(out, tout, what="conv2d forward")
    gy = rng.standard_normal(tuple(out.shape))
    out.backward(vl.tensor(gy))
    tout.backward(torch.from_numpy(gy))
    assert_close(x.grad, tx.grad, what="dL/dx")
    assert_close(w.grad, tw.grad, rtol=1e-7, atol=1e-8, what="dL/dw")
    if b is not None:
        assert_close(b.grad, tb.grad, what="dL/db")


@pytest.mark.parametrize("k,d", [((3, 3), (1, 1)), ((4, 2), (1, 1)), ((2, 5), (2, 1)), ((1, 1), (1, 1))])
def test_conv2d_same_padding_even_and_odd_kernels(k, d):
    """'same' with an even kernel pads one more on the bottom/right, as PyTorch."""
    rng = np.random.default_rng(1)
    x = vl.tensor(rng.standard_normal((2, 3, 7, 6)), requires_grad=True)
    w = vl.tensor(rng.standard_normal((4, 3) + k), requires_grad=True)
    out = C.conv2d(x, w, padding="same", dilation=d)
    assert tuple(out.shape) == (2, 4, 7, 6)
    tx, tw = to_torch(x), to_torch(w)
    tout = TF.conv2d(tx, tw, padding="same", dilation=d)
    assert_close(out, tout, what="same")
    out.sum().backward()
    tout.sum().backward()
    assert_close(x.grad, tx.grad, what="same dx")
    assert_close(w.grad, tw.grad, what="same dw")
    valid = C.conv2d(x, w, padding="valid", dilation=d)
    assert_close(valid, TF.conv2d(tx, tw, padding="valid", dilation=d), what="valid")


@pytest.mark.parametrize("per_sample", [False, True], ids=["flat", "per_sample"])
def test_conv2d_big_columns_are_rebuilt(monkeypatch, per_sample):
    """The backward that rebuilds the im2col matrix from the input gives the same gradients."""
    monkeypatch.setattr(C, "KEEP_COLUMNS_MAX", 0)
    monkeypatch.setattr(C, "COLUMN_CHUNK", 40)
    monkeypatch.setattr(C, "PER_SAMPLE_MIN_PIXELS", 0 if per_sample else 10 ** 9)
    rng = np.random.default_rng(2)
    x = vl.tensor(rng.standard_normal((2, 2, 6, 5)), requires_grad=True)
    w = vl.tensor(rng.standard_normal((3, 2, 3, 3)), requires_grad=True)
    out = C.conv2d(x, w, stride=2, padding=1)
    out.sum().backward()
    tx, tw = to_torch(x), to_torch(w)
    TF.conv2d(tx, tw, stride=2, padding=1).sum().backward()
    assert_close(w.grad, tw.grad, what="rebuilt-columns dw")
    assert_close(x.grad, tx.grad, what="rebuilt-columns dx")


def _shifted_cases(n, seed):
    """Stride-1, groups-1 geometries (the shifted-rows path): kernels 1-5, dilation 1-3,
    symmetric or asymmetric padding, outputs down to one row or one column."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        kh, kw = (int(v) for v in rng.integers(1, 6, size=2))
        d = tuple(int(v) for v in rng.integers(1, 4, size=2))
        p = tuple(int(v) for v in rng.integers(0, 4, size=4))  # top, bottom, left, right
        H, W = (int(v) for v in rng.integers(1, 13, size=2))
        if H + p[0] + p[1] < d[0] * (kh - 1) + 1 or W + p[2] + p[3] < d[1] * (kw - 1) + 1:
            continue
        out.append(dict(N=int(rng.integers(1, 5)), cin=int(rng.integers(1, 4)), cout=int(rng.integers(1, 4)),
                        k=(kh, kw), d=d, p=p, H=H, W=W, bias=bool(rng.integers(0, 2)),
                        need=str(rng.choice(["all", "x", "w"]))))
    return out


@pytest.mark.parametrize("cfg", _shifted_cases(30, 11),
                         ids=lambda c: f"k{c['k']}d{c['d']}p{c['p']}H{c['H']}W{c['W']}{c['need']}")
@pytest.mark.parametrize("chunk", ["whole_batch", "one_image"])
def test_conv2d_stride1_shifted_rows_matches_torch(cfg, chunk, monkeypatch):
    """The stride-1 layout (flat shifted runs, wrapped columns dropped in forward and given a
    zero cotangent in backward, bias folded into the products) against PyTorch, with any subset
    of the inputs needing a gradient, asymmetric padding through F.pad, and chunking."""
    monkeypatch.setattr(C, "SHIFTED_MAX_WASTE", 1e9)
    if chunk == "one_image":
        monkeypatch.setattr(C, "COLUMN_CHUNK", 1)
    rng = np.random.default_rng(5)
    nx, nw = cfg["need"] in ("all", "x"), cfg["need"] in ("all", "w")
    x = vl.tensor(rng.standard_normal((cfg["N"], cfg["cin"], cfg["H"], cfg["W"])), requires_grad=nx)
    w = vl.tensor(rng.standard_normal((cfg["cout"], cfg["cin"]) + cfg["k"]), requires_grad=nw)
    b = vl.tensor(rng.standard_normal(cfg["cout"]), requires_grad=True) if cfg["bias"] else None
    pt, pb, pl, pr = cfg["p"]
    out = C.Conv2dFn.apply(x, w, b, stride=(1, 1), pads=(pt, pb, pl, pr), dilation=cfg["d"], groups=1)
    assert out._node is not None and out._node.shifted
    tx, tw = to_torch(x), to_torch(w)
    tb = to_torch(b) if b is not None else None
    tout = TF.conv2d(TF.pad(tx, (pl, pr, pt, pb)), tw, tb, dilation=cfg["d"])
    assert_close(out, tout, what="shifted conv2d forward")
    gy = rng.standard_normal(tuple(out.shape))
    out.backward(vl.tensor(gy))
    tout.backward(torch.from_numpy(gy))
    if nx:
        assert_close(x.grad, tx.grad, what="shifted dL/dx")
    if nw:
        assert_close(w.grad, tw.grad, rtol=1e-7, atol=1e-8, what="shifted dL/dw")
    if b is not None:
        assert_close(b.grad, tb.grad, what="shifted dL/db")


def test_conv2d_shifted_rows_float32_noncontiguous_input_and_gradcheck():
    """float32 at LeNet's shapes (bias in the product), a transposed (non-contiguous) input,
    and a float64 finite-difference check of the stride-1 path with dilation and padding."""
    rng = np.random.default_rng(12)
    base = vl.tensor(rng.standard_normal((5, 3, 13, 14)).astype(np.float32), requires_grad=True)
    x = base.transpose(2, 3)  # (5, 3, 14, 13), a strided view
    assert not x._data.flags.c_contiguous
    w = vl.tensor((rng.standard_normal((16, 3, 5, 5)) * 0.2).astype(np.float32), requires_grad=True)
    b = vl.tensor(rng.standard_normal(16).astype(np.float32), requires_grad=True)
    out = C.conv2d(x, w, b, padding=2)
    assert out.dtype == np.float32 and out._node.shifted and out._data.flags.c_contiguous
    tbase, tw, tb = to_torch(base), to_torch(w), to_torch(b)
    tout = TF.conv2d(tbase.transpose(2, 3), tw, tb, padding=2)
    assert_close(out, tout, rtol=1e-4, atol=1e-4, what="float32 shifted forward")
    gy = rng.standard_normal(tuple(out.shape)).astype(np.float32)
    out.backward(vl.tensor(gy))
    tout.backward(torch.from_numpy(gy))
    for a, t, n in [(base, tbase, "dx"), (w, tw, "dw"), (b, tb, "db")]:
        assert a.grad.dtype == np.float32
        assert_close(a.grad, t.grad, rtol=1e-4, atol=1e-3, what=f"float32 shifted {n}")
    x64 = vl.tensor(rng.standard_normal((2, 2, 6, 7)), requires_grad=True)
    w64 = vl.tensor(rng.standard_normal((3, 2, 3, 2)), requires_grad=True)
    b64 = vl.tensor(rng.standard_normal(3), requires_grad=True)
    assert gradcheck(lambda x, w, b: C.conv2d(x, w, b, padding=(2, 1), dilation=(1, 2)), (x64, w64, b64))
    assert gradcheck(lambda x, w: C.conv2d(x, w, padding="same"), (x64, w64))


@pytest.mark.parametrize("p,q", [(3, 26), (30, 4), (16, 31)], ids=["gemv-rows", "gemv-cols", "gemm"])
def test_weight_gradient_product_all_three_ways(p, q):
    """_gram(a, b) = a @ b^T whichever way it is computed (per-row GEMV for a thin side)."""
    rng = np.random.default_rng(14)
    a, b = rng.standard_normal((p, 500)), rng.standard_normal((q, 500))
    out = C._gram(a, b, np.empty((p, q)))
    np.testing.assert_allclose(out, a @ b.T, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kw", [dict(padding=1), dict(stride=2, padding=1), dict(padding=1, groups=2)],
                         ids=["shifted", "im2col", "groups"])
def test_conv_backward_twice_with_retain_graph(kw):
    """retain_graph=True keeps what backward needs: a second backward adds the same gradients."""
    rng = np.random.default_rng(13)
    x = vl.tensor(rng.standard_normal((2, 4, 6, 6)), requires_grad=True)
    w = vl.tensor(rng.standard_normal((4, 4 // kw.get("groups", 1), 3, 3)), requires_grad=True)
    y = (C.conv2d(x, w, **kw) ** 2).sum()
    y.backward(retain_graph=True)
    gx, gw = x.grad._data.copy(), w.grad._data.copy()
    y.backward()
    assert_close(x.grad, 2 * gx, what="dx after two backwards")
    assert_close(w.grad, 2 * gw, what="dw after two backwards")
    wt = vl.tensor(rng.standard_normal((4, 2, 3, 3)), requires_grad=True)
    z = C.conv_transpose2d(x, wt, stride=2).sum()
    z.backward(retain_graph=True)
    g1 = wt.grad._data.copy()
    z.backward()
    assert_close(wt.grad, 2 * g1, what="conv_transpose2d dw after two backwards")


def test_conv2d_float32_and_unbatched():
    rng = np.random.default_rng(3)
    x = vl.tensor(rng.standard_normal((3, 8, 8)).astype(np.float32))
    w = vl.tensor(rng.standard_normal((5, 3, 3, 3)).astype(np.float32))
    out = C.conv2d(x, w, padding=1)
    assert out.dtype == np.float32 and tuple(out.shape) == (5, 8, 8)
    assert_close(out, TF.conv2d(to_torch(x), to_torch(w), padding=1), rtol=1e-5, atol=1e-5)


def _conv1d_cases():
    rng = np.random.default_rng(5)
    cases = []
    for _ in range(10):
        g = int(rng.choice([1, 2]))
        k, s, d, p = int(rng.integers(1, 5)), int(rng.integers(1, 4)), int(rng.integers(1, 3)), int(rng.integers(0, 3))
        L = int(rng.integers(d * (k - 1) + 1, 14))
        cases.append((g, k, s, d, p, L))
    cases.append((1, 4, 1, 1, "same", 9))
    cases.append((2, 3, 1, 2, "valid", 10))
    return cases


@pytest.mark.parametrize("g,k,s,d,p,L", _conv1d_cases())
def test_conv1d_matches_torch(g, k, s, d, p, L):
    rng = np.random.default_rng(6)
    x = vl.tensor(rng.standard_normal((2, 2 * g, L)), requires_grad=True)
    w = vl.tensor(rng.standard_normal((3 * g, 2, k)), requires_grad=True)
    b = vl.tensor(rng.standard_normal(3 * g), requires_grad=True)
    out = C.conv1d(x, w, b, stride=s, padding=p, dilation=d, groups=g)
    tx, tw, tb = to_torch(x), to_torch(w), to_torch(b)
    tout = TF.conv1d(tx, tw, tb, stride=s, padding=p, dilation=d, groups=g)
    assert_close(out, tout, what="conv1d")
    gy = rng.standard_normal(tuple(out.shape))
    out.backward(vl.tensor(gy))
    tout.backward(torch.from_numpy(gy))
    for a, t, n in [(x, tx, "dx"), (w, tw, "dw"), (b, tb, "db")]:
        assert_close(a.grad, t.grad, what=n)


def _convT_cases(n, seed):
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        g = int(rng.choice([1, 1, 2]))
        k = tuple(int(v) for v in rng.integers(1, 5, size=2))
        s = tuple(int(v) for v in rng.integers(1, 4, size=2))
        d = tuple(int(v) for v in rng.integers(1, 3, size=2))
        p = tuple(int(v) for v in rng.integers(0, 3, size=2))
        op = tuple(int(rng.integers(0, max(si, di))) for si, di in zip(s, d))
        H, W = (int(v) for v in rng.integers(2, 7, size=2))
        Ho = [(L - 1) * si - 2 * pi + di * (ki - 1) + oi + 1 for L, si, pi, di, ki, oi in zip((H, W), s, p, d, k, op)]
        if min(Ho) < 1:
            continue
        out.append(dict(g=g, k=k, stride=s, dilation=d, padding=p, output_padding=op, H=H, W=W))
    return out


@pytest.mark.parametrize("cfg", _convT_cases(14, 7), ids=lambda c: f"k{c['k']}s{c['stride']}p{c['padding']}op{c['output_padding']}d{c['dilation']}g{c['g']}")
def test_conv_transpose2d_matches_torch(cfg):
    rng = np.random.default_rng(8)
    g = cfg["g"]
    x = vl.tensor(rng.standard_normal((2, 2 * g, cfg["H"], cfg["W"])), requires_grad=True)
    w = vl.tensor(rng.standard_normal((2 * g, 3) + cfg["k"]), requires_grad=True)
    b = vl.tensor(rng.standard_normal(3 * g), requires_grad=True)
    kw = dict(stride=cfg["stride"], padding=cfg["padding"], output_padding=cfg["output_padding"],
              groups=g, dilation=cfg["dilation"])
    out = C.conv_transpose2d(x, w, b, **kw)
    tx, tw, tb = to_torch(x), to_torch(w), to_torch(b)
    tout = TF.conv_transpose2d(tx, tw, tb, **kw)
    assert_close(out, tout, what="conv_transpose2d")
    gy = rng.standard_normal(tuple(out.shape))
    out.backward(vl.tensor(gy))
    tout.backward(torch.from_numpy(gy))
    for a, t, n in [(x, tx, "dx"), (w, tw, "dw"), (b, tb, "db")]:
        assert_close(a.grad, t.grad, what=n)


def test_gradcheck_conv_family():
    rng = np.random.default_rng(9)
    x = vl.tensor(rng.standard_normal((2, 4, 5, 6)), requires_grad=True)
    w = vl.tensor(rng.standard_normal((4, 2, 3, 2)), requires_grad=True)
    b = vl.tensor(rng.standard_normal(4), requires_grad=True)
    assert gradcheck(lambda x, w, b: C.conv2d(x, w, b, stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2),
                     (x, w, b))
    x2 = vl.tensor(rng.standard_normal((2, 2, 11, 12)), requires_grad=True)  # a map big enough for per-sample
    w2 = vl.tensor(rng.standard_normal((3, 2, 3, 3)), requires_grad=True)
    assert gradcheck(lambda x, w: C.conv2d(x, w, padding=1), (x2, w2))
    wt = vl.tensor(rng.standard_normal((4, 1, 3, 2)), requires_grad=True)
    assert gradcheck(lambda x, w, b: C.conv_transpose2d(x, w, b[:2], stride=2, padding=1, output_padding=1, groups=2),
                     (x, wt, b))
    x1 = vl.tensor(rng.standard_normal((2, 3, 7)), requires_grad=True)
    w1 = vl.tensor(rng.standard_normal((2, 3, 3)), requires_grad=True)
    assert gradcheck(lambda x, w: C.conv1d(x, w, stride=2, padding=1, dilation=2), (x1, w1))


def test_second_derivatives_match_torch():
    """create_graph goes through the composite; compare d/dx of (|dL/dw|^2) with PyTorch."""
    rng = np.random.default_rng(10)
    x = vl.tensor(rng.standard_normal((2, 2, 5, 5)), requires_grad=True)
    w = vl.tensor(rng.standard_normal((4, 1, 3, 3)), requires_grad=True)
    out = C.conv2d(x, w, stride=2, padding=1, groups=2)
    (gw,) = vl.autograd.grad([(out ** 2).sum()], [w], create_graph=True)
    (gx,) = vl.autograd.grad([(gw ** 2).sum()], [x])
    tx, tw = to_torch(x), to_torch(w)
    tout = TF.conv2d(tx, tw, stride=2, padding=1, groups=2)
    (tgw,) = torch.autograd.grad((tout ** 2).sum(), tw, create_graph=True)
    (tgx,) = torch.autograd.grad((tgw ** 2).sum(), tx)
    assert_close(gx, tgx, rtol=1e-6, atol=1e-8, what="second derivative")
    xs = vl.tensor(rng.standard_normal((1, 2, 4, 4)), requires_grad=True)
    ws = vl.tensor(rng.standard_normal((2, 3, 2, 2)), requires_grad=True)
    assert gradgradcheck(lambda x, w: C.conv_transpose2d(x, w, stride=2, padding=1), (xs, ws))


def test_vertical_edge_filter_example_5_2_3():
    """Seed 003 Example 5.2.3: [[-1,0,1]]x3 is 0 on a constant image and large on a vertical step."""
    K = vl.tensor([[[[-1.0, 0.0, 1.0]] * 3]])
    const = vl.full((1, 1, 6, 6), 0.7)
    assert np.allclose(C.conv2d(const, K)._data, 0.0)
    img = np.zeros((1, 1, 6, 6), dtype=np.float32)
    img[..., 3:] = 1.0  # dark left half, bright right half
    r = C.conv2d(vl.tensor(img), K)._data[0, 0]
    assert np.allclose(r[:, 1:3], 3.0) and np.allclose(r[:, [0, 3]], 0.0)


def test_translation_equivariance():
    rng = np.random.default_rng(11)
    x = np.zeros((1, 1, 12, 12))
    x[0, 0, 3:6, 2:5] = rng.standard_normal((3, 3))
    w = vl.tensor(rng.standard_normal((2, 1, 3, 3)))
    a = C.conv2d(vl.tensor(x), w, padding=1)._data
    b = C.conv2d(vl.tensor(np.roll(x, (2, 3), axis=(2, 3))), w, padding=1)._data
    assert np.allclose(np.roll(a, (2, 3), axis=(2, 3)), b)


@pytest.mark.parametrize("call,match", [
    (lambda x, w: C.conv2d(x, w[:, :2]), "expects 2 input channels"),
    (lambda x, w: C.conv2d(x, w, stride=0), "stride must be >= 1"),
    (lambda x, w: C.conv2d(x, w, padding="full"), "padding must be"),
    (lambda x, w: C.conv2d(x, w, padding="same", stride=2), "needs stride 1"),
    (lambda x, w: C.conv2d(x, w, groups=2), "divisible by groups"),
    (lambda x, w: C.conv2d(x[0, 0], w), "expected a 3-D"),
    (lambda x, w: C.conv2d(x, w, vl.zeros(3)), "bias must have shape"),
    (lambda x, w: C.conv2d(x[:, :, :2, :2], w), "smaller than the"),
    (lambda x, w: C.conv_transpose2d(x, w.permute(1, 0, 2, 3), stride=2, output_padding=2), "output_padding"),
])
def test_conv_errors_name_the_argument(call, match):
    x = vl.randn(1, 3, 5, 5)
    w = vl.randn(4, 3, 3, 3)
    with pytest.raises((ValueError, RuntimeError, TypeError), match=match):
        call(x, w)


@pytest.mark.parametrize("l", [1, 3, 5])
def test_output_size_claims_of_section_5_2_6(l):
    """Seed 003 §5.2.6: a valid l x l filter maps h x w to (h-l+1) x (w-l+1); same padding
    (l-1)/2 keeps h x w."""
    x = vl.randn(1, 1, 11, 8)
    w = vl.randn(1, 1, l, l)
    assert tuple(C.conv2d(x, w).shape[2:]) == (11 - l + 1, 8 - l + 1)
    assert tuple(C.conv2d(x, w, padding=(l - 1) // 2).shape[2:]) == (11, 8)
    assert tuple(C.conv2d(x, w, padding="same").shape[2:]) == (11, 8)


# ---- Winograd F(2x2, 3x3): float32 3x3 stride-1 convolutions (ops/kernels/winograd.py)
_WINO_CASES = [  # (N, C, O, H, W, padding, bias, x needs grad)
    (2, 8, 8, 7, 7, 1, True, True),
    (3, 8, 12, 9, 6, 0, True, True),
    (2, 9, 8, 9, 11, 2, False, True),
    (2, 16, 8, 10, 5, (1, 0), True, False),
    (1, 8, 16, 6, 9, "same", True, True),
]


@pytest.mark.parametrize("case", _WINO_CASES, ids=lambda c: f"N{c[0]}C{c[1]}O{c[2]}H{c[3]}W{c[4]}p{c[5]}")
def test_conv2d_winograd_float32_matches_torch_and_shifted_path(case, monkeypatch):
    """Odd and even maps (the last tile row/column cut), padding 0-2 and asymmetric, with and
    without bias and input gradient: the Winograd path agrees with PyTorch (float64 reference)
    and with the shifted-rows path to float32 rounding."""
    N, Ci, O, H, W, pad, has_b, xg = case
    rng = np.random.default_rng(21)
    xa = rng.standard_normal((N, Ci, H, W)).astype(np.float32)
    wa = (rng.standard_normal((O, Ci, 3, 3)) * 0.3).astype(np.float32)
    ba = rng.standard_normal(O).astype(np.float32) if has_b else None
    gy = None
    runs = []
    for wino in (True, False):
        if not wino:
            monkeypatch.setattr(C, "WINOGRAD_MIN_CHANNELS", 10 ** 9)
        x = vl.tensor(xa, requires_grad=xg)
        w = vl.tensor(wa, requires_grad=True)
        b = vl.tensor(ba, requires_grad=True) if has_b else None
        out = C.conv2d(x, w, b, padding=pad)
        assert out._node.wino == wino and out.dtype == np.float32
        if gy is None:
            gy = rng.standard_normal(tuple(out.shape)).astype(np.float32)
        out.backward(vl.tensor(gy))
        runs.append([out._data] + [t.grad._data if t is not None and t.requires_grad else None for t in (x, w, b)])
    tx = torch.from_numpy(xa.astype(np.float64)).requires_grad_(xg)
    tw = torch.from_numpy(wa.astype(np.float64)).requires_grad_(True)
    tb = torch.from_numpy(ba.astype(np.float64)).requires_grad_(True) if has_b else None
    tout = TF.conv2d(tx, tw, tb, padding=pad)
    tout.backward(torch.from_numpy(gy.astype(np.float64)))
    ref = [tout.detach().numpy()] + [t.grad.numpy() if t is not None and t.requires_grad else None
                                     for t in (tx, tw, tb)]
    for name, a, s, r in zip(("out", "dx", "dw", "db"), runs[0], runs[1], ref):
        assert (a is None) == (r is None), name
        if r is None:
            continue
        scale = np.abs(r).max()
        assert a.dtype == np.float32, name
        np.testing.assert_allclose(a, r, rtol=0, atol=2e-6 * scale, err_msg=f"winograd {name} vs torch")
        np.testing.assert_allclose(a, s, rtol=0, atol=4e-6 * scale, err_msg=f"winograd {name} vs shifted rows")


def test_winograd_backward_is_the_adjoint_of_its_forward():
    """<conv(x, w), g> = <x, dL/dx> = <w, dL/dw> for the three Winograd routines, on maps down
    to 1x1 outputs (one partial tile) and padding 0-2."""
    from varlens.ops.kernels import winograd as WG
    rng = np.random.default_rng(22)
    for H, W, pt, pl, pb, pr in [(3, 3, 0, 0, 0, 0), (4, 7, 1, 2, 1, 0), (6, 5, 2, 1, 2, 1), (2, 2, 1, 1, 1, 1)]:
        x = rng.standard_normal((2, 3, H, W))
        w = rng.standard_normal((4, 3, 3, 3))
        Ho, Wo = H + pt + pb - 2, W + pl + pr - 2
        g = rng.standard_normal((2, 4, Ho, Wo))
        y = WG.conv3x3(x.astype(np.float32), WG.transformed_weight(w), None, pt, pl, Ho, Wo)
        ref = TF.conv2d(TF.pad(torch.from_numpy(x), (pl, pr, pt, pb)), torch.from_numpy(w)).numpy()
        np.testing.assert_allclose(y, ref, rtol=0, atol=1e-5)
        dx = WG.conv3x3(g.astype(np.float32), WG.transformed_weight(WG.flipped_weight(w)), None, 2 - pt, 2 - pl, H, W)
        dw = WG.conv3x3_weight_grad(x.astype(np.float32), g.astype(np.float32), pt, pl)
        inner = float((ref * g).sum())
        assert abs(float((x * dx).sum()) - inner) < 1e-4 * (1 + abs(inner))
        assert abs(float((w * dw).sum()) - inner) < 1e-4 * (1 + abs(inner))


@pytest.mark.parametrize("cfg", _conv2d_cases(16, 3), ids=lambda c: f"k{c['k']}s{c['stride']}p{c['padding']}d{c['dilation']}g{c['groups']}")
@pytest.mark.parametrize("layout", ["flat", "per_sample_chunked"])
def test_conv2d_float32_compiled_im2col_matches_numpy_path_and_torch(cfg, layout, monkeypatch):
    """float32 on the host: the compiled im2col/col2im (ops/kernels/im2col.py) give the NumPy
    strided-view path's results and PyTorch's (forward, dL/dx, dL/dw), conv and transposed conv."""
    monkeypatch.setattr(C, "SHIFTED_MAX_WASTE", 0.0)
    monkeypatch.setattr(C, "PER_SAMPLE_MIN_PIXELS", 10 ** 9 if layout == "flat" else 0)
    if layout == "per_sample_chunked":
        monkeypatch.setattr(C, "COLUMN_CHUNK", 1)
    rng = np.random.default_rng(4)
    xa = rng.standard_normal((cfg["N"], cfg["cin"], cfg["H"], cfg["W"])).astype(np.float32)
    wa = rng.standard_normal((cfg["cout"], cfg["cin"] // cfg["groups"]) + cfg["k"]).astype(np.float32)
    kw = dict(stride=cfg["stride"], padding=cfg["padding"], dilation=cfg["dilation"], groups=cfg["groups"])
    res = []
    for compiled in (True, False):
        if not compiled:
            monkeypatch.setattr(C, "_numba_on", lambda: None)
        x, w = vl.tensor(xa, requires_grad=True), vl.tensor(wa, requires_grad=True)
        out = C.conv2d(x, w, None, **kw)
        gy = np.random.default_rng(5).standard_normal(tuple(out.shape)).astype(np.float32)
        out.backward(vl.tensor(gy))
        wt = vl.tensor(wa, requires_grad=True)  # conv_transpose2d's (in = cout, out = cin) weight
        outs = [out._data, x.grad._data, w.grad._data]
        if cfg["groups"] == 1:
            zt = C.conv_transpose2d(vl.tensor(gy), wt, stride=cfg["stride"], dilation=cfg["dilation"])
            zt.backward(vl.tensor(np.ones(tuple(zt.shape), np.float32)))
            outs += [zt._data, wt.grad._data]
        res.append(outs)
    tx, tw = torch.from_numpy(xa).requires_grad_(True), torch.from_numpy(wa).requires_grad_(True)
    tout = TF.conv2d(tx, tw, None, **kw)
    tout.backward(torch.from_numpy(gy))
    for name, a, b, r in zip(("out", "dx", "dw"), res[0], res[1], (tout.detach().numpy(), tx.grad.numpy(), tw.grad.numpy())):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(b).max()), err_msg=name)
        np.testing.assert_allclose(a, r, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(r).max()), err_msg=name)
    for a, b in zip(res[0][3:], res[1][3:]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(b).max()))

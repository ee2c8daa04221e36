"""Conv/pool modules (varlens.nn): parity with torch.nn layers given the same weights, PyTorch's
weight layouts and default initialisation bounds, argument errors."""
import math

import numpy as np
import pytest
import torch

import varlens as vl
from varlens import nn

from conftest import assert_close, to_torch


def _copy(vm, tm):
    with torch.no_grad():
        for (n, p) in tm.named_parameters():
            p.copy_(torch.from_numpy(np.array(dict(vm.named_parameters())[n]._data)))


@pytest.mark.parametrize("make", [
    lambda M: M.Conv2d(4, 6, 3, stride=2, padding=1, groups=2),
    lambda M: M.Conv2d(3, 5, (2, 3), padding="same", dilation=(2, 1), bias=False),
    lambda M: M.Conv2d(3, 4, 3, padding="valid"),
    lambda M: M.Conv1d(4, 6, 3, stride=2, padding=2, dilation=2, groups=2),
    lambda M: M.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2),
    lambda M: M.ConvTranspose2d(4, 3, (2, 3), stride=(1, 2), dilation=2, bias=False),
])
def test_conv_modules_match_torch(make):
    vm, tm = make(nn), make(torch.nn).double()
    vm = vm.double() if hasattr(vm, "double") else vm
    assert tuple(vm.weight.shape) == tuple(tm.weight.shape)
    _copy(vm, tm)
    shape = (2, 4, 9) if isinstance(tm, torch.nn.Conv1d) else (2, vm.in_channels, 7, 8)
    x = vl.tensor(np.random.default_rng(0).standard_normal(shape), requires_grad=True)
    tx = to_torch(x)
    y, ty = vm(x), tm(tx)
    assert_close(y, ty, what="forward")
    y.sum().backward()
    ty.sum().backward()
    assert_close(x.grad, tx.grad, what="dx")
    assert_close(vm.weight.grad, tm.weight.grad, what="dw")


def test_conv_transpose_output_size_argument():
    vm, tm = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1), torch.nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1)
    _copy(vm, tm.float())
    x = vl.randn(1, 2, 5, 5)
    y = vm(x, output_size=(10, 10))
    assert tuple(y.shape) == (1, 3, 10, 10)
    assert_close(y, tm(to_torch(x), output_size=[10, 10]), rtol=1e-5, atol=1e-6)


def test_default_init_matches_pytorch_bounds():
    """kaiming_uniform(a=sqrt(5)) gives U(+-1/sqrt(fan_in)); the bias U(+-1/sqrt(fan_in))."""
    m = nn.Conv2d(16, 32, 3)
    fan_in = 16 * 9
    b = 1 / math.sqrt(fan_in)
    w = m.weight._data
    assert w.dtype == np.float32 and np.abs(w).max() <= b and np.abs(w).max() > 0.9 * b
    assert abs(w.var() - b * b / 3) < 0.1 * b * b / 3  # variance of U(-b, b)
    assert np.abs(m.bias._data).max() <= b
    t = nn.ConvTranspose2d(8, 6, 4, groups=2)  # fan_in = weight.shape[1] * k*k = 3 * 16
    assert tuple(t.weight.shape) == (8, 3, 4, 4)
    assert np.abs(t.weight._data).max() <= 1 / math.sqrt(48)
    assert sorted(dict(m.named_parameters())) == ["bias", "weight"]


@pytest.mark.parametrize("make,shape", [
    (lambda M: M.MaxPool2d(3, stride=2, padding=1, ceil_mode=True), (2, 3, 9, 8)),
    (lambda M: M.MaxPool2d(2), (1, 2, 7, 7)),
    (lambda M: M.AvgPool2d(3, stride=2, padding=1, count_include_pad=False), (2, 2, 8, 9)),
    (lambda M: M.AdaptiveAvgPool2d((3, 2)), (2, 2, 7, 5)),
    (lambda M: M.AdaptiveAvgPool2d(1), (2, 2, 7, 5)),
    (lambda M: M.Upsample(scale_factor=2, mode="nearest"), (1, 2, 3, 4)),
    (lambda M: M.Upsample(size=(5, 7)), (1, 2, 3, 4)),
])
def test_pool_modules_match_torch(make, shape):
    x = vl.tensor(np.random.default_rng(1).standard_normal(shape), requires_grad=True)
    tx = to_torch(x)
    y, ty = make(nn)(x), make(torch.nn)(tx)
    assert_close(y, ty, what="forward")
    y.sum().backward()
    ty.sum().backward()
    assert_close(x.grad, tx.grad, what="dx")
    assert list(make(nn).parameters()) == []


@pytest.mark.parametrize("call,match", [
    (lambda: nn.Conv2d(3, 4, 3, groups=2), "in_channels \\(3\\) must be divisible by groups"),
    (lambda: nn.Conv2d(4, 3, 3, groups=2), "out_channels \\(3\\) must be divisible by groups"),
    (lambda: nn.Conv2d(3, 4, 3, padding="same", stride=2), "needs stride 1"),
    (lambda: nn.Conv2d(3, 4, 3, padding_mode="mirror"), "padding_mode"),
    (lambda: nn.Conv2d(0, 4, 3), "in_channels must be a positive int"),
    (lambda: nn.Conv2d(3, 4, (3, 3, 3)), "kernel_size"),
    (lambda: nn.ConvTranspose2d(3, 4, 3, padding="same"), "padding must be an int"),
    (lambda: nn.Upsample(scale_factor=2, mode="bogus")(vl.randn(1, 2, 4, 4)), "mode must be one of"),
    (lambda: nn.Conv2d(3, 4, 3)(vl.randn(1, 2, 8, 8)), "expects 3 input channels"),
])
def test_module_errors(call, match):
    with pytest.raises((ValueError, RuntimeError, NotImplementedError), match=match):
        call()

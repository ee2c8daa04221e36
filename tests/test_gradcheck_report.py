"""The learners' gradient check: per-tensor relative errors, float32 warning, and a diagnosis
of the classic mistakes (factor, sign, transpose, a backward of another function)."""
import math

import numpy as np
import pytest
from scipy.special import erf

import varlens as vl
import varlens.nn as nn
from varlens.autograd import check_gradients


class ExactGELUWithTanhBackward(vl.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 0.5 * (1 + vl.erf(x / math.sqrt(2)))

    @staticmethod
    def backward(ctx, g):      # the derivative of the tanh approximation: the wrong one
        x, = ctx.saved_tensors
        c = math.sqrt(2 / math.pi)
        th = vl.tanh(c * (x + 0.044715 * x ** 3))
        return g * (0.5 * (1 + th) + 0.5 * x * (1 - th * th) * c * (1 + 3 * 0.044715 * x * x))


class MeanSquareMissingHalf(vl.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return (x * x).mean()

    @staticmethod
    def backward(ctx, g):      # d/dx mean(x^2) = 2x/N; this forgets the 1/N
        x, = ctx.saved_tensors
        return g * 2 * x


class Negated(vl.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return (x * x).sum()

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return -g * 2 * x


def _x(*shape, dtype=vl.float64):
    vl.manual_seed(0)
    return vl.randn(*shape, dtype=dtype, requires_grad=True)


def test_correct_model_passes_with_per_parameter_errors():
    vl.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 3)).double()
    x, y = vl.randn(6, 4, dtype=vl.float64), vl.tensor([0, 1, 2, 0, 1, 2])
    rep = check_gradients(lambda: nn.functional.cross_entropy(m(x), y), params=dict(m.named_parameters()))
    assert rep.ok and [c.name for c in rep.checks] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert all(c.rel_error < 1e-6 for c in rep.checks)
    assert "PASSED" in str(rep) and not rep.warnings


def test_float32_warns_with_the_floor():
    rep = check_gradients(lambda a: (a.tanh() ** 2).sum(), [_x(5, dtype=vl.float32)])
    assert rep.warnings and "float32" in rep.warnings[0] and ".double()" in rep.warnings[0]
    assert rep.floor > 1e-5 and rep.ok


def test_wrong_gelu_backward_is_diagnosed():
    x = _x(20)
    x.data.mul_(2.0)
    rep = check_gradients(ExactGELUWithTanhBackward.apply, [x])
    assert not rep.ok
    text = " ".join(rep.diagnosis)
    assert "GELU (tanh approximation)" in text and "GELU (exact, with erf)" in text
    assert "different functions" in text
    # the worst entries carry indices and both values
    idx, a, n, r = rep.checks[0].worst[0]
    assert isinstance(idx, tuple) and r > 1e-4 and a != n


def test_factor_and_sign_mistakes_are_named():
    rep = check_gradients(MeanSquareMissingHalf.apply, [_x(8)])
    assert "8 times" in rep.diagnosis[0] and "1/N" in rep.diagnosis[0]
    rep = check_gradients(Negated.apply, [_x(4)])
    assert "sign flipped" in rep.diagnosis[0]


def test_transposed_weight_gradient_is_named():
    class BadMatVec(vl.autograd.Function):
        @staticmethod
        def forward(ctx, w, x):
            ctx.save_for_backward(w, x)
            return w @ x

        @staticmethod
        def backward(ctx, g):
            w, x = ctx.saved_tensors
            return (g[:, None] * x[None, :]).T, w.T @ g     # dW transposed
    w, x = _x(4, 4), vl.randn(4, dtype=vl.float64)
    rep = check_gradients(lambda w: BadMatVec.apply(w, x), [w])
    assert "transpose" in rep.diagnosis[0]


def test_sampled_entries_and_gradcheck_report_mode(capsys):
    x = _x(50)
    rep = check_gradients(lambda a: (a ** 3).sum(), [x], num_checks=7)
    assert rep.checks[0].checked == 7 and rep.ok
    out = vl.autograd.gradcheck(lambda a: a.sin().sum(), (_x(3),), report=True)
    assert out.ok and "gradient check" in capsys.readouterr().out


def test_nothing_to_check_is_an_error():
    with pytest.raises(ValueError, match="nothing to check"):
        check_gradients(lambda a: a.sum(), [vl.ones(3)])

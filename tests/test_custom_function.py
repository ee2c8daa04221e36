"""PyTorch-style custom Functions (``@staticmethod forward(ctx, ...)`` / ``backward(ctx, ...)``):
the same class body works under torch and under varlens."""
import numpy as np
import pytest
import torch

import varlens as vl
from varlens.autograd import Function, gradcheck


def make_exp(base):
    class Exp(base):
        @staticmethod
        def forward(ctx, i):
            result = i.exp()
            ctx.save_for_backward(result)
            return result

        @staticmethod
        def backward(ctx, grad_output):
            (result,) = ctx.saved_tensors
            return grad_output * result
    return Exp


def make_scale(base):
    class Scale(base):  # a non-tensor argument gets None as its gradient
        @staticmethod
        def forward(ctx, a, b, k):
            ctx.k = k
            ctx.flags = ctx.needs_input_grad
            ctx.save_for_backward(a, b)
            return a * b * k

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g * b * ctx.k, g * a * ctx.k, None
    return Scale


VExp, TExp = make_exp(Function), make_exp(torch.autograd.Function)
VScale, TScale = make_scale(Function), make_scale(torch.autograd.Function)


def test_exp_matches_torch_values_and_gradients():
    x = np.random.default_rng(0).standard_normal((3, 4))
    vx = vl.tensor(x, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    vy, ty = VExp.apply(vx), TExp.apply(tx)
    np.testing.assert_allclose(vy.detach().numpy(), ty.detach().numpy(), rtol=1e-12)
    w = np.random.default_rng(1).standard_normal((3, 4))
    (vy * vl.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(vx.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    assert vy.grad_fn is not None


def test_two_inputs_and_a_constant_match_torch():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal(5), rng.standard_normal(5)
    va, vb = vl.tensor(a, requires_grad=True), vl.tensor(b)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b)
    VScale.apply(va, vb, 2.5).sum().backward()
    TScale.apply(ta, tb, 2.5).sum().backward()
    np.testing.assert_allclose(va.grad.numpy(), ta.grad.numpy(), rtol=1e-12)
    assert vb.grad is None


def test_needs_input_grad_is_known_inside_forward():
    a = vl.tensor(np.ones(3), requires_grad=True)
    b = vl.tensor(np.ones(3))
    ctxs = []

    class Spy(Function):
        @staticmethod
        def forward(ctx, a, b):
            ctxs.append(ctx.needs_input_grad)
            return a + b

        @staticmethod
        def backward(ctx, g):
            return g, g

    Spy.apply(a, b)
    assert ctxs == [(True, False)]


def test_gradcheck_and_second_derivative():
    x = vl.tensor(np.random.default_rng(3).standard_normal(4), requires_grad=True)
    assert gradcheck(lambda t: VExp.apply(t), (x,))
    (g,) = vl.autograd.grad(VExp.apply(x).sum(), x, create_graph=True)
    (h,) = vl.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), np.exp(x.detach().numpy()), rtol=1e-12)


def test_no_grad_and_detached_inputs_record_nothing():
    x = vl.tensor(np.ones(2), requires_grad=True)
    with vl.no_grad():
        assert not VExp.apply(x).requires_grad
    assert not VExp.apply(vl.tensor(np.ones(2))).requires_grad


def test_bad_definitions_and_results_are_refused():
    with pytest.raises(TypeError, match="staticmethod backward"):
        class NoBackward(Function):  # noqa: F841
            @staticmethod
            def forward(ctx, x):
                return x

            def backward(self, g):
                return g

    class TooMany(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2, g

    x = vl.tensor(np.ones(2), requires_grad=True)
    with pytest.raises(RuntimeError, match="returned 2 gradients but forward took 1"):
        TooMany.apply(x).sum().backward()



def test_second_backward_without_retain_graph_is_refused():
    x = vl.tensor(np.ones(2), requires_grad=True)
    y = VExp.apply(x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def _multi_output_run(T):
    """A two-output Function and a sort with a non-differentiable index output, as torch users
    write them; gradients, second derivatives and no_grad behaviour."""
    class Two(T.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x, y)
            return x * y, x + 2 * y

        @staticmethod
        def backward(ctx, ga, gb):
            x, y = ctx.saved_tensors
            return ga * y + gb, ga * x + 2 * gb

    class SortF(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            s, idx = x.sort()
            ctx.mark_non_differentiable(idx)
            ctx.save_for_backward(idx)
            return s, idx

        @staticmethod
        def backward(ctx, gs, gi):
            idx, = ctx.saved_tensors
            g = T.zeros_like(gs)
            g[idx] = gs
            return g

    out = []
    x = T.tensor([3., 1., 2.], requires_grad=True, dtype=T.float64)
    y = T.tensor([0.5, -1., 2.], requires_grad=True, dtype=T.float64)
    a, b = Two.apply(x, y)
    (a.sum() * 2 + (b ** 2).sum()).backward()
    out += [x.grad.tolist(), y.grad.tolist()]
    x.grad = y.grad = None
    a, b = Two.apply(x, y)
    b.sum().backward()                                   # one output unused
    out += [x.grad.tolist(), y.grad.tolist()]
    a, b = Two.apply(x, y)
    g, = T.autograd.grad((a * a).sum() + b.sum(), x, create_graph=True)
    gg, = T.autograd.grad(g.sum(), y)
    out += [g.tolist(), gg.tolist()]
    x.grad = None
    s, i = SortF.apply(x)
    (s * T.tensor([1., 2., 3.], dtype=T.float64)).sum().backward()
    out += [s.requires_grad, i.requires_grad, i.tolist(), x.grad.tolist()]
    with T.no_grad():
        a, b = Two.apply(x, y)
    out += [a.requires_grad, b.tolist()]
    return out


def test_functions_with_several_outputs_match_torch():
    assert _multi_output_run(vl) == _multi_output_run(torch)

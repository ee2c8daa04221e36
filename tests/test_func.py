"""varlens.func (torch.func's transforms) against torch.func: the per-sample-gradient tutorial
(functional_call + vmap + grad), nested grad, jacrev/hessian/vjp/jvp, vmap's in_dims/out_dims,
and a finite-difference check of grad's result (it is itself differentiable when nested)."""
import numpy as np
import pytest
import torch
import torch.func as TFn

import varlens as vl
import varlens.func as VFn
from varlens.autograd import gradcheck

R = np.random.default_rng(0)


def _pair(a):
    return vl.tensor(a), torch.tensor(a)


def test_per_sample_gradients_match_torch_func():
    def make(lib):
        lib.manual_seed(0)
        return lib.nn.Sequential(lib.nn.Linear(4, 6), lib.nn.Tanh(), lib.nn.Linear(6, 3)).double()
    vm, tm = make(vl), make(torch)
    sd = {k: R.standard_normal(tuple(v.shape)) for k, v in tm.state_dict().items()}
    vm.load_state_dict({k: vl.tensor(v) for k, v in sd.items()})
    tm.load_state_dict({k: torch.tensor(v) for k, v in sd.items()})
    x, y = R.standard_normal((5, 4)), np.array([0, 1, 2, 1, 0])

    def per_sample(lib, fn, model):
        params = {k: v.detach() for k, v in model.named_parameters()}

        def loss(p, sample, target):
            out = fn.functional_call(model, p, (sample.unsqueeze(0),))
            return lib.nn.functional.cross_entropy(out, target.unsqueeze(0))
        return fn.vmap(fn.grad(loss), in_dims=(None, 0, 0))(params, lib.tensor(x), lib.tensor(y))
    gv, gt = per_sample(vl, VFn, vm), per_sample(torch, TFn, tm)
    assert sorted(gv) == sorted(gt)
    for k in gt:
        assert tuple(gv[k].shape) == (5,) + tuple(sd[k].shape)
        np.testing.assert_allclose(gv[k].numpy(), gt[k].numpy(), rtol=1e-10, atol=1e-12)


def test_grad_nests_and_matches_torch():
    a = R.standard_normal(4)
    xv, xt = _pair(a)

    def f(lib):
        return lambda x: (x.sin() * x ** 2).sum()
    gv, gt = VFn.grad(f(vl))(xv), TFn.grad(f(torch))(xt)
    assert not gv.requires_grad            # top level: no graph kept, as torch
    np.testing.assert_allclose(gv.numpy(), gt.numpy(), rtol=1e-12)
    ggv = VFn.grad(lambda x: VFn.grad(f(vl))(x).sum())(xv)
    ggt = TFn.grad(lambda x: TFn.grad(f(torch))(x).sum())(xt)
    np.testing.assert_allclose(ggv.numpy(), ggt.numpy(), rtol=1e-12)
    (g0, g1), (t0, t1) = (VFn.grad(lambda p, q: (p * q.exp()).sum(), argnums=(0, 1))(xv, xv * 2),
                          TFn.grad(lambda p, q: (p * q.exp()).sum(), argnums=(0, 1))(xt, xt * 2))
    np.testing.assert_allclose(g0.numpy(), t0.numpy(), rtol=1e-12)
    np.testing.assert_allclose(g1.numpy(), t1.numpy(), rtol=1e-12)
    (gv, (val, aux)) = VFn.grad_and_value(lambda x: ((x ** 3).sum(), x.mean()), has_aux=True)(xv)
    np.testing.assert_allclose(gv.numpy(), 3 * a ** 2, rtol=1e-12)
    assert abs(val.item() - (a ** 3).sum()) < 1e-12 and abs(aux.item() - a.mean()) < 1e-12
    # grad's result is differentiable when its input requires grad: finite differences agree
    assert gradcheck(lambda x: VFn.grad(lambda u: (u.sin() * u ** 2).sum())(x),
                     (vl.tensor(a, requires_grad=True),))
    with pytest.raises(RuntimeError, match="single element"):
        VFn.grad(lambda x: x * 2)(xv)


def test_jacobians_products_and_vmap_dims_match_torch():
    a = R.standard_normal(3)
    xv, xt = _pair(a)
    for name in ("jacrev", "jacfwd"):
        np.testing.assert_allclose(getattr(VFn, name)(lambda x: x.sin() * x.sum())(xv).numpy(),
                                   getattr(TFn, name)(lambda x: x.sin() * x.sum())(xt).numpy(), rtol=1e-12)
    np.testing.assert_allclose(VFn.hessian(lambda x: (x ** 3).prod())(xv).numpy(),
                               TFn.hessian(lambda x: (x ** 3).prod())(xt).numpy(), rtol=1e-10)
    (ov, fv), (ot, ft) = VFn.vjp(lambda x: x ** 2, xv), TFn.vjp(lambda x: x ** 2, xt)
    np.testing.assert_allclose(fv(vl.ones(3))[0].detach().numpy(), ft(torch.ones(3))[0].numpy(), rtol=1e-12)
    jv, jt = VFn.jvp(lambda x: x ** 3, (xv,), (vl.ones(3),)), TFn.jvp(lambda x: x ** 3, (xt,), (torch.ones(3),))
    np.testing.assert_allclose(jv[1].detach().numpy(), jt[1].numpy(), rtol=1e-12)
    m, v = R.standard_normal((4, 2, 3)), R.standard_normal((3, 4))
    for in_dims, out_dims in [((0, 1), 0), ((0, 1), 1)]:
        rv = VFn.vmap(lambda p, q: p @ q, in_dims=in_dims, out_dims=out_dims)(vl.tensor(m), vl.tensor(v))
        rt = TFn.vmap(lambda p, q: p @ q, in_dims=in_dims, out_dims=out_dims)(torch.tensor(m), torch.tensor(v))
        np.testing.assert_allclose(rv.numpy(), rt.numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="one size"):
        VFn.vmap(lambda p, q: p + q)(vl.ones(3, 2), vl.ones(4, 2))

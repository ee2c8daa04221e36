"""Batch norm and layer norm output moments (seed 001 §2.2, seed 003 §4.3.2-4.3.3, seed 004 §B.2)."""
from __future__ import annotations

import numpy as np

from varlens.theory.registry import all_of, claim, close, exact, mc_mean, rng_for, with_wrong


def _bn_train(Y, gamma, beta, eps):
    """Seed 001 §2.1: per-column batch statistics, biased variance, sqrt(var + eps)."""
    mu = Y.mean(axis=0)
    nu = Y.var(axis=0)
    return gamma * (Y - mu) / np.sqrt(nu + eps) + beta, nu


def _variance_misreadings(gamma, var, n, eps, relative):
    """Wrong values for a normalised output's variance gamma^2 var/(var + eps), with var the biased
    variance over n values: normalising by the unbiased (Bessel) variance var n/(n-1), or
    ignoring eps (gamma^2).  Each is the largest deviation it would cause (relative or absolute)."""
    good = gamma ** 2 * var / (var + eps)

    def dev(x):
        return float(np.abs(x / good - 1 if relative else x - good).max())
    return {f"Bessel: normalised by the unbiased variance (n = {n})": dev(gamma ** 2 * var / (var * n / (n - 1) + eps)),
            "eps ignored: gamma^2": dev(gamma ** 2)}


@claim("bn.train_output_moments", "001", "§2.2 L124-128", "norm",
       "Batch norm in training: each feature's batch mean is beta exactly and its (biased) batch "
       "variance gamma^2 nu/(nu + eps), i.e. gamma^2 when eps is negligible (B = 64, M = 16, eps = 1e-5). "
       "Wrong values for the variance: normalising by the unbiased (Bessel) batch variance, and gamma^2 "
       "with eps ignored; none for the mean (beta exactly, whatever the variance)")
def bn_train_moments():
    g = rng_for("bn.train_output_moments")
    Y = g.normal(3.0, 2.0, (64, 16)) * g.uniform(0.1, 5, 16)
    gamma, beta = g.uniform(0.5, 2, 16), g.normal(0, 1, 16)
    out, nu = _bn_train(Y, gamma, beta, 1e-5)
    r1 = exact(np.abs(out.mean(0) - beta).max(), 0.0, 1e-12)
    r2 = exact(np.abs(out.var(0) - gamma ** 2 * nu / (nu + 1e-5)).max(), 0.0, 1e-12)
    with_wrong(r2, _variance_misreadings(gamma, nu, Y.shape[0], 1e-5, relative=False))
    return all_of([r1, r2])


@claim("bn.varlens_layer_moments", "001", "§2.2 L124-128; 003 §4.3.2", "norm",
       "varlens.nn.BatchNorm1d in training mode returns per-feature mean beta and biased variance "
       "gamma^2 nu/(nu+eps) (the library's layer, not a re-derivation). Wrong values for the variance "
       "(relative error): the unbiased batch variance (about 1/B) and eps ignored (eps/nu)")
def bn_varlens_layer():
    import varlens as vl
    from varlens import nn
    g = rng_for("bn.varlens_layer_moments")
    Y = g.normal(3.0, 2.0, (64, 16))
    bn = nn.BatchNorm1d(16).double() if hasattr(nn.BatchNorm1d(16), "double") else nn.BatchNorm1d(16)
    gamma, beta = g.uniform(0.5, 2, 16), g.normal(0, 1, 16)
    with vl.no_grad():
        bn.weight.copy_(vl.tensor(gamma))
        bn.bias.copy_(vl.tensor(beta))
    out = bn(vl.tensor(Y, dtype=bn.weight.dtype)).detach().numpy().astype(np.float64)
    nu = Y.var(0)
    tol = 1e-10 if bn.weight.dtype == np.float64 else 2e-5
    rel = with_wrong(exact(np.abs(out.var(0) / (gamma ** 2 * nu / (nu + bn.eps)) - 1).max(), 0.0, tol),
                     _variance_misreadings(gamma, nu, Y.shape[0], bn.eps, relative=True))
    return all_of([exact(np.abs(out.mean(0) - beta).max(), 0.0, tol), rel])


@claim("bn.relu_half_active", "003", "§4.3.2 L1469", "norm",
       "After batch norm with beta = 0 on a symmetric input, about half of the ReLU units are active "
       "(fraction of positive normalised values = 1/2); the input N(1, 9) is not centred, so without the "
       "normalisation Phi(1/3) = 0.63 would be active",
       alternatives={"before normalisation: Phi(1/3)": 0.6305586598182363})
def bn_half_active():
    g = rng_for("bn.relu_half_active")
    fr = []
    for _ in range(400):
        out, _ = _bn_train(g.standard_normal((128, 32)) * 3 + 1, np.ones(32), np.zeros(32), 1e-5)
        fr.append((out > 0).mean())
    return mc_mean(fr, 0.5)


@claim("bn.eps_default_in_range", "001", "§2.1 L116", "norm",
       "001 says eps is typically in [1e-5, 1e-3]; varlens's BatchNorm1d default (PyTorch's 1e-5) is in that range "
       "and is not the range's other end, Keras's 1e-3",
       alternatives={"Keras's default 1e-3 (the range's other end)": 1e-3})
def bn_eps_default():
    from varlens import nn
    eps = float(nn.BatchNorm1d(4).eps)
    return close(eps, 1e-5, 0.0, 0, note="default eps") if 1e-5 <= eps <= 1e-3 else close(eps, 1e-5, 0.0, 0)


@claim("ln.per_example_moments", "003", "§4.3.3 L1483-1495", "norm",
       "Layer norm: each example's output has mean beta and biased variance gamma^2 s^2/(s^2 + eps) "
       "(scalar gamma, beta as 003 writes them), and does not depend on the rest of the batch. Wrong values for "
       "the variance (relative error): the unbiased variance over the d = 64 features (about 1/d), eps ignored")
def ln_per_example():
    g = rng_for("ln.per_example_moments")
    A = g.normal(1.0, 3.0, (32, 64)) * g.uniform(0.1, 4, (32, 1))
    gamma, beta, eps = 1.7, -0.4, 1e-5

    def ln(X):
        mu = X.mean(1, keepdims=True)
        s2 = X.var(1, keepdims=True)
        return gamma * (X - mu) / np.sqrt(s2 + eps) + beta
    out = ln(A)
    s2 = A.var(1)
    r1 = exact(np.abs(out.mean(1) - beta).max(), 0.0, 1e-12)
    r2 = with_wrong(exact(np.abs(out.var(1) / (gamma ** 2 * s2 / (s2 + eps)) - 1).max(), 0.0, 1e-12),
                    _variance_misreadings(gamma, s2, A.shape[1], eps, relative=True))
    r3 = exact(np.abs(ln(A[:5]) - out[:5]).max(), 0.0, 0.0)
    return all_of([r1, r2, r3])


@claim("ln.varlens_layer_moments", "003", "§4.3.3 L1483-1495", "norm",
       "varlens.nn.LayerNorm: each example's output has mean beta and biased variance gamma^2 s^2/(s^2+eps) "
       "(scalar-valued gamma, beta broadcast), the same whatever else is in the batch. Wrong values for the "
       "variance (relative error): the unbiased variance over the d = 64 features, eps ignored")
def ln_varlens_layer():
    import varlens as vl
    from varlens import nn
    g = rng_for("ln.varlens_layer_moments")
    A = g.normal(1.0, 3.0, (32, 64)) * g.uniform(0.1, 4, (32, 1))
    layer = nn.LayerNorm(64).double()
    gamma, beta = 1.7, -0.4
    with vl.no_grad():
        layer.weight.fill_(gamma)
        layer.bias.fill_(beta)
    out = layer(vl.tensor(A)).detach().numpy()
    part = layer(vl.tensor(A[:5])).detach().numpy()
    s2 = A.var(1)
    rel = with_wrong(exact(np.abs(out.var(1) / (gamma ** 2 * s2 / (s2 + layer.eps)) - 1).max(), 0.0, 1e-12),
                     _variance_misreadings(gamma, s2, A.shape[1], layer.eps, relative=True))
    return all_of([exact(np.abs(out.mean(1) - beta).max(), 0.0, 1e-12), rel,
                   exact(np.abs(part - out[:5]).max(), 0.0, 1e-14)])


@claim("bn.sigma_plus_eps_variant", "004", "§B.2 Def 17", "norm",
       "004's batch norm divides by sigma + eps (not sqrt(var + eps)): the per-feature batch mean is B and "
       "the batch std is G sigma/(sigma + eps) (eps = 0.1 to make the difference visible); wrong value: 001's "
       "G sigma/sqrt(sigma^2 + eps)")
def bn_sigma_eps():
    g = rng_for("bn.sigma_plus_eps_variant")
    Z = g.normal(1.0, 0.5, (6, 40))          # 004's layout: rows = features, columns = batch
    G, Bb, eps = g.uniform(0.5, 2, (6, 1)), g.normal(0, 1, (6, 1)), 0.1
    mu = Z.mean(1, keepdims=True)
    sig = Z.std(1, keepdims=True)
    out = G * (Z - mu) / (sig + eps) + Bb
    std = with_wrong(exact(np.abs(out.std(1, keepdims=True) - G * sig / (sig + eps)).max(), 0.0, 1e-12),
                     {"001's sqrt(var + eps)":
                      float(np.abs(G * sig / np.sqrt(sig ** 2 + eps) - G * sig / (sig + eps)).max())})
    return all_of([exact(np.abs(out.mean(1, keepdims=True) - Bb).max(), 0.0, 1e-12), std])


@claim("bn.input_grad_sums_to_zero", "001", "§2.3 L132-169", "norm",
       "Training-mode batch norm: for every feature the gradient with respect to the inputs sums to 0 over "
       "the batch (shifting a feature's inputs does not change the output); varlens BatchNorm1d autograd. Wrong "
       "value: eval mode's fixed statistics, whose input gradient is the upstream one times gamma/sqrt(1 + eps)")
def bn_grad_sum_zero():
    import varlens as vl
    from varlens import nn
    g = rng_for("bn.input_grad_sums_to_zero")
    Y = vl.tensor(g.normal(2.0, 3.0, (16, 5)), requires_grad=True)
    bn = nn.BatchNorm1d(5).double()
    up = g.standard_normal((16, 5))
    (bn(Y) * vl.tensor(up)).sum().backward()
    return with_wrong(exact(float(np.abs(Y.grad.numpy().sum(0)).max()), 0.0, 1e-12),
                      {"eval-mode statistics (running var 1)": float(np.abs(up.sum(0)).max() / np.sqrt(1 + bn.eps))})

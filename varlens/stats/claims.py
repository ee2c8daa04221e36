"""The checkable claims of seed 003 §3 (statistical inference), seed 001 §1.3-1.5 (kept
dropout units) and 003 §4.5 (bagging/boosting) as runnable checks, numbered as in the
inventory (notes-inventory-part1-background.md §14.6, §6.7, §10).

``CLAIMS`` is a list of (id, description, function); each function takes ``seed`` and
returns a dict with ``ok``, ``measured``, ``expected`` and ``detail``.  Monte Carlo checks
compare with a tolerance of several standard errors.  Where the notes print a wrong value
(the Gaussian MGF's extra 1/2, Olkin's k = 190), ``expected`` is the corrected value.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import integrate, special, stats

from varlens.stats import bayes, dropout_counts, ensembles, estimators, lln_clt, mle


def _res(ok, measured, expected, detail=""):
    return {"ok": bool(ok), "measured": measured, "expected": expected, "detail": detail}


def _gauss(rng, shape):
    return rng.standard_normal(shape)


def c68(seed=0):
    ns = (10, 100, 1000)
    pr = lln_clt.lln_exceedance("exponential", ns, eps=0.1, reps=2000, seed=seed)
    ok = pr[0] > pr[1] > pr[2] and pr[2] < 0.01 and pr[0] > 0.5
    return _res(ok, pr.tolist(), "decreasing to 0", "P(|mean_n - 1| > 0.1), Exp(1), n = 10, 100, 1000")


def c69(seed=0):
    vals = [integrate.quad(lambda x: lln_clt.normal_pdf(x, m, v), -np.inf, np.inf)[0]
            for m, v in ((0, 1), (3, 0.01), (-2, 50))]
    return _res(np.allclose(vals, 1, atol=1e-8), vals, 1.0, "normal density integrates to 1")


def c70(seed=0):
    rng = np.random.default_rng(seed)
    mu, s2 = 0.5, 0.8
    x = mu + math.sqrt(s2) * rng.standard_normal(400_000)
    ts = np.array([-1.0, 0.5, 1.0])
    mc = lln_clt.mgf_monte_carlo(x, ts)
    quad = [integrate.quad(lambda z: math.exp(t * z) * lln_clt.normal_pdf(z, mu, s2), -40, 40)[0] for t in ts]
    exact = lln_clt.gaussian_mgf(ts, mu, s2)
    notes = np.exp(s2 * ts ** 2 / 2) / 2          # 003 L851 for N(0, s2), with the spurious /2
    ok = (np.allclose(quad, exact, rtol=1e-8) and np.allclose(mc, exact, rtol=0.01)
          and not np.allclose(lln_clt.gaussian_mgf(ts, 0, s2), notes, rtol=0.1))
    return _res(ok, mc.tolist(), exact.tolist(),
                "E[e^{tX}] = exp(mu t + s2 t^2/2); the notes' exp(s2 t^2/2)/2 for N(0, s2) is wrong by 2x")


def c71(seed=0):
    rng = np.random.default_rng(seed)
    n = 20
    x = rng.exponential(1.0, (50_000, n))
    var_sum = (x - 1).sum(axis=1).var()
    ks = lln_clt.clt_ks_distances("exponential", (1, 16, 256), reps=4000, seed=seed)
    lm = [lln_clt.log_mgf_standardized_sum("exponential", m, 0.7) for m in (1, 10, 100, 10 ** 6)]
    ok = (abs(var_sum - n) < 5 * n * math.sqrt(8 / 50_000) and ks[0] > ks[1] > ks[2] and ks[2] < 0.03
          and abs(lm[-1] - 0.7 ** 2 / 2) < 1e-3 and abs(lm[-1] - 0.245) < abs(lm[0] - 0.245))
    return _res(ok, {"var_sum": var_sum, "ks": ks.tolist(), "log_mgf": lm},
                {"var_sum": n, "log_mgf_limit": 0.245}, "Exp(1): Var(sum) = n sigma^2; KS to N(0,1) shrinks")


def c72(seed=0):
    a = estimators.simulate_estimator(estimators.sample_mean, _gauss, 0.0, 10, 100_000, seed)
    b = estimators.simulate_estimator(estimators.first_sample, _gauss, 0.0, 10, 100_000, seed + 1)
    se_a, se_b = math.sqrt(0.1 / 100_000), math.sqrt(1 / 100_000)
    ok = abs(a["bias"]) < 5 * se_a and abs(b["bias"]) < 5 * se_b
    return _res(ok, (a["bias"], b["bias"]), (0.0, 0.0), "bias of X_bar and of X_1 for the mean")


def c73(seed=0):
    n, reps = 5, 200_000
    a = estimators.simulate_estimator(estimators.var_naive, _gauss, 1.0, n, reps, seed)
    b = estimators.simulate_estimator(estimators.var_unbiased, _gauss, 1.0, n, reps, seed)
    rng = np.random.default_rng(seed)
    x = rng.normal(2.0, 1.0, (10, n))
    lhs = ((x - x.mean(1, keepdims=True)) ** 2).sum(1)
    rhs = ((x - 2.0) ** 2).sum(1) - n * (x.mean(1) - 2.0) ** 2
    se = math.sqrt(2 * (n - 1) / n ** 2 / reps)
    ok = (abs(a["mean"] - 0.8) < 5 * se and abs(b["mean"] - 1.0) < 5 * se * n / (n - 1)
          and np.allclose(lhs, rhs) and np.allclose(estimators.var_unbiased(x), n / (n - 1) * estimators.var_naive(x)))
    return _res(ok, (a["mean"], b["mean"]), ((n - 1) / n, 1.0), "E[S^2_naive] = (n-1)/n, E[S^2] = 1, n = 5")


def c74(seed=0):
    x = np.random.default_rng(seed).normal(size=(100, 1))
    v = estimators.var_naive(x)
    return _res(np.all(v == 0), float(np.abs(v).max()), 0.0, "naive variance of one sample")


def c75(seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.random(50) < 0.3).astype(float)
    k, n = x.sum(), x.size
    grid = np.linspace(0.001, 0.999, 999)
    ll = [mle.bernoulli_loglik(t, x) for t in grid]
    fit, _ = mle.fit_by_cross_entropy("bernoulli", x, steps=300, lr=2.0)
    ok = abs(mle.bernoulli_mle(x) - k / n) < 1e-15 and abs(grid[int(np.argmax(ll))] - k / n) < 1e-3 and abs(fit - k / n) < 1e-6
    return _res(ok, (mle.bernoulli_mle(x), fit), k / n, "closed form, grid argmax, autograd cross-entropy fit")


def c76(seed=0):
    import varlens as vl
    rng = np.random.default_rng(seed)
    x = rng.normal(1.5, 2.0, 200)
    mu, s2 = mle.gaussian_mle(x)
    # (3.3.2), (3.3.3) against varlens autograd at an arbitrary point
    m0, v0 = 0.3, 1.7
    mt = vl.tensor(m0, dtype=vl.float64, requires_grad=True)
    vt = vl.tensor(v0, dtype=vl.float64, requires_grad=True)
    xt = vl.tensor(x, dtype=vl.float64)
    ll = (-0.5 * math.log(2 * math.pi) - 0.5 * vl.log(vt) - (xt - mt) ** 2 / (2 * vt)).sum()
    ll.backward()
    g = mle.gaussian_loglik_grad(m0, v0, x)
    fit, _ = mle.fit_by_cross_entropy("gaussian", x, steps=800, lr=0.5)
    ok = (abs(mu - x.mean()) < 1e-12 and abs(s2 - x.var()) < 1e-12
          and abs(g[0] - mt.grad.item()) < 1e-9 and abs(g[1] - vt.grad.item()) < 1e-9
          and abs(fit[0] - mu) < 1e-6 and abs(fit[1] - s2) < 1e-6 and mle.gaussian_loglik_grad(mu, s2, x)[0] < 1e-9)
    return _res(ok, {"mle": (mu, s2), "autograd_fit": fit, "grad": g}, {"mle": (x.mean(), x.var())},
                "mean and naive variance; (3.3.2)/(3.3.3) equal autograd")


def c77(seed=0):
    k1 = mle.binomial_k_mle([16, 18, 22, 25, 27])
    k2 = mle.binomial_k_mle([16, 18, 22, 25, 28])
    d = mle.binomial_profile_loglik(np.array([191.0, 190.0]), [16, 18, 22, 25, 28])
    ok = k1[0] == 99 and k2[0] == 191 and abs(k2[1] - 190.73) < 0.01 and 0 < d[0] - d[1] < 1e-6
    return _res(ok, (k1, k2), ((99, 98.79), (191, 190.73)),
                "Olkin: the notes' 190 is wrong, the integer MLE is 191 (190 lower by 2.6e-7 in log-lik)")


def c90(seed=0):
    w = bayes.warriors(2, 3)
    total = integrate.quad(lambda t: 12 * t ** 2 * (1 - t), 0, 1)[0]
    dens = np.allclose(w["posterior_pdf"](np.array([0.2, 0.5, 0.9])),
                       [12 * t ** 2 * (1 - t) for t in (0.2, 0.5, 0.9)])
    ok = (abs(w["evidence"] - 0.25) < 1e-12 and abs(w["predictive"] - 0.6) < 1e-12 and abs(w["map"] - 2 / 3) < 1e-12
          and abs(w["mle"] - 2 / 3) < 1e-12 and dens and abs(total - 1) < 1e-12 and bayes.warriors(3, 3)["mle"] == 1)
    return _res(ok, (w["evidence"], w["predictive"], w["map"]), (0.25, 0.6, 2 / 3), "Example 3.4.1")


def c91(seed=0):
    worst = 0.0
    for a, b in ((3, 2), (0.5, 0.5), (2.5, 7)):
        q = integrate.quad(lambda x: x ** (a - 1) * (1 - x) ** (b - 1), 0, 1)[0]
        worst = max(worst, abs(q - special.gamma(a) * special.gamma(b) / special.gamma(a + b)))
    return _res(worst < 1e-7, worst, 0.0, "Beta integral = Gamma(a)Gamma(b)/Gamma(a+b)")


def c92(seed=0):
    rng = np.random.default_rng(seed)
    s = 1.7
    diffs = []
    for _ in range(10):
        th = rng.normal(size=6) * 3
        diffs.append(-stats.norm(0, s).logpdf(th).sum() - (th ** 2).sum() / (2 * s * s))
    return _res(np.ptp(diffs) < 1e-9, float(np.ptp(diffs)), 0.0, "-ln p(theta) - sum theta^2/(2 s^2) is constant")


def c93(seed=0):
    b, mu = 0.7, 0.3
    f = lambda x: math.exp(-abs(x - mu) / b) / (2 * b)  # noqa: E731
    tot = integrate.quad(f, -np.inf, mu)[0] + integrate.quad(f, mu, np.inf)[0]
    var = integrate.quad(lambda x: (x - mu) ** 2 * f(x), -np.inf, mu)[0] * 2
    ok = abs(tot - 1) < 1e-9 and abs(var - 2 * b * b) < 1e-9 and abs(stats.laplace(mu, b).pdf(1.0) - f(1.0)) < 1e-12
    return _res(ok, (tot, var), (1.0, 2 * b * b), "Laplace density and variance 2b^2")


def c94(seed=0):
    r = estimators.simulate_estimator(estimators.var_naive, _gauss, 1.0, 5, 50_000, seed)
    ok = abs(r["mse"] - (r["variance"] + r["bias"] ** 2)) < 1e-12 and abs(r["bias"]) > 0.1
    return _res(ok, r["mse"], r["variance"] + r["bias"] ** 2, "MSE = Var + Bias^2 (naive variance, n = 5)")


def c95(seed=0):
    n, reps = 8, 100_000
    a = estimators.simulate_estimator(estimators.sample_mean, _gauss, 0.0, n, reps, seed)
    b = estimators.simulate_estimator(estimators.first_sample, _gauss, 0.0, n, reps, seed + 1)
    ok = abs(a["mse"] - 1 / n) < 5 * a["se_mse"] and abs(b["mse"] - 1) < 5 * b["se_mse"]
    return _res(ok, (a["mse"], b["mse"]), (1 / n, 1.0), "MSE(X_bar) = sigma^2/n, MSE(X_1) = sigma^2")


def c96(seed=0):
    n, reps = 5, 200_000
    g = estimators.simulate_estimator(estimators.var_unbiased, _gauss, 1.0, n, reps, seed)
    e = estimators.simulate_estimator(estimators.var_unbiased, lambda r, s: r.exponential(1.0, s), 1.0, n, reps, seed)
    e_pred = estimators.variance_of_unbiased_var(n, 1.0, 9.0)
    ok = (abs(g["mse"] - 0.5) < 5 * g["se_mse"] and abs(e["mse"] - e_pred) < 5 * e["se_mse"]
          and e["mse"] > 1.5)
    return _res(ok, (g["mse"], e["mse"]), (0.5, e_pred),
                "MSE(S^2) = 2/(n-1) for Gaussian data only; Exp(1) gives (mu4 - (n-3)/(n-1))/n = 1.7")


def c97(seed=0):
    n, reps = 5, 200_000
    r = estimators.simulate_estimator(estimators.var_naive, _gauss, 1.0, n, reps, seed)
    ok = (abs(r["bias"] ** 2 - 1 / n ** 2) < 0.005 and abs(r["variance"] - 2 * (n - 1) / n ** 2) < 5 * r["se_mse"]
          and abs(r["mse"] - (2 * n - 1) / n ** 2) < 5 * r["se_mse"]
          and estimators.gaussian_variance_estimator_mse(n, 1, "naive") < estimators.gaussian_variance_estimator_mse(n, 1))
    return _res(ok, (r["bias"] ** 2, r["variance"], r["mse"]), (1 / n ** 2, 2 * (n - 1) / n ** 2, (2 * n - 1) / n ** 2),
                "naive variance: bias^2, variance, MSE (< 2/(n-1))")


def c_binomial(seed=0):
    M, p = 200, 0.3
    k = dropout_counts.simulate_kept_counts(M, p, 5000, seed)
    pv = dropout_counts.chisquare_gof(k, dropout_counts.kept_count_pmf(M, p))
    ok = pv > 0.001 and abs(k.mean() - M * (1 - p)) < 5 * math.sqrt(M * p * (1 - p) / 5000)
    return _res(ok, (float(k.mean()), pv), (M * (1 - p), "p-value > 0.001"), "K ~ Binomial(M, 1-p), p = drop prob")


def c_poisson_limit(seed=0):
    lam = 4.0
    tv = [dropout_counts.tv_binomial_poisson(M, lam) for M in (10, 100, 1000, 10_000)]
    ok = all(a > b for a, b in zip(tv, tv[1:])) and tv[-1] < 1e-3 and all(t <= lam ** 2 / M for t, M in zip(tv, (10, 100, 1000, 10_000)))
    return _res(ok, tv, "decreasing, <= lam^2/M", "TV(Binomial(M, lam/M), Poisson(lam))")


def c_thinning(seed=0):
    lam, p, reps = 12.0, 0.6, 5000
    k = dropout_counts.simulate_thinning(lam, p, reps, seed)
    m = lam * (1 - p)
    pv = dropout_counts.chisquare_gof(k, dropout_counts.poisson_pmf(m, 40))
    ok = pv > 0.001 and abs(k.mean() - m) < 5 * math.sqrt(m / reps) and abs(k.var() - m) < 5 * m * math.sqrt(2 / reps) + 0.1
    return _res(ok, (float(k.mean()), float(k.var()), pv), (m, m), "thinned Poisson: mean = variance = lam(1-p)")


def c114(seed=0):
    meas, pred = ensembles.averaging_mse((1, 2, 4, 16), reps=40_000, seed=seed)
    meas_c, pred_c = ensembles.averaging_mse((1, 16), rho=0.5, reps=40_000, seed=seed)
    ok = np.allclose(meas, pred, rtol=0.05) and np.allclose(meas_c, pred_c, rtol=0.05)
    return _res(ok, meas.tolist(), pred.tolist(), "average of N predictors with independent errors: sigma^2/N")


def c_bagging(seed=0):
    Xtr, ytr, Xte, yte = ensembles.load_tabular("breast_cancer", seed=seed)
    r = ensembles.bagging(Xtr, ytr, Xte, yte, n_members=9, steps=200, seed=seed)
    ok = r["ensemble_soft_error"][-1] <= r["mean_member_error"]
    return _res(ok, r["ensemble_soft_error"][-1], f"<= mean member error {r['mean_member_error']:.4f}",
                "bagged logistic regressions, breast-cancer test error")


def c_adaboost(seed=0):
    Xtr, ytr, Xte, yte = ensembles.load_tabular("breast_cancer", seed=seed)
    r = ensembles.adaboost(Xtr, ytr, Xte, yte, rounds=10, steps=100)
    ok = (r["ensemble_test_error"][-1] < min(r["member_test_error"]) and r["ensemble_train_error"][-1] < r["eps"][0]
          and all(e < 0.5 for e in r["eps"]))
    return _res(ok, r["ensemble_test_error"][-1], f"< best member {min(r['member_test_error']):.4f}",
                "AdaBoost of single-feature logistic regressions: weak learners -> strong committee")


def c_ce_fit(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.poisson(3.5, 300)
    c = rng.integers(0, 5, 300)
    lp, _ = mle.fit_by_cross_entropy("poisson", x, steps=300, lr=0.2)
    qc, _ = mle.fit_by_cross_entropy("categorical", c, 5, steps=400, lr=2.0)
    ok = abs(lp - mle.poisson_mle(x)) < 1e-6 and np.allclose(qc, mle.categorical_mle(c, 5), atol=1e-6)
    return _res(ok, (lp, qc.tolist()), (mle.poisson_mle(x), mle.categorical_mle(c, 5).tolist()),
                "cross-entropy minimisation by autograd = closed-form MLE (Poisson, categorical)")


def _ridge_setup():
    X, y = bayes.load_regression_data()
    noise_var = float(np.mean((y - X @ np.linalg.lstsq(X, y, rcond=None)[0]) ** 2))
    return X, y, noise_var


def c_map_ridge(seed=0):
    X, y, s2 = _ridge_setup()
    tau = 3.0
    th, _ = bayes.map_regression(X, y, s2, "gaussian", tau, steps=1500)
    ridge = bayes.ridge_closed_form(X, y, s2 / tau ** 2)
    h = 1e-4
    nlp = lambda t: bayes.neg_log_posterior(t, X, y, s2, "gaussian", tau)  # noqa: E731
    grad = [(nlp(ridge + h * e) - nlp(ridge - h * e)) / (2 * h) for e in np.eye(X.shape[1])]
    ok = np.allclose(th, ridge, atol=1e-6) and np.max(np.abs(grad)) < 1e-4
    return _res(ok, float(np.max(np.abs(th - ridge))), 0.0,
                "Gaussian-prior MAP (autograd GD) = ridge closed form with lambda = sigma^2/tau^2 (diabetes)")


def c_map_lasso(seed=0):
    from sklearn.linear_model import Lasso
    X, y, s2 = _ridge_setup()
    b = 0.5
    th, _ = bayes.map_regression(X, y, s2, "laplace", b, steps=3000)
    las = Lasso(alpha=s2 / (len(y) * b), fit_intercept=False, tol=1e-12, max_iter=200_000).fit(X, y).coef_
    zeros = int(np.sum(th == 0))
    ok = np.allclose(th, las, atol=1e-4) and 0 < zeros < X.shape[1] and np.array_equal(th == 0, las == 0)
    return _res(ok, float(np.max(np.abs(th - las))), 0.0,
                f"Laplace-prior MAP (proximal GD) = lasso alpha = sigma^2/(n b); {zeros} exact zeros (diabetes)")


CLAIMS = [
    ("003-68", "weak LLN: P(|mean_n - mu| > eps) -> 0", c68),
    ("003-69", "normal density integrates to 1", c69),
    ("003-70", "Gaussian MGF exp(mu t + sigma^2 t^2/2) (the notes' extra /2 is wrong)", c70),
    ("003-71", "CLT: Var(sum) = n sigma^2, standardised sums -> N(0,1), ln M -> sigma^2 t^2/2", c71),
    ("003-72", "sample mean and X_1 are unbiased for the mean", c72),
    ("003-73", "E[S^2_naive] = (n-1)/n Var; S^2 = n/(n-1) S^2_naive is unbiased", c73),
    ("003-74", "n = 1: the naive sample variance is 0", c74),
    ("003-75", "Bernoulli MLE k/n (closed form = grid argmax = autograd cross-entropy fit)", c75),
    ("003-76", "Gaussian MLE: mean and naive variance; (3.3.2), (3.3.3) = autograd", c76),
    ("003-77", "Olkin binomial k MLE: 99, and 191 (the notes' 190 is wrong)", c77),
    ("003-90", "Warriors: P(D) = 1/4, posterior 12 t^2 (1-t), predictive 3/5, MAP 2/3", c90),
    ("003-91", "Beta integral Gamma(a)Gamma(b)/Gamma(a+b)", c91),
    ("003-92", "Gaussian prior: -ln p(theta) = sum theta^2/(2 sigma^2) + const", c92),
    ("003-93", "Laplace(mu, b) density, variance 2 b^2", c93),
    ("003-94", "MSE = Var + Bias^2", c94),
    ("003-95", "MSE(X_bar) = sigma^2/n, MSE(X_1) = sigma^2", c95),
    ("003-96", "MSE(S^2) = 2 sigma^4/(n-1) (Gaussian only)", c96),
    ("003-97", "naive variance: Bias^2 = sigma^4/n^2, Var = 2(n-1)sigma^4/n^2, MSE = (2n-1)sigma^4/n^2", c97),
    ("003-12.6", "cross-entropy minimisation by autograd = closed-form MLE (Poisson, categorical)", c_ce_fit),
    ("003-12.7-L2", "MAP with a Gaussian prior = L2 weight decay (ridge) on diabetes", c_map_ridge),
    ("003-12.7-L1", "MAP with a Laplace prior = L1 weight decay (lasso) on diabetes", c_map_lasso),
    ("001-6.7-binomial", "kept dropout units K ~ Binomial(M, 1-p)", c_binomial),
    ("001-6.7-poisson", "Binomial(M, lam/M) -> Poisson(lam) as M grows", c_poisson_limit),
    ("001-6.7-thinning", "Poisson thinning: kept count ~ Poisson(lam (1-p))", c_thinning),
    ("003-114", "bagging N uncorrelated predictors: error variance sigma^2/N", c114),
    ("003-10.1", "bagged logistic regressions beat their average member", c_bagging),
    ("003-10.2", "AdaBoost committee beats its best weak learner", c_adaboost),
]

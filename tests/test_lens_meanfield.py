"""Mean-field recursion (Poole et al. 2016, Schoenholz et al. 2017): the sigma_b = 0 limits of chi_1,
the dropout term, the depth scales and the command line that prints them."""
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from varlens.lens import meanfield as MF


@pytest.mark.parametrize("sigma_w2", [0.5, 1.0, 2.0, 3.0])
def test_chi1_relu_is_half_sigma_w2_at_zero_bias(sigma_w2):
    # E[relu'(z)^2] = P(z > 0) = 1/2 whatever q*: 0 (dies), inf (explodes) or every q (sigma_w2 = 2)
    assert MF.chi1("relu", sigma_w2, 0.0) == pytest.approx(sigma_w2 / 2, rel=1e-9)


@pytest.mark.parametrize("sigma_w2", [0.5, 2.0, 3.0])
def test_chi1_leaky_relu_finite_and_exact(sigma_w2):
    slope = 0.01
    got = MF.chi1("leaky_relu", sigma_w2, 0.0)
    assert math.isfinite(got)
    assert got == pytest.approx(sigma_w2 * (1 + slope ** 2) / 2, rel=1e-6)


def test_chi1_elu_and_tanh_at_dying_fixed_point():
    # sigma_w2 < 1, sigma_b = 0: q* = 0, and phi'(0) = 1 for ELU and tanh, so chi_1 -> sigma_w2
    for act in ("elu", "tanh"):
        assert MF.q_star(act, 0.5, 0.0) == 0.0
        assert MF.chi1(act, 0.5, 0.0) == pytest.approx(0.5, rel=1e-6)
    # exploding ELU (q* = inf): E[elu'^2] -> 1/2
    assert MF.chi1("elu", 3.0, 0.0) == pytest.approx(1.5, rel=1e-3)


def test_chi1_matches_monte_carlo_slope():
    # chi_1 against the slope of a sampled correlation map at c = 1 (wide tanh layer at q*)
    s_w2, s_b2 = 2.0, 0.05
    qs = MF.q_star("tanh", s_w2, s_b2)
    rng = np.random.default_rng(0)
    z1, z2 = rng.standard_normal((2, 2_000_000))
    eps = 1e-3
    c = 1 - eps
    u1 = math.sqrt(qs) * z1
    u2 = math.sqrt(qs) * (c * z1 + math.sqrt(1 - c * c) * z2)
    # common random numbers: c-map(1) - c-map(c) = s_w2 E[tanh(u1) (tanh(u1) - tanh(u2))] / q*
    slope = s_w2 * np.mean(np.tanh(u1) * (np.tanh(u1) - np.tanh(u2))) / qs / eps
    assert slope == pytest.approx(MF.chi1("tanh", s_w2, s_b2), rel=0.03)


def test_dropout_length_map_against_a_sampled_network():
    # q^{l+1} = sigma_w2/rho E[tanh(sqrt(q^l) z)^2] + sigma_b2 with inverted dropout before each layer
    rng = np.random.default_rng(1)
    n, depth, p, s_w2, s_b2 = 1500, 8, 0.2, 1.5, 0.05
    h = rng.standard_normal((64, n))
    q_meas = []
    for _ in range(depth):
        a = np.tanh(h)
        a = a * (rng.random(a.shape) > p) / (1 - p)
        w = rng.standard_normal((n, n)) * math.sqrt(s_w2 / n)
        h = a @ w + rng.standard_normal(n) * math.sqrt(s_b2)
        q_meas.append(float(np.mean(h * h)))
    q_pred = MF.q_sequence(depth, 1.0, "tanh", s_w2, s_b2, dropout=p)
    np.testing.assert_allclose(q_meas, q_pred, rtol=0.05)
    # and dropout raises the fixed point over the no-dropout one
    assert MF.q_star("tanh", s_w2, s_b2, dropout=p) > MF.q_star("tanh", s_w2, s_b2) * 1.05


def test_dropout_makes_the_depth_scale_finite_at_criticality():
    s_b2 = 0.05
    s_w2 = MF.critical_sigma_w2("tanh", s_b2)
    assert MF.phase("tanh", s_w2, s_b2) == "critical" or abs(MF.chi1("tanh", s_w2, s_b2) - 1) < 1e-6
    xi_c0 = MF.depth_scales("tanh", s_w2, s_b2)[1]
    xi_cd = MF.depth_scales("tanh", s_w2, s_b2, dropout=0.1)[1]
    assert xi_c0 > 1e3            # diverges at the critical line
    assert 1.0 < xi_cd < 100.0    # dropout destroys the critical point (Schoenholz et al. sec. 5)
    assert MF.trainable_depth("tanh", s_w2, s_b2, dropout=0.1) == pytest.approx(6 * xi_cd)


def test_dropout_argument_checked():
    with pytest.raises(ValueError, match="dropout"):
        MF.q_map(1.0, "tanh", 1.0, 0.0, dropout=1.0)


def test_command_line_prints_mean_field():
    out = subprocess.run([sys.executable, "-m", "varlens", "lens", "--sigma-w2", "2.0", "--sigma-b2", "0.0",
                          "--act", "relu", "--mean-field-only", "--json", "-"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    for key in ("q*", "chi_1", "phase", "xi_q", "xi_c", "trainable depth"):
        assert key in out.stdout
    doc = json.loads(out.stdout[out.stdout.index("{"):])
    assert doc["chi1"] == pytest.approx(1.0)
    assert doc["phase"] == "critical"

"""The classroom views: draw_graph (Graphviz), capture of intermediate values/gradients, and
autograd.explain's step-through, with the HTML page driven in headless Chromium."""
import json
import os
import shutil

import numpy as np
import pytest

import varlens as vl
import varlens.nn as nn
import varlens.nn.functional as F
from varlens import viz


def _mlp():
    vl.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))


def test_draw_graph_before_and_after_backward(tmp_path):
    m = _mlp()
    loss = m(vl.randn(5, 3)).pow(2).mean()
    params = dict(m.named_parameters())
    g = viz.draw_graph(loss, params=params, path=tmp_path / "g.svg")
    labels = [n.label for n in g.nodes]
    assert labels[0] == "Mean" and {"0.weight", "0.bias", "2.weight", "2.bias", "ReLU"} <= set(labels)
    assert all(n.grad == viz.graph.NOT_COMPUTED for n in g.nodes if n.kind == "leaf")
    svg = (tmp_path / "g.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "0.weight" in svg and "not computed" in svg
    loss.backward()
    g = viz.draw_graph(loss, params=params, path=tmp_path / "g.png")
    leaf = {n.label: n for n in g.nodes if n.kind == "leaf"}
    assert leaf["2.bias"].grad == viz.summarize(m[2].bias.grad.numpy())
    assert (tmp_path / "g.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_capture_records_intermediate_values_and_gradients():
    m = _mlp()
    x = vl.randn(5, 3)
    with viz.capture():
        h = m[1](m[0](x))
        loss = m[2](h).sum()
    before = {n.label: n for n in viz.build_graph(loss, dict(m.named_parameters()))}
    assert before["ReLU"].value == viz.summarize(h.detach().numpy())
    assert before["ReLU"].grad == viz.graph.NOT_COMPUTED
    h.retain_grad()
    loss.backward()
    after = {n.label: n for n in viz.build_graph(loss, dict(m.named_parameters()))}
    assert after["ReLU"].grad == viz.summarize(h.grad.numpy())


def test_large_graph_collapses_by_module():
    vl.manual_seed(0)
    m = nn.Sequential(*[nn.Sequential(nn.Linear(4, 4), nn.Tanh()) for _ in range(40)])
    loss = m(vl.randn(2, 4)).sum()
    g = viz.draw_graph(loss, params=dict(m.named_parameters()))
    assert g.collapsed and len(g.nodes) > 120
    assert g.dot.count("ops,") == 40          # one box per block
    assert "39.0" in g.dot and "0.0" in g.dot


def test_missing_dot_is_a_clear_error(monkeypatch, tmp_path):
    loss = _mlp()(vl.randn(2, 3)).sum()
    monkeypatch.setattr(shutil, "which", lambda name: None)
    g = viz.draw_graph(loss)                  # building works without Graphviz
    assert "digraph" in g.dot
    with pytest.raises(RuntimeError, match="Graphviz"):
        g.save(tmp_path / "x.svg")
    with pytest.raises(TypeError, match="output must be a varlens Tensor"):
        viz.draw_graph(np.ones(3))


def _cases():
    vl.manual_seed(1)
    m = _mlp()
    yield "mlp-ce", lambda: F.cross_entropy(m(vl.randn(6, 3)), vl.tensor([0, 1, 1, 0, 1, 0])), m
    conv = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(2 * 5 * 5, 3))
    yield "conv", lambda: conv(vl.randn(2, 1, 5, 5)).logsumexp(-1).mean(), conv
    att = nn.MultiheadAttention(8, 2, batch_first=True)
    xs = vl.randn(2, 4, 8)
    yield "attention", lambda: att(xs, xs, xs)[0].pow(2).sum(), att
    w = vl.randn(3, requires_grad=True)
    yield "broadcast+reuse", lambda: ((vl.randn(4, 3) * w + w).tanh() * w).sum(), {"w": w}


@pytest.mark.parametrize("case", list(_cases()), ids=lambda c: c[0])
def test_explain_gives_backwards_gradients(case):
    _, make, owner = case
    params = dict(owner.named_parameters()) if hasattr(owner, "named_parameters") else owner
    loss = make()
    e = vl.autograd.explain(loss, params=params)
    assert len(e) >= 2 and e.steps[0].grad_in == "[1]"
    loss.backward()                           # the walk froze nothing: backward still works
    for name, p in params.items():
        np.testing.assert_allclose(e.grad_of(p), p.grad.numpy(), rtol=1e-5, atol=1e-7, err_msg=name)
    text = e.text()
    assert "derivative:" in text and f"step {len(e)}/{len(e)}" in text


def test_explain_bad_input():
    with pytest.raises(RuntimeError, match="does not require grad"):
        vl.autograd.explain(vl.ones(3).sum())
    w = vl.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="scalar"):
        vl.autograd.explain(w * 2)


def test_explain_page_steps_in_chromium(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    m = _mlp()
    loss = F.cross_entropy(m(vl.randn(4, 3)), vl.tensor([0, 1, 1, 0]))
    e = vl.autograd.explain(loss, params=dict(m.named_parameters()))
    page = tmp_path / "explain.html"
    e.html(page)
    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for a in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              f"--user-data-dir={tmp_path / 'profile'}"):
        opts.add_argument(a)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"),
                              options=opts)
    try:
        driver.get(page.as_uri())
        for k, step in enumerate(e.steps):
            assert driver.find_element(By.ID, "counter").text == f"step {k + 1} of {len(e)}"
            assert driver.find_element(By.ID, "op").text == step.op
            cur = driver.find_elements(By.CSS_SELECTOR, ".node.current")
            assert len(cur) == 1 and cur[0].get_attribute("id") == step.node_id
            sends = driver.find_elements(By.CSS_SELECTOR, "#sends li")
            assert len(sends) == len(step.sends)
            for li, edge in zip(sends, step.sends):
                shown = json.loads(li.get_attribute("data-values"))
                if edge.values is not None:
                    np.testing.assert_allclose(shown, edge.values, rtol=1e-12)
            driver.find_element(By.ID, "next").click()
        assert driver.find_element(By.ID, "next").get_attribute("disabled") is not None
        driver.find_element(By.ID, "prev").click()
        assert driver.find_element(By.ID, "op").text == e.steps[-2].op
        # the leaf gradients shown at the last step are the ones backward computes
        loss.backward()
        last_sends = {s.input_label: s for s in e.steps[-1].sends}
        bias = last_sends["leaf '0.bias'"]
        np.testing.assert_allclose(bias.values, m[0].bias.grad.numpy(), rtol=1e-5)
    finally:
        driver.quit()

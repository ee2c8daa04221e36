"""varlens.utils.tensorboard.SummaryWriter: files read back with TensorBoard's own reader, and a
TensorBoard server on loopback serving a scalar series over its HTTP API."""
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

import varlens as vl
from varlens.utils.tensorboard import SummaryWriter

from tensorboard.backend.event_processing import event_accumulator  # the test extra installs tensorboard


def _load(d):
    acc = event_accumulator.EventAccumulator(str(d), size_guidance={"scalars": 0, "histograms": 0, "images": 0,
                                                                   "tensors": 0})
    acc.Reload()
    return acc


def test_scalars_histograms_images_text_read_back(tmp_path):
    rng = np.random.default_rng(0)
    vals = rng.standard_normal(1000)
    with SummaryWriter(tmp_path) as w:
        for step in range(5):
            w.add_scalar("loss/train", vl.tensor(1.0 / (step + 1)), step)
        w.add_histogram("w", vl.tensor(vals), 3)
        w.add_histogram("w_auto", vals, 4, bins="auto")
        w.add_image("img", np.linspace(0, 1, 3 * 4 * 5).reshape(3, 4, 5), 0)
        w.add_image("gray", np.zeros((6, 7), dtype=np.uint8), 0, dataformats="HW")
        w.add_images("batch", rng.random((5, 1, 4, 4)), 0)
        w.add_text("note", "hello **tensorboard**", 2)
    acc = _load(tmp_path)
    tags = acc.Tags()
    sc = acc.Scalars("loss/train")
    assert [e.step for e in sc] == [0, 1, 2, 3, 4]
    np.testing.assert_allclose([e.value for e in sc], [1.0 / (s + 1) for s in range(5)], rtol=1e-6)
    h = acc.Histograms("w")[0].histogram_value
    assert h.num == 1000 and h.min == pytest.approx(vals.min()) and h.max == pytest.approx(vals.max())
    assert sum(h.bucket) == 1000
    assert h.sum_squares == pytest.approx(float(vals @ vals))
    assert sum(acc.Histograms("w_auto")[0].histogram_value.bucket) == 1000
    im = acc.Images("img")[0]
    assert (im.height, im.width) == (4, 5)
    assert acc.Images("gray")[0].width == 7
    assert acc.Images("batch")[0].width == 3 * 4       # 5 images tiled 3 x 2
    assert "note/text_summary" in tags["tensors"]
    t = acc.Tensors("note/text_summary")[0]
    assert t.tensor_proto.string_val[0].decode() == "hello **tensorboard**"


def test_add_scalars_and_figure_and_hparams(tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with SummaryWriter(tmp_path) as w:
        for s in range(3):
            w.add_scalars("run", {"a": s, "b": 2 * s}, s)
        fig = plt.figure(figsize=(2, 1), dpi=50)
        plt.plot([0, 1], [0, 1])
        w.add_figure("fig", fig, 0)
        w.add_hparams({"lr": 0.1, "opt": "sgd", "nesterov": True}, {"hparam/acc": 0.9}, run_name="trial")
    assert [e.value for e in _load(tmp_path / "run_b").Scalars("run")] == [0, 2, 4]
    assert _load(tmp_path).Images("fig")[0].width == 100
    trial = _load(tmp_path / "trial")
    assert trial.Scalars("hparam/acc")[0].value == pytest.approx(0.9)
    from tensorboard.plugins.hparams import plugin_data_pb2
    content = trial.SummaryMetadata("_hparams_/session_start_info").plugin_data.content
    start = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info
    assert start.hparams["lr"].number_value == pytest.approx(0.1)
    assert start.hparams["opt"].string_value == "sgd"
    assert start.hparams["nesterov"].bool_value is True


def test_bad_arguments_named(tmp_path):
    with SummaryWriter(tmp_path) as w:
        with pytest.raises(ValueError, match="scalar_value"):
            w.add_scalar("x", np.ones(3))
        with pytest.raises(ValueError, match="dataformats"):
            w.add_image("x", np.ones((2, 2)), dataformats="CHW")
        with pytest.raises(ValueError, match="NaN"):
            w.add_histogram("x", np.array([1.0, np.nan]))
    with pytest.raises(RuntimeError, match="closed"):
        w.add_scalar("x", 1.0)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_tensorboard_server_serves_the_scalar_series(tmp_path):
    with SummaryWriter(tmp_path / "run1") as w:
        for step in range(4):
            w.add_scalar("loss", 0.5 ** step, step)
    port = _free_port()
    tb = os.path.join(os.path.dirname(sys.executable), "tensorboard")
    cmd = [tb] if os.path.exists(tb) else [sys.executable, "-m", "tensorboard.main"]
    proc = subprocess.Popen(cmd + ["--logdir", str(tmp_path), "--host", "127.0.0.1", "--port", str(port),
                                   "--load_fast", "false"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}/data/plugin/scalars/scalars?tag=loss&run=run1"
        data, deadline = None, time.time() + 60
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    data = json.loads(r.read())
                if data:
                    break
            except Exception:  # noqa: BLE001 - the server is still starting
                time.sleep(0.5)
        assert data, "tensorboard did not serve the scalar series within 60 s"
        assert [row[1] for row in data] == [0, 1, 2, 3]
        np.testing.assert_allclose([row[2] for row in data], [1, 0.5, 0.25, 0.125])
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_train_command_writes_tensorboard_and_the_lens_history(tmp_path):
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "varlens", "train", "digits-mlp", "--out", str(out), "--epochs", "1",
                        "--tensorboard", "--lens", "5", "--quiet", "--no-progress"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    acc = _load(out / "tensorboard")
    tags = acc.Tags()["scalars"]
    assert "epoch/train_loss" in tags
    lens_tags = [t for t in tags if t.startswith("lens/forward/") and t.endswith("/measured")]
    assert lens_tags and any(t.startswith("lens/update_ratio_log10/") for t in tags)
    steps = [e.step for e in acc.Scalars(lens_tags[0])]
    assert steps == sorted(steps) and len(steps) >= 3 and steps[1] - steps[0] == 5
    assert acc.Histograms(next(t for t in acc.Tags()["histograms"] if t.startswith("weights/")))
    doc = json.loads((out / "lens_history.json").read_text())
    assert doc["schema"] == "varlens.lens.history/1" and len(doc["points"]) == len(steps)
    for f in ("lens_moments_forward.png", "lens_histograms.png"):
        assert (out / f).stat().st_size > 1000

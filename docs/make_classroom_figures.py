"""Make the pictures of docs/classroom.md and README (run from the repository root):

    python docs/make_classroom_figures.py

1. graph.png: varlens.viz.draw_graph of a small MLP's loss after backward;
2. explain.png: the step-through page of autograd.explain, screenshot in headless Chromium
   (after pressing "next" twice);
3. tensorboard.png: TensorBoard showing a short training run written by TensorBoardLogger and
   the lens history (LensCallback), screenshot in headless Chromium.
Needs Graphviz and Chromium (make test installs them) and the tensorboard package.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import varlens as vl  # noqa: E402
import varlens.nn as nn  # noqa: E402
import varlens.nn.functional as F  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "figures", "classroom")
CHROME_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                "--use-angle=swiftshader", "--enable-unsafe-swiftshader"]    # software WebGL for the charts


def chromium():
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        sys.exit("Chromium not found: apt-get install chromium chromium-driver")
    return exe


def screenshot_with_clicks(url, path, clicks=0, size=(1400, 900)):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium()
    for a in CHROME_FLAGS + [f"--window-size={size[0]},{size[1]}",
                             f"--user-data-dir={tempfile.mkdtemp()}"]:
        opts.add_argument(a)
    d = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)
    try:
        d.get(url)
        time.sleep(1.0)
        for _ in range(clicks):
            d.find_element(By.ID, "next").click()
        time.sleep(15.0 if "127.0.0.1" in url else 0.5)    # TensorBoard's page loads its data after start
        d.save_screenshot(path)
    finally:
        d.quit()


def model_and_loss():
    vl.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    loss = F.cross_entropy(m(vl.randn(5, 3)), vl.tensor([0, 1, 1, 0, 1]))
    return m, loss


def main():
    os.makedirs(OUT, exist_ok=True)
    m, loss = model_and_loss()
    params = dict(m.named_parameters())
    page = os.path.join(tempfile.mkdtemp(), "explain.html")
    vl.autograd.explain(loss, params=params).html(page)
    loss.backward()
    vl.viz.draw_graph(loss, params=params, path=os.path.join(OUT, "graph.png"))
    print("wrote", os.path.join(OUT, "graph.png"))
    screenshot_with_clicks("file://" + page, os.path.join(OUT, "explain.png"), clicks=2)
    print("wrote", os.path.join(OUT, "explain.png"))

    from varlens.lens.history import LensCallback
    from varlens.train.tensorboard import TensorBoardLogger
    from varlens.train.trainer import Trainer
    from varlens.utils.data import DataLoader, TensorDataset
    logdir = tempfile.mkdtemp()
    vl.manual_seed(0)
    X = vl.randn(512, 16)
    y = (X[:, :4].sum(1) > 0).long()
    net = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2))
    tb = TensorBoardLogger(os.path.join(logdir, "run"))
    lens_cb = LensCallback(every=4)
    trainer = Trainer(net, vl.optim.SGD(net.parameters(), lr=0.1), nn.CrossEntropyLoss(), quiet=True,
                      callbacks=[tb, lens_cb])
    trainer.fit(DataLoader(TensorDataset(X, y), batch_size=32, shuffle=True), epochs=4)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tbexe = os.path.join(os.path.dirname(sys.executable), "tensorboard")
    proc = subprocess.Popen([tbexe, "--logdir", logdir, "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(60):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/data/runs", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        screenshot_with_clicks(f"http://127.0.0.1:{port}/#scalars&tagFilter=lens%2Fforward%2F%5B024%5D%2F",
                               os.path.join(OUT, "tensorboard.png"), size=(1400, 1000))
        print("wrote", os.path.join(OUT, "tensorboard.png"))
    finally:
        proc.terminate()


if __name__ == "__main__":
    main()

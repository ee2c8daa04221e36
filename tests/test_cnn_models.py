"""CNN models (varlens.models): LeNet-5, VGG-style, ResNet (shortcut options A/B/C, plain).
ResNet and LeNet forward/backward parity with equivalent torch models given the same
weights; the halve-the-map/double-the-channels rule; parameter counts; short training runs
on a synthetic oriented-bars task that must reach a stated accuracy."""
import numpy as np
import pytest
import torch
import torch.nn as tnn
import torch.nn.functional as TF

import varlens as vl
import varlens.nn.functional as F
from varlens import optim
from varlens.models import VGG, LeNet5, ResNet, resnet_cifar

from conftest import assert_close, to_torch


@pytest.fixture(autouse=True)
def _one_blas_thread():
    """Small matrices: one BLAS thread is faster, and on a shared, overloaded machine
    OpenBLAS's worker threads can make these tests several times slower."""
    from threadpoolctl import threadpool_limits
    with threadpool_limits(1):
        yield


# ----------------------------------------------------------------- torch twins (same attribute names)
class TBlock(tnn.Module):
    def __init__(self, cin, cout, stride, shortcut, skip):
        super().__init__()
        self.conv1 = tnn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = tnn.BatchNorm2d(cout)
        self.conv2 = tnn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = tnn.BatchNorm2d(cout)
        self.skip, self.kind, self.stride, self.extra = skip, shortcut, stride, cout - cin
        changes = stride != 1 or cin != cout
        self.proj = skip and (shortcut == "C" or (shortcut == "B" and changes))
        if self.proj:
            self.shortcut = tnn.Sequential(tnn.Conv2d(cin, cout, 1, stride, bias=False), tnn.BatchNorm2d(cout))

    def forward(self, x):
        out = self.bn2(self.conv2(TF.relu(self.bn1(self.conv1(x)))))
        if self.skip:
            if self.proj:
                s = self.shortcut(x)
            else:
                s = x[:, :, ::self.stride, ::self.stride]
                s = TF.pad(s, (0, 0, 0, 0, 0, self.extra))
            out = out + s
        return TF.relu(out)


class TResNet(tnn.Module):
    def __init__(self, blocks, widths, shortcut, skip, cin=1):
        super().__init__()
        self.stem = tnn.Sequential(tnn.Conv2d(cin, widths[0], 3, 1, 1, bias=False), tnn.BatchNorm2d(widths[0]), tnn.ReLU())
        layers, c = [], widths[0]
        for s, w in enumerate(widths):
            for b in range(blocks):
                layers.append(TBlock(c, w, 2 if (s > 0 and b == 0) else 1, shortcut, skip))
                c = w
        self.layers = tnn.Sequential(*layers)
        self.fc = tnn.Linear(c, 10)

    def forward(self, x):
        return self.fc(self.layers(self.stem(x)).mean((2, 3)))


def _load_into_torch(vm, tm, rng):
    """Copy every parameter and buffer (randomising BN running stats so eval mode is tested)."""
    sd = vm.state_dict()
    tsd = tm.state_dict()
    assert set(sd) == set(tsd), set(sd) ^ set(tsd)
    for k, v in sd.items():
        a = np.array(v._data if hasattr(v, "_data") else v)
        if k.endswith("running_mean"):
            a = rng.standard_normal(a.shape) * 0.1
            v._data[...] = a
        elif k.endswith("running_var"):
            a = rng.uniform(0.5, 1.5, a.shape)
            v._data[...] = a
        tsd[k] = torch.from_numpy(np.array(a)).to(tsd[k].dtype)
    tm.load_state_dict(tsd)


@pytest.mark.parametrize("shortcut,skip", [("A", True), ("B", True), ("C", True), ("B", False)])
def test_resnet_matches_torch_with_same_weights(shortcut, skip):
    rng = np.random.default_rng(0)
    vm = ResNet(blocks=2, widths=(4, 8, 16), shortcut=shortcut, skip=skip, image_size=12).double()
    tm = TResNet(2, (4, 8, 16), shortcut, skip).double()
    _load_into_torch(vm, tm, rng)
    x = vl.tensor(rng.standard_normal((3, 1, 12, 12)), requires_grad=True)
    tx = to_torch(x)
    for train in (True, False):
        vm.train(train)
        tm.train(train)
        y, ty = vm(x), tm(tx)
        assert_close(y, ty, rtol=1e-6, atol=1e-8, what=f"forward train={train}")
    vm.train()
    tm.train()
    y, ty = vm(x), tm(tx)
    y.square().sum().backward()
    ty.square().sum().backward()
    assert_close(x.grad, tx.grad, rtol=1e-5, atol=1e-8, what="dL/dx")
    tp = dict(tm.named_parameters())
    for n, p in vm.named_parameters():
        assert_close(p.grad, tp[n].grad, rtol=1e-5, atol=1e-8, what=n)


def test_lenet_matches_torch_and_classic_size():
    rng = np.random.default_rng(1)
    vm = LeNet5().double()
    assert sum(p.numel() for p in vm.parameters()) == 61706  # LeNet-5 with a padded first conv
    tm = tnn.Sequential(
        tnn.Sequential(tnn.Conv2d(1, 6, 5, padding=2), tnn.ReLU(), tnn.MaxPool2d(2), tnn.Conv2d(6, 16, 5), tnn.ReLU(),
                       tnn.MaxPool2d(2)),
        tnn.Sequential(tnn.Flatten(), tnn.Linear(400, 120), tnn.ReLU(), tnn.Linear(120, 84), tnn.ReLU(),
                       tnn.Linear(84, 10))).double()
    with torch.no_grad():
        for (k, v), (tk, tv) in zip(vm.state_dict().items(), tm.state_dict().items()):
            assert k.split(".")[-1] == tk.split(".")[-1]
            tv.copy_(torch.from_numpy(np.array(v._data)))
    x = vl.tensor(rng.standard_normal((2, 784)))  # a flat batch is reshaped to (2, 1, 28, 28)
    assert_close(vm(x), tm(to_torch(x).reshape(2, 1, 28, 28)), what="lenet")


def test_vgg_halves_the_map_and_doubles_the_channels():
    m = VGG(depths=(2, 1, 1), width=8, image_size=32)
    x = vl.randn(2, 1, 32, 32)
    shapes = []
    for layer in m.features:
        x = layer(x)
        if type(layer).__name__ == "MaxPool2d":
            shapes.append(tuple(x.shape[1:]))
    assert shapes == [(8, 16, 16), (16, 8, 8), (32, 4, 4)]
    convs = [layer for layer in m.features if type(layer).__name__ == "Conv2d"]
    assert all(c.kernel_size == (3, 3) for c in convs)
    assert tuple(m(vl.randn(2, 1, 32, 32)).shape) == (2, 10)


def test_shortcut_parameter_counts():
    """Seed 003 §5.3.4: identity / option A add no parameters; B adds a 1x1 conv + BN where
    the shape changes; C adds one in every block."""
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    plain, a = count(ResNet(skip=False)), count(ResNet(shortcut="A"))
    b, c = count(ResNet(shortcut="B")), count(ResNet(shortcut="C"))
    assert plain == a
    assert b - a == (16 * 32 + 2 * 32) + (32 * 64 + 2 * 64)
    assert c - a == (16 * 16 + 2 * 16) + (b - a)
    assert resnet_cifar(20).depth == 20 and len(resnet_cifar(20).layers) == 9
    with pytest.raises(ValueError, match="6n \\+ 2"):
        resnet_cifar(21)


def _bars(n, size, rng):
    """Four classes of noisy oriented bars at random positions: |, -, \\, /."""
    X = rng.normal(0, 0.3, (n, 1, size, size)).astype(np.float32)
    y = rng.integers(0, 4, n)
    r = np.arange(size)
    for i in range(n):
        o = rng.integers(2, size - 2)
        if y[i] == 0:
            X[i, 0, :, o] += 1.5
        elif y[i] == 1:
            X[i, 0, o, :] += 1.5
        elif y[i] == 2:
            X[i, 0, r, (r + o) % size] += 1.5
        else:
            X[i, 0, r, (o - r) % size] += 1.5
    return vl.tensor(X), vl.tensor(y.astype(np.int64))


@pytest.mark.parametrize("name,make,size,epochs", [
    ("lenet", lambda: LeNet5(num_classes=4, image_size=16), 16, 5),
    ("vgg", lambda: VGG(num_classes=4, image_size=16, depths=(1, 1), width=8), 16, 3),
    ("resnet", lambda: ResNet(num_classes=4, image_size=16, widths=(4, 8, 16)), 16, 3),
])
def test_models_learn_oriented_bars(name, make, size, epochs):
    """Each model reaches >= 95% held-out accuracy on 4-class noisy bars (chance 25%)."""
    rng = np.random.default_rng(2)
    Xtr, Ytr = _bars(768, size, rng)
    Xte, Yte = _bars(256, size, rng)
    vl.manual_seed(0)
    m = make()
    opt = optim.Adam(m.parameters(), lr=3e-3)
    for _ in range(epochs):
        m.train()
        for i in range(0, 768, 32):
            opt.zero_grad()
            F.cross_entropy(m(Xtr[i:i + 32]), Ytr[i:i + 32]).backward()
            opt.step()
    m.eval()
    acc = float((m(Xte).argmax(1)._data == Yte._data).mean())
    assert acc >= 0.95, f"{name}: held-out accuracy {acc:.3f} < 0.95"

"""A small ResNet in plain PyTorch (no torchvision), for ``varlens lens --torch``.

    varlens lens --torch docs/examples/lens_torch/resnet.py:make_model
    varlens lens --torch docs/examples/lens_torch/resnet.py:make_model --steps 3 --json resnet.json

``make_model()`` returns the network and an example batch (random 32x32 RGB images), so no
--input-shape is needed.  ``zero_init_residual=True`` zero-initialises the last BatchNorm of each
residual branch (Goyal et al. 2017): each block then starts as the identity.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    def __init__(self, c_in, c_out, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut = nn.Sequential()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, widths=(16, 32, 64), blocks=2, num_classes=10, zero_init_residual=False):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 3, padding=1, bias=False), nn.BatchNorm2d(widths[0]),
                                  nn.ReLU(inplace=True))
        layers, c = [], widths[0]
        for i, w in enumerate(widths):
            for b in range(blocks):
                layers.append(BasicBlock(c, w, stride=2 if (b == 0 and i > 0) else 1))
                c = w
        self.layers = nn.Sequential(*layers)
        self.head = nn.Linear(c, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, BasicBlock):
                    nn.init.zeros_(m.bn2.weight)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def make_model():
    """The network and an example batch of 16 images."""
    return ResNet(), torch.randn(16, 3, 32, 32)


def make_zero_init_model():
    return ResNet(zero_init_residual=True), torch.randn(16, 3, 32, 32)

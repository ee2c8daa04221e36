"""A small ResNet for 28x28 / 32x32 images (seed 003 §5.3.4; the CIFAR layout of [HZRS15a]).

    stem:   conv 3x3 -> BN -> ReLU                       widths[0] channels
    stages: len(widths) stages of `blocks` BasicBlocks; every stage after the first
            halves the map (stride 2) and doubles the channels (VGG's rule)
    head:   global average pool -> linear

BasicBlock:  out = ReLU( BN(conv(ReLU(BN(conv(x))))) + shortcut(x) )

Shortcut options of seed 003 §5.3.4 when the shape changes:
  'A': the identity, subsampled by the stride and padded with zero channels (0 parameters);
  'B': a learned 1x1 convolution (+ BN) only where the shape changes, identity elsewhere;
  'C': a learned 1x1 projection in every block.
``skip=False`` removes the shortcut entirely: the "plain" network of the degradation
experiment (Figure 5.3.4), with exactly the same layers otherwise.
Depth = 2 * blocks * len(widths) + 2 (blocks=3, three stages: ResNet-20).
"""
from __future__ import annotations

from varlens import nn
from varlens import ops


class ZeroPadShortcut(nn.Module):
    """Option A: x[:, :, ::s, ::s] with (out - in) zero channels appended; no parameters."""

    def __init__(self, in_channels, out_channels, stride):
        super().__init__()
        self.extra, self.stride = out_channels - in_channels, stride

    def forward(self, x):
        if self.stride != 1:
            x = x[:, :, ::self.stride, ::self.stride]
        if self.extra:
            z = ops.mul(x[:, :1], 0.0)  # a zero channel of the right shape and dtype
            x = ops.cat([x] + [z] * self.extra, 1)
        return x


class BasicBlock(nn.Module):
    def __init__(self, in_channels, out_channels, stride=1, shortcut="B", skip=True):
        super().__init__()
        if shortcut not in ("A", "B", "C"):
            raise ValueError(f"BasicBlock: shortcut must be 'A', 'B' or 'C', got {shortcut!r}")
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU()
        self.skip = skip
        changes = stride != 1 or in_channels != out_channels
        if not skip:
            self.shortcut = None
        elif shortcut == "C" or (shortcut == "B" and changes):
            self.shortcut = nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                                          nn.BatchNorm2d(out_channels))
        elif changes:
            self.shortcut = ZeroPadShortcut(in_channels, out_channels, stride)
        else:
            self.shortcut = nn.Identity()

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.shortcut is not None:
            out = out + self.shortcut(x)  # the skip connection: learn the residual F(x) - x
        return self.relu(out)


class ResNet(nn.Module):
    def __init__(self, num_classes=10, in_channels=1, image_size=28, blocks=1, widths=(16, 32, 64),
                 shortcut="B", skip=True):
        super().__init__()
        self.in_channels, self.image_size = in_channels, image_size
        self.stem = nn.Sequential(nn.Conv2d(in_channels, widths[0], 3, padding=1, bias=False),
                                  nn.BatchNorm2d(widths[0]), nn.ReLU())
        stages, cin = [], widths[0]
        for s, w in enumerate(widths):
            for b in range(blocks):
                stride = 2 if (s > 0 and b == 0) else 1
                stages.append(BasicBlock(cin, w, stride, shortcut, skip))
                cin = w
        self.layers = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)
        self.depth = 2 * blocks * len(widths) + 2

    def forward(self, x):
        if x.ndim == 2:
            x = x.reshape(x.shape[0], self.in_channels, self.image_size, self.image_size)
        x = self.layers(self.stem(x))
        return self.fc(ops.flatten(self.pool(x), 1))


def resnet_cifar(depth=20, **kwargs):
    """ResNet-(6n+2) of [HZRS15a]'s CIFAR experiments: depth 20, 32, 44, 56, 110."""
    if (depth - 2) % 6:
        raise ValueError(f"resnet_cifar: depth must be 6n + 2 (20, 32, 44, 56, 110), got {depth}")
    return ResNet(blocks=(depth - 2) // 6, **kwargs)

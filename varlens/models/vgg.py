"""A VGG-style CNN following seed 003 §5.3.2's rule: 3x3 convolutions only, and each
2x2 max pool (halving height and width) is followed by doubling the channels.

    stage s (s = 0 .. len(depths)-1): depths[s] x [conv 3x3, width * 2^s channels, BN, ReLU]
                                      then max pool 2x2  (the map halves)
    head: global average pool or flatten, dropout, linear

VGG(depths=(2, 2, 2), width=32) on 28x28 inputs: 32 ch at 28x28 -> 64 at 14x14 ->
128 at 7x7 -> pool to 3x3 -> classifier.
"""
from __future__ import annotations

from varlens import nn


class VGG(nn.Module):
    def __init__(self, num_classes=10, in_channels=1, image_size=28, depths=(2, 2), width=32,
                 batchnorm=True, dropout=0.0, global_pool=False, hidden=0):
        super().__init__()
        self.in_channels, self.image_size = in_channels, image_size
        layers, cin, side = [], in_channels, image_size
        for s, n in enumerate(depths):
            cout = width * 2 ** s  # double the channels ...
            for _ in range(n):
                layers.append(nn.Conv2d(cin, cout, 3, padding=1, bias=not batchnorm))
                if batchnorm:
                    layers.append(nn.BatchNorm2d(cout))
                layers.append(nn.ReLU())
                cin = cout
            layers.append(nn.MaxPool2d(2))  # ... each time the map halves
            side //= 2
        self.features = nn.Sequential(*layers)
        head = [nn.AdaptiveAvgPool2d(1), nn.Flatten()] if global_pool else [nn.Flatten()]
        feat = cin if global_pool else cin * side * side
        if hidden:
            head += [nn.Linear(feat, hidden), nn.ReLU()]
            feat = hidden
        if dropout:
            head.append(nn.Dropout(dropout))
        head.append(nn.Linear(feat, num_classes))
        self.classifier = nn.Sequential(*head)

    def forward(self, x):
        if x.ndim == 2:
            x = x.reshape(x.shape[0], self.in_channels, self.image_size, self.image_size)
        return self.classifier(self.features(x))

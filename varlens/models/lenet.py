"""LeNet-5 style CNN (seed 003 §5.2): two conv+pool stages, then three dense layers.

    input (N, 1, 28, 28)  [a flat (N, 784) batch is reshaped]
    conv 5x5, 6 ch, pad 2  -> act -> pool 2x2   : 6 x 14 x 14
    conv 5x5, 16 ch        -> act -> pool 2x2   : 16 x 5 x 5
    flatten 400 -> 120 -> act -> 84 -> act -> num_classes

The 1998 original used tanh and average ("subsampling") pooling; ``activation='tanh',
pool='avg'`` gives that, the defaults (ReLU, max) are the modern reading.  ``width``
multiplies the channel counts (width=2: 12 and 32 channels).
"""
from __future__ import annotations

from varlens import nn


class LeNet5(nn.Module):
    def __init__(self, num_classes=10, in_channels=1, image_size=28, activation="relu", pool="max",
                 width=1, batchnorm=False, dropout=0.0):
        super().__init__()
        if activation not in ("relu", "tanh"):
            raise ValueError(f"LeNet5: activation must be 'relu' or 'tanh', got {activation!r}")
        if pool not in ("max", "avg"):
            raise ValueError(f"LeNet5: pool must be 'max' or 'avg', got {pool!r}")
        self.in_channels, self.image_size = in_channels, image_size
        Act = nn.ReLU if activation == "relu" else nn.Tanh
        Pool = nn.MaxPool2d if pool == "max" else nn.AvgPool2d
        c1, c2 = 6 * width, 16 * width

        def stage(cin, cout, pad):
            layers = [nn.Conv2d(cin, cout, 5, padding=pad, bias=not batchnorm)]
            if batchnorm:
                layers.append(nn.BatchNorm2d(cout))
            return layers + [Act(), Pool(2)]

        self.features = nn.Sequential(*stage(in_channels, c1, 2), *stage(c1, c2, 0))
        side = ((image_size // 2) - 4) // 2  # 28 -> 14 -> 10 -> 5
        head = [nn.Flatten(), nn.Linear(c2 * side * side, 120), Act()]
        if dropout:
            head.append(nn.Dropout(dropout))
        head += [nn.Linear(120, 84), Act(), nn.Linear(84, num_classes)]
        self.classifier = nn.Sequential(*head)

    def forward(self, x):
        if x.ndim == 2:  # flat pixels (as the MLP recipes feed them)
            x = x.reshape(x.shape[0], self.in_channels, self.image_size, self.image_size)
        return self.classifier(self.features(x))

"""ChannelShuffle: interleave the channels of groups.
"""
from __future__ import annotations

from varlens.nn import functional as F
from varlens.nn.module import Module


class ChannelShuffle(Module):
    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"

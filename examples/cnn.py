"""A small torch CNN, the model of the checkpoint examples in docs/cli.md and docs/api.md.

`ptranspile cnn.py --to jax -o cnn_jax.py` converts it to Flax NNX (`--to tf`: Keras 3), and
`ptranspile weights` moves its `state_dict` over.
"""

import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, kernel_size=3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.norm = nn.LayerNorm(8)
        self.head = nn.Linear(8, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn(self.conv(x)))
        x = self.norm(x.mean(dim=(2, 3)))
        return self.head(x)

"""An spmd-capture factory: a Linear whose logits a learned 0-d parameter
scales (a temperature, as CLIP's logit_scale), so that ddp buckets a 0-d
gradient with the others."""
import torch
from torch import nn


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 3)
        self.scale = nn.Parameter(torch.tensor(2.0))

    def forward(self, x):
        return self.fc(x) * self.scale


def scaled(batch=7):
    torch.manual_seed(0)
    return Scaled(), (torch.randn(batch, 6),), nn.CrossEntropyLoss(), (torch.randint(0, 3, (batch,)),)

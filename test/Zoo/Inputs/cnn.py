"""A plain PyTorch CNN factory (not transformers): grouped and depthwise
convolutions with and without bias, BatchNorm2d and BatchNorm1d, ReLU6,
max, average and adaptive average pooling, 1-D convolution, a linear
head."""
import torch
import torch.nn as nn


class CNN(nn.Module):
    def __init__(self, channels=3, width=8, classes=5):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(channels, width, 3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(width), nn.ReLU6(),
            nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True))
        self.grouped = nn.Conv2d(width, 2 * width, 3, padding=1, groups=2)
        self.depthwise = nn.Conv2d(2 * width, 2 * width, 3, padding=2, dilation=2,
                                   groups=2 * width, bias=False)
        self.norm = nn.BatchNorm2d(2 * width, momentum=0.3)
        self.smooth = nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False)
        self.pool = nn.AdaptiveAvgPool2d((2, 1))
        self.conv1d = nn.Conv1d(1, 2, 3, padding=1)
        self.norm1d = nn.BatchNorm1d(2)
        self.head = nn.Linear(8 * width, classes)

    def forward(self, x):
        x = self.stem(x)
        x = torch.relu(self.norm(self.depthwise(self.grouped(x))))
        x = self.pool(self.smooth(x)).flatten(1)
        y = self.norm1d(self.conv1d(x.unsqueeze(1))).flatten(1)
        return self.head(y)


def cnn(batch=6, image=16, **sizes):
    torch.manual_seed(0)
    model = CNN(**sizes)
    x = torch.randn(batch, sizes.get("channels", 3), image, image)
    labels = torch.randint(0, sizes.get("classes", 5), (batch,))
    return model, (x,), nn.CrossEntropyLoss(), (labels,)

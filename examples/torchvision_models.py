"""torchvision's models as spmd-capture factories, built by name with random
weights (nothing is downloaded).

  spmd-capture --model "examples/torchvision_models.py:model(name='resnet18')" \
      --optimizer sgd --momentum 0.9 -o r.mlir --bundle r.bundle

`model(name, ...)` takes any name of `torchvision.models.list_models()` with
a classification, semantic-segmentation, video-classification or
optical-flow head: the batch is random images [batch, channels, image,
image] (video: clips [batch, channels, frames, image, image]) with random
class labels ([batch]; segmentation: one per pixel, [batch, image, image]),
and the loss is PyTorch's cross-entropy of the model's logits. Where the
model returns several outputs (segmentation's {"out", "aux"} dict,
Inception's auxiliary logits) the loss takes the main one, and the
parameters' FQNs start with `model.`. Optical flow (RAFT) takes two random
images (at least 128x128: its correlation pyramid halves the 1/8-size
feature maps three times) and a random flow [batch, 2, image, image], runs
`flow_updates` refinement iterations and trains with torchvision's
sequence loss (references/optical_flow: the L1 distance of each
iteration's flow, weighted by gamma^(iterations left), where the true
flow's norm is below max_flow).

`dropout`: None keeps the model's rates; a number sets every
`nn.Dropout`'s p and every stochastic depth's rate (torchvision's
`StochasticDepth`). Other keyword arguments go to the model's builder
(`image_size=64` for the ViTs, `aux_logits=False`, ...).
"""
import torch
import torchvision
from torch import nn


class MainOutput(nn.Module):
    """The wrapped model's main logits: "out" of a dict, the first element
    of a tuple (a namedtuple of logits and auxiliary logits)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        out = self.model(x)
        if isinstance(out, dict):
            return out["out"]
        if isinstance(out, tuple):
            return out[0]
        return out


class FlowUpdates(nn.Module):
    """The wrapped optical-flow model with `updates` refinement iterations:
    the list of each iteration's flow [batch, 2, H, W]."""

    def __init__(self, model, updates):
        super().__init__()
        self.model, self.updates = model, updates

    def forward(self, image1, image2):
        return self.model(image1, image2, num_flow_updates=self.updates)


class SequenceLoss(nn.Module):
    """torchvision's RAFT training loss (references/optical_flow/train.py's
    sequence_loss, every pixel valid): the mean L1 distance of each
    iteration's flow from the true one where its norm is below `max_flow`,
    weighted by gamma^(iterations after it), summed."""

    def __init__(self, gamma=0.8, max_flow=400.0):
        super().__init__()
        self.gamma, self.max_flow = gamma, max_flow

    def forward(self, flows, flow):
        valid = (flow.square().sum(1).sqrt() < self.max_flow)[:, None]
        flows = torch.stack(flows)
        distances = ((flows - flow).abs() * valid).mean((1, 2, 3, 4))
        weights = self.gamma ** torch.arange(len(flows) - 1, -1, -1, dtype=flow.dtype)
        return (distances * weights).sum()


def _task(name):
    for task, module in (("segmentation", torchvision.models.segmentation),
                         ("video", torchvision.models.video),
                         ("optical_flow", torchvision.models.optical_flow)):
        if name in torchvision.models.list_models(module=module):
            return task
    if name in torchvision.models.list_models(module=torchvision.models):
        return "classification"
    raise ValueError("'%s' is not a torchvision classification, segmentation, video or "
                     "optical-flow model (torchvision.models.list_models())" % name)


def set_dropout(model, p):
    """Sets every dropout's and every stochastic depth's rate to `p`."""
    for module in model.modules():
        if isinstance(module, (nn.Dropout, nn.Dropout2d, nn.Dropout3d,
                               torchvision.ops.StochasticDepth)):
            module.p = p


def model(name, batch=8, image=None, channels=3, frames=4, classes=10, seed=0,
          dropout=0.0, flow_updates=2, **builder_args):
    """The torchvision model `name` with random weights and `classes`
    outputs, in training mode, and a random batch: (module, [inputs],
    cross-entropy, [labels]); optical flow: (module, [image1, image2],
    SequenceLoss, [flow]). `image` defaults to 64 (optical flow: 128)."""
    task = _task(name)
    if task == "optical_flow":
        image = image or 128
        torch.manual_seed(seed)
        net = FlowUpdates(torchvision.models.get_model(name, weights=None, **builder_args),
                          flow_updates)
        images = [torch.randn(batch, channels, image, image) for _ in range(2)]
        return net, images, SequenceLoss(), [torch.randn(batch, 2, image, image)]
    image = image or 64
    if task == "segmentation":
        # The backbone's weights too are random: nothing is downloaded.
        builder_args.setdefault("weights_backbone", None)
    torch.manual_seed(seed)
    net = torchvision.models.get_model(name, weights=None, num_classes=classes,
                                       **builder_args)
    if dropout is not None:
        set_dropout(net, dropout)
    if task == "video":
        x = torch.randn(batch, channels, frames, image, image)
    else:
        x = torch.randn(batch, channels, image, image)
    label_shape = (batch, image, image) if task == "segmentation" else (batch,)
    labels = torch.randint(0, classes, label_shape)
    # Wrapped only where the output needs it, so that the parameters' FQNs
    # are the model's own elsewhere.
    if task == "segmentation" or getattr(net, "aux_logits", False):
        net = MainOutput(net)
    return net, [x], nn.CrossEntropyLoss(), [labels]

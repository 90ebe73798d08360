"""Hugging Face `transformers` image models (classifiers, semantic
segmentation) as spmd-capture factories, built from small configs with
random weights (nothing is downloaded).

  spmd-capture --model 'examples/hf_vision.py:resnet(batch=6)' \
      --optimizer sgd -o r.mlir --bundle r.bundle

Each named factory (vit, resnet, convnext, mobilenet_v2) is
`vision(model_type, ...)` with that family's config fields; `vision` takes
any `transformers` model type that has an image-classification head, and
`tiny(model_type)` makes any such config's common size fields tiny; a
composite config (CLIP's, SigLIP's image tower beside a text tower,
UperNet's backbone) is sized through its `vision_config` or
`backbone_config`. `task="segmentation"` makes a semantic segmentation
model instead (a label per pixel). The
model computes its own cross-entropy loss from `labels`, which
spmd-capture takes from the output's `loss`. The model is in training
mode: BatchNorm normalizes with the batch's statistics and updates its
running statistics (buffers, results of the step).

Sizes: `batch`, `image` (height and width), `channels`, `labels` (the
number of classes); the other keyword arguments set config fields.
"""
import torch
import transformers

import hf


def vision(model_type, batch=4, image=32, channels=3, labels=10, seed=0,
           dropout=None, task="classification", **config_fields):
    """A `transformers` `model_type` image model with random weights, and a
    batch of random images [batch, channels, image, image] with random
    labels. `task`: "classification" (AutoModelForImageClassification, a
    class per image) or "segmentation" (AutoModelForSemanticSegmentation,
    a class per pixel, [batch, image, image], about one pixel in eight
    the config's ignored label, 255 in every family, which the loss
    skips). `dropout`: None
    keeps the config's rates; a number sets every rate that drops
    something (dropout, stochastic depth's `drop_path_rate`)."""
    auto = {"classification": transformers.AutoModelForImageClassification,
            "segmentation": transformers.AutoModelForSemanticSegmentation}[task]
    config = transformers.AutoConfig.for_model(model_type)
    config.num_labels = labels
    # A composite config (CLIP's, SigLIP's, UperNet's) keeps the image
    # tower's fields in its vision_config or backbone_config: sizes and
    # rates go there, the head's labels stay on top.
    towers = _towers(config)
    for c in towers:
        c.num_channels = channels
        if hasattr(c, "image_size"):
            # [height, width] where the config keeps a pair (Hiera's).
            sized = isinstance(c.image_size, (list, tuple))
            c.image_size = [image, image] if sized else image
        if dropout is not None:
            hf.set_dropout(c, dropout)
    for field, value in config_fields.items():
        # A field of the image tower is set there, others on top.
        for c in [t for t in towers if hasattr(t, field)] or [config]:
            setattr(c, field, value)
    # Where the auto class maps the config to several classes (DeiT's and
    # LeViT's with and without a distillation head) transformers picks by
    # `architectures`: the plain classifier, listed first.
    if not getattr(config, "architectures", None):
        classes = auto._model_mapping[type(config)]
        if isinstance(classes, (list, tuple)):
            config.architectures = [classes[0].__name__]
    # PyTorch's scaled-dot-product attention where the class has it (kept
    # whole by the capture), else the model's own.
    for attention in ("sdpa", "eager"):
        config._attn_implementation = attention
        try:
            torch.manual_seed(seed)
            model = auto.from_config(config)
            break
        except ValueError as e:
            if attention == "eager" or "attention implementation" not in str(e):
                raise
    pixels = torch.randn(batch, channels, image, image)
    if task == "classification":
        return model, {"pixel_values": pixels,
                       "labels": torch.randint(0, labels, (batch,))}
    ignored = getattr(config, "semantic_loss_ignore_index",
                      getattr(config, "loss_ignore_index", 255))
    target = torch.randint(0, labels, (batch, image, image))
    target[torch.rand(batch, image, image) < 0.125] = ignored
    return model, {"pixel_values": pixels, "labels": target}


def _towers(config):
    """The configs that size the model: `config` and, for a composite one,
    its `vision_config` (an image tower with a text tower beside it) or
    `backbone_config` (a segmentation head's backbone: UperNet's)."""
    subs = [getattr(config, k, None) for k in ("vision_config", "backbone_config")]
    return [config] + [c for c in subs if c is not None]


# Size fields of transformers' vision configs and their tiny values.
# GroupNorm's num_groups (BiT's) divides every tiny channel count; the
# latent array and its attention (Perceiver's) shrink too.
_TINY_INTS = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
              "intermediate_size": 64, "embed_dim": 16, "projection_dim": 16,
              "num_groups": 8, "num_latents": 16, "d_latents": 32,
              "num_self_attends_per_block": 2, "num_self_attention_heads": 2,
              "num_cross_attention_heads": 1}


def _tiny_fields(config):
    """The tiny values of `config`'s common size fields (`tiny`)."""
    fields = {}
    staged = any(isinstance(getattr(config, k, None), (list, tuple))
                 for k in ("hidden_sizes", "embed_dims", "hidden_dims", "embed_dim"))
    for k, v in _TINY_INTS.items():
        # A staged config's alias of a common name (ConvNeXt V2's
        # num_hidden_layers is its num_stages) keeps the stages' count.
        if isinstance(getattr(config, k, None), int) and not (
                staged and (k in ("hidden_size", "embed_dim") or k in config.attribute_map)):
            fields[k] = v
    for k in ("depths", "num_layers_per_stage"):
        if isinstance(getattr(config, k, None), (list, tuple)):
            fields[k] = [1] * len(getattr(config, k))
    # CvT's per-stage `depth`: its stage i reads the i-th of its layers'
    # drop-path rates, so stage i keeps at least i + 1 layers.
    if isinstance(getattr(config, "depth", None), (list, tuple)):
        fields["depth"] = [min(d, i + 1) for i, d in enumerate(config.depth)]
    for k in ("hidden_sizes", "embed_dims", "hidden_dims", "embedding_sizes",
              "embed_dim"):
        if isinstance(getattr(config, k, None), (list, tuple)):
            fields[k] = [16 * (i + 1) for i in range(len(getattr(config, k)))]
    for k in ("num_heads", "num_attention_heads"):
        if isinstance(getattr(config, k, None), (list, tuple)):
            fields[k] = [1] * len(getattr(config, k))
    return fields


def tiny(model_type, batch=5, image=32, **config_fields):
    """`vision(model_type)` with the config's common size fields made tiny,
    for trying a family whose own factory does not exist: hidden sizes 32
    (16 per stage step for staged models), 2 layers and heads, one block
    per stage, one head per stage, GroupNorm in 8 groups, attention
    windows no larger than the last stage's map, every drop rate 0
    (`vision`'s `dropout`). Fields that a family
    names otherwise keep their defaults; `config_fields` override. A
    family whose stage fields must agree with each other (HGNet-V2's
    stage_in/mid/out_channels, TextNet's stem_out_channels and
    hidden_sizes[0]) needs them given."""
    fields = {}
    for config in _towers(transformers.AutoConfig.for_model(model_type)):
        fields.update(_tiny_fields(config))
        # Windowed attention (Swin's): a window no larger than the last
        # stage's feature map, which transformers' shifted-window mask needs.
        window, patch = getattr(config, "window_size", None), getattr(config, "patch_size", None)
        depths = getattr(config, "depths", None)
        if isinstance(window, int) and isinstance(patch, int) and isinstance(depths, (list, tuple)):
            fields["window_size"] = min(window, max(1, image // patch // 2 ** (len(depths) - 1)))
    fields.update(config_fields)
    return vision(model_type, batch=batch, image=image, dropout=0.0, **fields)


def vit(hidden=64, heads=4, layers=2, ffn=128, patch=8, dropout=0.0, **sizes):
    """ViTForImageClassification: a convolution cuts the image into
    `patch` x `patch` patches, a [CLS] token and learned positions, a
    pre-LayerNorm encoder (GELU MLP), the head on [CLS]."""
    return vision("vit", hidden_size=hidden, num_attention_heads=heads,
                  num_hidden_layers=layers, intermediate_size=ffn,
                  patch_size=patch, dropout=dropout, **sizes)


def resnet(hidden_sizes=(16, 32), depths=(1, 1), embedding=8,
           layer_type="bottleneck", **sizes):
    """ResNetForImageClassification: a 7x7 stride-2 stem convolution,
    BatchNorm, ReLU and 3x3 max pooling, then stages of bottleneck (or
    basic) residual blocks of convolution + BatchNorm, the first of each
    stage downsampling by a strided 1x1 shortcut; global average pooling
    and a linear head."""
    return vision("resnet", hidden_sizes=list(hidden_sizes), depths=list(depths),
                  embedding_size=embedding, layer_type=layer_type, **sizes)


def convnext(hidden_sizes=(16, 32), depths=(1, 1), **sizes):
    """ConvNextForImageClassification: a patchify stem, depthwise 7x7
    convolutions (groups = channels), channels-last LayerNorm, an inverted
    MLP with GELU and a learned layer scale."""
    return vision("convnext", hidden_sizes=list(hidden_sizes), depths=list(depths),
                  num_stages=len(hidden_sizes), **sizes)


def mobilenet_v2(depth_multiplier=0.25, **sizes):
    """MobileNetV2ForImageClassification: inverted residual blocks of a 1x1
    expansion, a depthwise 3x3 convolution and a 1x1 projection, each with
    BatchNorm and ReLU6 (hardtanh)."""
    sizes.setdefault("classifier_dropout_prob", 0.0)
    # Its last BatchNorms see 1x1 images: with fewer than 8 of them per
    # channel the gradients are so ill-conditioned that float32 rounding
    # alone moves them by 1e-3 (eager PyTorch against itself decomposed).
    sizes.setdefault("batch", 8)
    return vision("mobilenet_v2", depth_multiplier=depth_multiplier, **sizes)

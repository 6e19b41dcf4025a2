"""Models for the federated simulations, with stable, documented layer names.

Public API (stable; falsifiers import these names)
--------------------------------------------------
- ``build_model(name, num_classes, in_channels, image_size, **kw) -> nn.Module``
  names: ``cnn``, ``cnn2``, ``vgg``, ``resnet8``, ``resnet10``, ``resnet18``.
- ``build_lm(name="tiny-transformer", vocab_size=..., **kw) -> nn.Module``
- ``layer_names(model) -> list[str]``: parameter-bearing modules, input to output.
- ``weight_layers(model) -> list[str]``: the conv / linear subset of ``layer_names``
  (what "layer i of L" means for depth-indexed rules such as FLAYER's i/L).
- ``middle_layers(model) -> list[str]``: every conv except the first; never a
  linear, never a norm layer (the LIPS release's definition, 1x1 shortcuts included).
- ``norm_layers(model) -> list[str]`` and ``is_norm_key(model)`` (a predicate on
  state-dict keys, for FedBN's ``keep_local``).
- ``layer_of(key) -> str``: the module name of a state-dict key.

Depth order. ``layer_names`` follows module registration order, which every model
here registers in forward order: stem first, then each block's main path, then the
block's shortcut (``downsample`` / ``shortcut``) right after the main path it joins,
then the classifier (``fc``; the LM's ``head``). For the torchvision ResNet-18 this is
torchvision's own order (``conv1, bn1, layer1.0.conv1, ..., layer4.1.bn2, fc``).

Layer names per model (``in_channels=c``, ``image_size=s``, default widths):
- ``cnn`` (the issue's reference CNN): conv1 (c->16, 3x3, pad 1), relu, conv2
  (16->32, 3x3, pad 1), relu, flatten, fc (32*s*s -> classes). 8x8 -> fc 2048 -> 10.
- ``cnn2`` (the two-conv CNN of pFL papers, McMahan et al. 2017 / PFLlib's FedAvgCNN,
  with "same" padding so that it fits 8x8 as well as 32x32): conv1 (c->32, 5x5),
  relu, maxpool 2, conv2 (32->64, 5x5), relu, maxpool 2, fc1 (64*(s/4)^2 -> 512),
  relu, fc (512 -> classes).
- ``vgg`` (VGG-style, 4 conv + 2 linear = "VGG6"): conv1/bn1 (32), pool, conv2/bn2
  (64), pool, conv3/bn3 (128), conv4/bn4 (128), pool, fc1 (-> 256), fc.
- ``resnet8`` (CIFAR ResNet, He et al. 2016 Sec. 4.2 with n=1): conv1/bn1 (16),
  layer1.0, layer2.0, layer3.0 (widths 16/32/64, strides 1/2/2), avgpool, fc.
- ``resnet10``: conv1/bn1 (64), layer1.0 .. layer4.0 (64/128/256/512, strides 1/2/2/2).
  A BasicBlock is ``conv1, bn1, conv2, bn2[, shortcut.0 (1x1 conv), shortcut.1]``.
- ``resnet18``: ``torchvision.models.resnet18(weights=None)`` with the CIFAR head:
  3x3 stride-1 stem, no max-pool, ``fc`` to ``num_classes``. Never downloads.

Keyword options: ``width`` (channel multiplier, default 1.0), ``norm`` in
{"bn", "gn", "none"} (vgg/resnet8/resnet10; default "bn"), ``dropout_middle``
(vgg/resnet8/resnet10/cnn2: dropout after every middle layer's activation or block;
default 0.0), ``dropout`` (classifier dropout for cnn2/vgg, default 0.0).
"""

from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = [
    "CNN", "CNN2", "VGG", "CifarResNet", "TinyTransformerLM",
    "build_lm", "build_model", "is_norm_key", "layer_names", "layer_of", "middle_layers",
    "norm_layers", "weight_layers",
]

_NORM_TYPES = (nn.BatchNorm1d, nn.BatchNorm2d, nn.GroupNorm, nn.LayerNorm)


def _norm(kind: str, c: int) -> nn.Module:
    if kind == "bn":
        return nn.BatchNorm2d(c)
    if kind == "gn":
        return nn.GroupNorm(min(8, c), c)
    if kind == "none":
        return nn.Identity()
    raise ValueError(f"norm must be 'bn', 'gn' or 'none', not {kind!r}")


class CNN(nn.Module):
    """The issue's reference CNN: conv(c->16)-relu-conv(16->32)-relu-flatten-linear."""

    def __init__(self, num_classes: int, in_channels: int = 1, image_size: int = 8,
                 width: float = 1.0):
        super().__init__()
        c1, c2 = max(1, round(16 * width)), max(1, round(32 * width))
        self.conv1 = nn.Conv2d(in_channels, c1, 3, padding=1)
        self.conv2 = nn.Conv2d(c1, c2, 3, padding=1)
        self.fc = nn.Linear(c2 * image_size * image_size, num_classes)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        return self.fc(x.flatten(1))


class CNN2(nn.Module):
    """Two-conv CNN of the pFL literature (5x5 convs, max-pools, fc1 512, fc)."""

    def __init__(self, num_classes: int, in_channels: int = 1, image_size: int = 8,
                 width: float = 1.0, dropout_middle: float = 0.0, dropout: float = 0.0):
        super().__init__()
        c1, c2, h = round(32 * width), round(64 * width), round(512 * width)
        self.conv1 = nn.Conv2d(in_channels, c1, 5, padding=2)
        self.conv2 = nn.Conv2d(c1, c2, 5, padding=2)
        side = image_size // 4
        self.fc1 = nn.Linear(c2 * side * side, h)
        self.fc = nn.Linear(h, num_classes)
        self.drop_mid = nn.Dropout(dropout_middle)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(self.drop_mid(F.relu(self.conv2(x))), 2)
        x = self.drop(F.relu(self.fc1(x.flatten(1))))
        return self.fc(x)


class VGG(nn.Module):
    """VGG-style net (Simonyan & Zisserman 2015), 4 conv + 2 linear layers."""

    def __init__(self, num_classes: int, in_channels: int = 3, image_size: int = 32,
                 width: float = 1.0, norm: str = "bn", dropout_middle: float = 0.0,
                 dropout: float = 0.0):
        super().__init__()
        ch = [max(1, round(c * width)) for c in (32, 64, 128, 128)]
        prev = in_channels
        for i, c in enumerate(ch, 1):
            setattr(self, f"conv{i}", nn.Conv2d(prev, c, 3, padding=1))
            setattr(self, f"bn{i}", _norm(norm, c))
            prev = c
        side = max(1, image_size // 8)
        self.fc1 = nn.Linear(ch[-1] * side * side, max(1, round(256 * width)))
        self.fc = nn.Linear(max(1, round(256 * width)), num_classes)
        self.drop_mid = nn.Dropout(dropout_middle)
        self.drop = nn.Dropout(dropout)
        # a 2x2 max-pool after blocks 1, 2 and 4 while the map is wider than one pixel
        # (fixed here from image_size, so that forward has no control flow on values)
        self._pool_after, w = set(), image_size
        for i in (1, 2, 4):
            if w > 1:
                self._pool_after.add(i)
                w //= 2

    def forward(self, x):
        for i in range(1, 5):
            x = F.relu(getattr(self, f"bn{i}")(getattr(self, f"conv{i}")(x)))
            if i > 1:  # conv2..conv4 are the middle layers
                x = self.drop_mid(x)
            if i in self._pool_after:
                x = F.max_pool2d(x, 2)
        x = self.drop(F.relu(self.fc1(x.flatten(1))))
        return self.fc(x)


class BasicBlock(nn.Module):
    """He et al. 2016 basic block; 1x1 projection shortcut when the shape changes."""

    def __init__(self, cin: int, cout: int, stride: int, norm: str):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = _norm(norm, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = _norm(norm, cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                          _norm(norm, cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class CifarResNet(nn.Module):
    """CIFAR ResNet with one BasicBlock per stage (ResNet-8: 3 stages, ResNet-10: 4)."""

    def __init__(self, widths, num_classes: int, in_channels: int = 3, norm: str = "bn",
                 dropout_middle: float = 0.0):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, widths[0], 3, padding=1, bias=False)
        self.bn1 = _norm(norm, widths[0])
        prev = widths[0]
        for i, w in enumerate(widths, 1):
            setattr(self, f"layer{i}", nn.Sequential(BasicBlock(prev, w, 1 if i == 1 else 2,
                                                                norm)))
            prev = w
        self.n_stages = len(widths)
        self.fc = nn.Linear(prev, num_classes)
        self.drop_mid = nn.Dropout(dropout_middle)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        for i in range(1, self.n_stages + 1):
            x = self.drop_mid(getattr(self, f"layer{i}")(x))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


def _resnet18_cifar(num_classes: int, in_channels: int) -> nn.Module:
    import torchvision

    m = torchvision.models.resnet18(weights=None, num_classes=num_classes)
    m.conv1 = nn.Conv2d(in_channels, 64, 3, stride=1, padding=1, bias=False)
    m.maxpool = nn.Identity()
    return m


def build_model(name: str, num_classes: int, in_channels: int = 1, image_size: int = 8,
                **kw) -> nn.Module:
    """Build a classifier by name (see the module docstring for layers and options)."""
    name = name.lower()
    width = kw.pop("width", 1.0)
    if name == "cnn":
        return CNN(num_classes, in_channels, image_size, width=width, **kw)
    if name == "cnn2":
        return CNN2(num_classes, in_channels, image_size, width=width, **kw)
    if name == "vgg":
        return VGG(num_classes, in_channels, image_size, width=width, **kw)
    if name in ("resnet8", "resnet10"):
        base = (16, 32, 64) if name == "resnet8" else (64, 128, 256, 512)
        widths = [max(1, round(w * width)) for w in base]
        return CifarResNet(widths, num_classes, in_channels, **kw)
    if name == "resnet18":
        if kw or width != 1.0:
            raise ValueError("resnet18 takes no options (torchvision architecture)")
        return _resnet18_cifar(num_classes, in_channels)
    raise ValueError(f"unknown model {name!r}")


# ----------------------------------------------------------------------------- language model

class CausalSelfAttention(nn.Module):
    def __init__(self, d: int, n_heads: int, dropout: float):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        h = self.n_heads
        q, k, v = (z.reshape(b, t, h, d // h).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-1, -2)) / math.sqrt(d // h)
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~causal, float("-inf")).softmax(-1)
        y = (self.drop(att) @ v).transpose(1, 2).reshape(b, t, d)
        return self.proj(y)


class MLP(nn.Module):
    def __init__(self, d: int, dropout: float):
        super().__init__()
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.drop(self.fc2(F.gelu(self.fc1(x))))


class Block(nn.Module):
    """Pre-norm Transformer block (Radford et al. 2019 layout)."""

    def __init__(self, d: int, n_heads: int, dropout: float):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, n_heads, dropout)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = MLP(d, dropout)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyTransformerLM(nn.Module):
    """Decoder-only LM: tok_emb, pos_emb, blocks.{i}.{ln1, attn.qkv, attn.proj, ln2,
    mlp.fc1, mlp.fc2}, ln_f, head. Input ``B x T`` token ids, output ``B x T x V``."""

    def __init__(self, vocab_size: int, d_model: int = 64, n_heads: int = 4, n_layers: int = 2,
                 max_len: int = 256, dropout: float = 0.0):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model)
        self.blocks = nn.Sequential(*[Block(d_model, n_heads, dropout) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, idx):
        t = idx.shape[-1]
        pos = torch.arange(t, device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(pos)
        return self.head(self.ln_f(self.blocks(x)))


def build_lm(name: str = "tiny-transformer", vocab_size: int = 128, **kw) -> nn.Module:
    """Build a language model; ``tiny-transformer`` takes d_model, n_heads, n_layers,
    max_len, dropout."""
    if name != "tiny-transformer":
        raise ValueError(f"unknown language model {name!r}")
    return TinyTransformerLM(vocab_size, **kw)


# ----------------------------------------------------------------------------- layer lists

def layer_names(model: nn.Module) -> list[str]:
    """Modules that own parameters directly, in depth order (input to output)."""
    return [n for n, m in model.named_modules()
            if any(True for _ in m.parameters(recurse=False))]


def weight_layers(model: nn.Module) -> list[str]:
    """Conv and linear layers only (embeddings count too), in depth order."""
    kinds = (nn.Conv1d, nn.Conv2d, nn.Linear, nn.Embedding)
    return [n for n, m in model.named_modules() if isinstance(m, kinds)]


def middle_layers(model: nn.Module) -> list[str]:
    """Every conv except the first (3x3 and 1x1 alike); no linear, no norm layer."""
    convs = [n for n, m in model.named_modules() if isinstance(m, (nn.Conv1d, nn.Conv2d))]
    return convs[1:]


def norm_layers(model: nn.Module) -> list[str]:
    """Normalisation layers (BatchNorm, GroupNorm, LayerNorm), in depth order."""
    return [n for n, m in model.named_modules() if isinstance(m, _NORM_TYPES)]


def layer_of(key: str) -> str:
    """``'layer1.0.conv1.weight' -> 'layer1.0.conv1'`` (module of a state-dict key)."""
    return key.rsplit(".", 1)[0] if "." in key else ""


def is_norm_key(model: nn.Module) -> Callable[[str], bool]:
    """Predicate on state-dict keys: True for parameters and buffers of norm layers."""
    names = set(norm_layers(model))
    return lambda key: layer_of(key) in names

"""Models: shapes at smoke and paper scale, stable layer names and depth order."""

import pytest
import torch

from audit.fl.models import (build_lm, build_model, is_norm_key, layer_names, middle_layers,
                             norm_layers, weight_layers)


@pytest.mark.parametrize("name", ["cnn", "cnn2", "vgg", "resnet8", "resnet10"])
@pytest.mark.parametrize("c, s", [(1, 8), (3, 32)])
def test_forward_shapes(name, c, s):
    m = build_model(name, 10, c, s, width=0.25 if name == "resnet10" else 1.0)
    assert m(torch.zeros(2, c, s, s)).shape == (2, 10)


def test_resnet18_cifar_head_never_downloads():
    m = build_model("resnet18", 100, 3, 32)
    assert m.conv1.kernel_size == (3, 3) and m.conv1.stride == (1, 1)
    assert isinstance(m.maxpool, torch.nn.Identity)
    assert m(torch.zeros(1, 3, 32, 32)).shape == (1, 100)
    assert layer_names(m)[:3] == ["conv1", "bn1", "layer1.0.conv1"] and layer_names(m)[-1] == "fc"


def test_reference_cnn_matches_issue():
    m = build_model("cnn", 10, 1, 8)
    assert layer_names(m) == ["conv1", "conv2", "fc"]
    assert m.fc.in_features == 2048 and m.conv2.out_channels == 32
    assert middle_layers(m) == ["conv2"]


def test_resnet8_layer_order_and_middle():
    m = build_model("resnet8", 10, 3, 32)
    assert layer_names(m) == [
        "conv1", "bn1",
        "layer1.0.conv1", "layer1.0.bn1", "layer1.0.conv2", "layer1.0.bn2",
        "layer2.0.conv1", "layer2.0.bn1", "layer2.0.conv2", "layer2.0.bn2",
        "layer2.0.shortcut.0", "layer2.0.shortcut.1",
        "layer3.0.conv1", "layer3.0.bn1", "layer3.0.conv2", "layer3.0.bn2",
        "layer3.0.shortcut.0", "layer3.0.shortcut.1", "fc"]
    mid = middle_layers(m)
    assert "conv1" not in mid and "fc" not in mid and "layer2.0.shortcut.0" in mid
    assert len(weight_layers(m)) == 8 + 2  # 8 weight layers + 2 projection shortcuts
    assert norm_layers(m)[0] == "bn1"
    assert is_norm_key(m)("layer1.0.bn1.running_mean") and not is_norm_key(m)("fc.weight")


def test_vgg_dropout_middle_and_norm_options():
    m = build_model("vgg", 10, 1, 8, dropout_middle=0.5, norm="gn")
    assert middle_layers(m) == ["conv2", "conv3", "conv4"]
    m.eval()
    x = torch.randn(3, 1, 8, 8)
    assert torch.equal(m(x), m(x))
    with pytest.raises(ValueError, match="norm"):
        build_model("vgg", 10, 1, 8, norm="xx")


def test_tiny_transformer_lm():
    m = build_lm("tiny-transformer", vocab_size=50, d_model=32, n_heads=4, n_layers=2)
    idx = torch.randint(0, 50, (2, 16))
    out = m(idx)
    assert out.shape == (2, 16, 50)
    # causal: changing a later token does not change earlier outputs
    idx2 = idx.clone()
    idx2[:, -1] = (idx2[:, -1] + 1) % 50
    torch.testing.assert_close(m(idx2)[:, :-1], out[:, :-1])
    assert layer_names(m)[0] == "tok_emb" and layer_names(m)[-1] == "head"


def test_unknown_model():
    with pytest.raises(ValueError, match="unknown model"):
        build_model("nope", 10)

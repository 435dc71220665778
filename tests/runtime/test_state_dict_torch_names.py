"""`state_dict()` / `load_state_dict()` of converted models speak torch's names and layouts.

A converted Flax model stores Flax's names and layouts (`fc.kernel`, (in, out)); its
`state_dict()` gives the torch original's (`fc.weight`, (out, in)) and its `load_state_dict()`
takes them, through the table generated from the `params:` of mappings/layers/*.yaml into
runtime/flax/module_api.py. The Keras runtime keeps torch's names and layouts. Each check is against
torch's own answer on the same model: the same keys in the same order, the same shapes, and a
round trip (torch's state_dict -> converted `load_state_dict` -> the same outputs as torch ->
`state_dict()` equal to torch's tensors), on both targets.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from precision_transpiler import transpile
from tests.real_models import import_torchvision, load_beside, package_file, perturb_

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax, pytest.mark.needs_tf]

TARGETS = ("jax", "tf")

# the layers whose parameters Flax names or lays out otherwise, next to ones that keep torch's
# names: parameters and buffers of the model itself, a non-persistent buffer, containers, a
# parameter tied between two layers
CNN = """
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(channels)
        self.gn = nn.GroupNorm(2, channels)

    def forward(self, x):
        return torch.relu(self.gn(self.bn(self.conv(x)))) + x


class Net(nn.Module):
    def __init__(self, vocab=11, channels=4, d=6):
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, stride=2, padding=1)
        self.blocks = nn.Sequential(*[Block(channels) for _ in range(2)])
        self.up = nn.ConvTranspose2d(channels, channels, 2, stride=2)
        self.embed = nn.Embedding(vocab, d)
        self.norm = nn.LayerNorm(d)
        self.rms = nn.RMSNorm(d)
        self.proj = nn.Linear(channels, d)
        self.heads = nn.ModuleList([nn.Linear(d, 3), nn.Linear(d, 2)])
        self.unembed = nn.Linear(d, vocab, bias=False)
        self.unembed.weight = self.embed.weight  # tied: torch lists it under both names
        self.gate = nn.Parameter(torch.ones(d))
        self.register_buffer("offset", torch.zeros(d))
        self.register_buffer("cache", torch.zeros(d), persistent=False)

    def forward(self, image, tokens):
        x = self.up(self.blocks(self.stem(image))).mean(dim=(2, 3))
        h = self.proj(x)[:, None, :] + self.embed(tokens)
        h = self.rms(self.norm(h)) * self.gate + self.offset
        return torch.cat([*[head(h) for head in self.heads], self.unembed(h)], dim=-1)
"""

# layers that keep torch's names in the runtime (attention, recurrent, transformer), a module
# shared under three names (torch lists it under each), a BatchNorm-like norm with statistics
SEQUENCE = """
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, 2, batch_first=True)
        self.lstm = nn.LSTM(d, d, num_layers=2, batch_first=True)
        self.gru = nn.GRU(d, d, batch_first=True, bidirectional=True)
        self.enc = nn.TransformerEncoderLayer(2 * d, 2, dim_feedforward=16, dropout=0.0, batch_first=True)
        self.bil = nn.Bilinear(2 * d, 2 * d, 3)
        self.shared = nn.Linear(3, 3)
        self.pair = nn.ModuleList([self.shared, nn.Linear(3, 3), self.shared])
        self.conv1 = nn.Conv1d(2 * d, 3, 1)
        self.inorm = nn.InstanceNorm1d(3, affine=True, track_running_stats=True)

    def forward(self, x):
        h, _ = self.attn(x, x, x)
        h, _ = self.lstm(h)
        h, _ = self.gru(h)
        h = self.enc(h)
        y = self.bil(h, h)
        for layer in self.pair:
            y = layer(y)
        z = self.inorm(self.conv1(h.transpose(1, 2))).transpose(1, 2)
        return y + z
"""


def _build(code: str) -> Any:
    namespace: dict[str, Any] = {}
    exec(compile(code, "<model>", "exec"), namespace)
    return namespace["Net"]()


def _numpy(value: Any) -> np.ndarray:
    return value.detach().numpy() if hasattr(value, "detach") else np.asarray(value)


def _check_round_trip(model: Any, reference: Any, inputs: tuple[Any, ...]) -> None:
    """Keys, order and shapes as torch's; torch's weights loaded give torch's outputs; the
    model's state_dict() then gives torch's tensors back."""
    import torch

    torch_state = reference.state_dict()
    state = model.state_dict()
    assert list(state) == list(torch_state)
    assert [tuple(np.shape(v)) for v in state.values()] == [tuple(t.shape) for t in torch_state.values()]

    result = model.load_state_dict({k: t.numpy() for k, t in torch_state.items()}, strict=True)
    assert list(result.missing_keys) == [] and list(result.unexpected_keys) == []
    model.eval()
    with torch.no_grad():
        expected = reference(*inputs)
    got = model(*[x.numpy() for x in inputs])
    # rtol 1e-5, and the same relative to the largest output for outputs near 0 (fp32 rounding
    # differs between XLA/TensorFlow and torch kernels)
    scale = float(np.abs(expected.numpy()).max())
    np.testing.assert_allclose(_numpy(got), expected.numpy(), rtol=1e-5, atol=1e-5 * scale)

    again = model.state_dict()
    assert list(again) == list(torch_state)
    for key, tensor in torch_state.items():
        np.testing.assert_array_equal(_numpy(again[key]), tensor.numpy(), err_msg=key)


@pytest.mark.parametrize("to", TARGETS)
def test_cnn_state_dict_matches_torch(to: str) -> None:
    import torch

    reference = _build(CNN).eval()
    perturb_(reference)
    result = transpile(CNN, to=to, path="net.py")
    assert not result.errors and not result.unsupported, [d.format() for d in result.diagnostics]
    inputs = (torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(0)), torch.randint(0, 11, (2, 5)))
    _check_round_trip(_build(result.code), reference, inputs)


@pytest.mark.slow
@pytest.mark.parametrize("to", TARGETS)
def test_attention_recurrent_and_shared_modules_match_torch(to: str) -> None:
    import torch

    reference = _build(SEQUENCE).eval()
    perturb_(reference)
    result = transpile(SEQUENCE, to=to, path="net.py")
    assert not result.errors and not result.unsupported, [d.format() for d in result.diagnostics]
    _check_round_trip(_build(result.code), reference, (torch.randn(2, 5, 8),))


@pytest.mark.slow
@pytest.mark.parametrize("to", TARGETS)
def test_torchvision_resnet18_state_dict_matches_torch(to: str, converted) -> None:
    import torch

    torchvision = import_torchvision()
    original = package_file("torchvision", "models/resnet.py")
    result = converted(original, to=to)
    assert not result.errors and not result.unsupported, [d.format() for d in result.diagnostics]
    module = load_beside(result.code, "torchvision.models", f"_ptx_resnet_state_dict_{to}")
    reference = torchvision.models.resnet18(num_classes=10).eval()
    perturb_(reference, scale=0.01)
    batch = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    _check_round_trip(module.resnet18(num_classes=10), reference, (batch,))


@pytest.mark.parametrize("to", TARGETS)
def test_load_state_dict_reports_keys_as_torch_does(to: str) -> None:
    """Missing and unexpected keys: returned without `strict`, a RuntimeError naming them with
    it (torch's message); a shape mismatch raises either way, before anything is changed."""
    import torch

    reference = _build(CNN)
    model = _build(transpile(CNN, to=to, path="net.py").code)
    full = {k: t.numpy() for k, t in reference.state_dict().items()}
    partial = {k: v for k, v in full.items() if k != "proj.bias"} | {"proj.extra": np.zeros(2, "float32")}

    torch_partial = {k: torch.from_numpy(v) for k, v in partial.items()}
    torch_result = reference.load_state_dict(torch_partial, strict=False)
    result = model.load_state_dict(partial, strict=False)
    assert result.missing_keys == torch_result.missing_keys and result.missing_keys
    assert result.unexpected_keys == torch_result.unexpected_keys and result.unexpected_keys
    with pytest.raises(RuntimeError) as torch_error:
        reference.load_state_dict(torch_partial)
    with pytest.raises(RuntimeError) as error:
        model.load_state_dict(partial)
    assert str(error.value) == str(torch_error.value)

    before = {k: _numpy(v).copy() for k, v in model.state_dict().items()}
    wrong = dict(full, **{"proj.weight": np.zeros((2, 2), "float32"), "stem.bias": full["stem.bias"] + 1})
    with pytest.raises(RuntimeError, match=r"size mismatch for proj.weight: copying a param with shape \(2, 2\)"):
        model.load_state_dict(wrong, strict=False)
    after = model.state_dict()
    assert all(np.array_equal(_numpy(after[k]), before[k]) for k in before)


def test_nnx_layers_give_torch_names_and_layouts() -> None:
    """The nnx layers converted code calls directly (Linear, Conv, BatchNorm, LayerNorm, Embed,
    GroupNorm, RMSNorm) under a converted module: torch's keys, order and layouts, and torch's
    weights loaded give the Flax variables the checkpoint loader gives (and torch's outputs)."""
    import jax.numpy as jnp
    import torch
    from flax import nnx
    from torch import nn

    from precision_transpiler.runtime.flax.modules import TorchModule
    from precision_transpiler.weights import load_torch_state_dict

    class Holder(TorchModule):
        def __init__(self, rngs: nnx.Rngs) -> None:
            self.fc = nnx.Linear(4, 3, rngs=rngs)
            self.conv = nnx.Conv(3, 4, (3, 3), padding="VALID", rngs=rngs)
            self.bn = nnx.BatchNorm(4, use_running_average=True, rngs=rngs)
            self.ln = nnx.LayerNorm(4, rngs=rngs)
            self.emb = nnx.Embed(10, 4, rngs=rngs)
            self.gn = nnx.GroupNorm(4, num_groups=2, rngs=rngs)
            self.rms = nnx.RMSNorm(4, rngs=rngs)

    torch_layers = nn.ModuleDict(
        {
            "fc": nn.Linear(4, 3),
            "conv": nn.Conv2d(3, 4, 3),
            "bn": nn.BatchNorm2d(4),
            "ln": nn.LayerNorm(4),
            "emb": nn.Embedding(10, 4),
            "gn": nn.GroupNorm(2, 4),
            "rms": nn.RMSNorm(4),
        }
    )
    perturb_(torch_layers)
    torch_state = torch_layers.state_dict()
    holder = Holder(nnx.Rngs(0))
    assert list(holder.state_dict()) == list(torch_state)
    assert [tuple(v.shape) for v in holder.state_dict().values()] == [tuple(t.shape) for t in torch_state.values()]

    holder.load_state_dict(torch_state)  # torch tensors are taken as they are
    loaded = Holder(nnx.Rngs(1))
    load_torch_state_dict(loaded, torch_state)
    ours, theirs = holder.flax_state_dict(), loaded.flax_state_dict()
    assert list(ours) == list(theirs)
    for name in ours:
        np.testing.assert_array_equal(np.asarray(ours[name]), np.asarray(theirs[name]), err_msg=name)
    for key, value in holder.state_dict().items():
        np.testing.assert_array_equal(np.asarray(value), torch_state[key].numpy(), err_msg=key)

    x = torch.randn(2, 3, 6, 6)
    with torch.no_grad():
        conv = torch_layers["conv"](x).numpy()
        fc = torch_layers["fc"](x[:, 0, 0, :4]).numpy()
    nhwc = jnp.asarray(x.permute(0, 2, 3, 1).numpy())  # nnx.Conv is channels-last
    np.testing.assert_allclose(np.asarray(holder.conv(nhwc)), conv.transpose(0, 2, 3, 1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(holder.fc(jnp.asarray(x[:, 0, 0, :4].numpy()))), fc, rtol=1e-5, atol=1e-6)


def test_flax_names_stay_reachable() -> None:
    """`flax_state_dict()` / `load_flax_state_dict()`: the converted layers' own names and
    layouts, as `named_parameters()` and `named_buffers()` give them."""
    model = _build(transpile(CNN, to="jax", path="net.py").code)
    names = [n for n, _ in model.named_parameters()] + [n for n, _ in model.named_buffers()]
    flax_state = model.flax_state_dict()
    assert sorted(flax_state) == sorted(n for n in names if n != "cache")  # a non-persistent buffer
    assert "proj.kernel" in flax_state and flax_state["proj.kernel"].shape == model.state_dict()["proj.weight"].T.shape
    bumped = {k: v + 1 if k == "proj.kernel" else v for k, v in flax_state.items()}
    model.load_flax_state_dict(bumped)
    np.testing.assert_array_equal(np.asarray(model.state_dict()["proj.weight"]), np.asarray(bumped["proj.kernel"]).T)


def test_generated_table_is_current() -> None:
    """runtime/flax/module_api.py's table is what the generator writes from the YAML now."""
    from precision_transpiler.mappings.generate_param_names import TARGET, main, param_names_table, updated

    text = TARGET.read_text(encoding="utf-8")
    assert updated(text, param_names_table()) == text, (
        "run python -m precision_transpiler.mappings.generate_param_names"
    )
    assert main(["--check"]) == 0

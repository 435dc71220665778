"""The harvester's rules (benchmarks/harvest/rules.py, build.py, discover.py) on tiny modules
defined here: constructor values from parameter names and annotations, inputs from the first
parametric layer, the trivial test, and one class harvested end to end. Real torch, CPU, fast."""

from __future__ import annotations

import ast
import dataclasses
import random
import textwrap
from typing import Literal

import pytest
import torch
from torch import nn

from benchmarks.harvest.build import harvest_class
from benchmarks.harvest.discover import static_module_classes
from benchmarks.harvest.harvest import split_packages, stable
from benchmarks.harvest.rules import (
    ACTIVATION_MAKER,
    INNER_LAYER,
    NO_GUESS,
    NORM_MAKERS,
    constructor_candidates,
    first_layer,
    guess_value,
    input_candidates,
    is_trivial,
    make_inputs,
    shrink_default,
    unguessable,
)
from precision_transpiler.verify.spec import parse_input_spec

pytestmark = pytest.mark.needs_torch


class ResBlock(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size=3, dropout: float = 0.1):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.skip = nn.Conv2d(in_channels, out_channels, 1)

    def forward(self, x):
        return self.conv(x) + self.skip(x)


class Tagger(nn.Module):
    def __init__(self, vocab_size: int, dim: int, num_heads: int, depth: int = 6, hidden_dim: int = 1024):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim)
        self.layers = nn.ModuleList(nn.Linear(dim, dim) for _ in range(depth))
        self.out = nn.Linear(dim, hidden_dim)

    def forward(self, ids):
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x)
        return self.out(x)


class GraphLayer(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.lin = nn.Linear(in_channels, out_channels)

    def forward(self, x, edge_index):
        messages = self.lin(x)[edge_index[0]]
        return torch.zeros(x.shape[0], messages.shape[1]).index_add_(0, edge_index[1], messages)


class Wrapper(nn.Module):
    def __init__(self, module: nn.Module):
        super().__init__()
        self.module = module


class Scale(nn.Module):
    def __init__(self, mode: Literal["mul", "add"], factor: float):
        super().__init__()
        self.mode, self.factor = mode, factor

    def forward(self, x):
        return x * self.factor if self.mode == "mul" else x + self.factor


@pytest.mark.parametrize(
    ("name", "annotation", "expected"),
    [
        ("in_channels", int, 16),
        ("hidden_dim", int, 16),
        ("d_model", int, 16),
        ("num_heads", int, 2),
        ("dim_head", int, 16),
        ("depth", int, 1),
        ("num_layers", int, 1),
        ("kernel_size", int, 3),
        ("vocab_size", int, 32),
        ("num_embeddings", int, 32),
        ("num_classes", int, 10),
        ("dropout", float, 0.0),
        ("eps", float, 1e-5),
        ("bias", bool, False),
        ("spatial_dims", int, 2),
        ("max_seq_len", int, 32),
        ("mlp_ratio", float, 2.0),
        ("channels", "Sequence[int]", (8, 16)),
        ("mode", "Literal['a', 'b']", "a"),
        ("norm", "Optional[str]", None),
        ("sample_rate", int, 16000),
    ],
)
def test_values_follow_the_parameter_names(name, annotation, expected):
    assert guess_value(name, annotation) == expected


def test_what_no_rule_names_is_not_guessed_but_for_the_last_resort():
    assert guess_value("module", nn.Module) is NO_GUESS
    assert guess_value("fn", "Callable[..., Tensor]", 1) == INNER_LAYER  # a small layer, written as code
    assert guess_value("activation", "Callable[..., Tensor]") is NO_GUESS
    assert guess_value("weird") is NO_GUESS
    assert guess_value("weird", variant=2) == 8  # the last resort, recorded as blind
    assert unguessable(Wrapper) == []
    assert [a.expression("Wrapper") for a in constructor_candidates(Wrapper)] == ["Wrapper(nn.Linear(16, 16))"]


def test_shrinking_touches_only_large_size_defaults():
    assert shrink_default("hidden_dim", 1024) == 32
    assert shrink_default("hidden_dim", 32) is NO_GUESS
    assert shrink_default("depth", 6) == 1
    assert shrink_default("num_heads", 12) == 2
    assert shrink_default("dropout", 0.1) is NO_GUESS
    assert shrink_default("use_bias", True) is NO_GUESS


def test_constructor_candidates_are_call_expressions_defaults_first():
    expressions = [a.expression("ResBlock") for a in constructor_candidates(ResBlock)]
    assert expressions[0] == "ResBlock(16, 16)"
    assert "ResBlock(3, 8)" in expressions  # the alternative sizes
    tagger = [a.expression("Tagger") for a in constructor_candidates(Tagger)]
    assert tagger[:2] == ["Tagger(32, 16, 2)", "Tagger(32, 16, 2, depth=1, hidden_dim=32)"]
    assert constructor_candidates(nn.Identity)[0].expression("Identity") == "Identity()"


def test_inputs_come_from_the_first_parametric_layer():
    block = ResBlock(8, 4)
    assert isinstance(first_layer(block), nn.Conv2d)
    assert input_candidates(block)[0] == ["float32[1,8,16,16]"]
    tagger = Tagger(32, 16, 2)
    assert input_candidates(tagger)[0] == ["int64[1,8]<32"]
    assert ["float32[1,4,6]"] in input_candidates(nn.Sequential(nn.LayerNorm(6), nn.Linear(6, 2)))
    assert input_candidates(nn.LSTM(5, 7, batch_first=True))[0] == ["float32[1,5,5]"]
    assert input_candidates(nn.Linear(3, 2))[:2] == [["float32[1,3]"], ["float32[1,4,3]"]]


def test_further_forward_arguments_follow_their_names():
    graph = input_candidates(GraphLayer(4, 8))
    assert ["float32[8,4]", "int64[2,16]<8"] in graph
    for specs in input_candidates(GraphLayer(4, 8)):
        for spec in specs:
            parse_input_spec(spec)  # every spec is one `ptranspile verify --input` takes


def test_inputs_are_the_verifiers_arrays():
    ids, x = make_inputs(["int64[1,5]<10", "float32[2,3]"])
    assert ids.dtype == torch.int64 and ids.shape == (1, 5) and int(ids.max()) < 10
    assert x.dtype == torch.float32 and x.shape == (2, 3)


def test_trivial_means_no_parameters_and_at_most_one_submodule():
    assert is_trivial(nn.ReLU())
    assert is_trivial(nn.Sequential(nn.ReLU()))
    assert not is_trivial(nn.Sequential(nn.ReLU(), nn.Tanh()))
    assert not is_trivial(nn.Linear(2, 2))


def test_a_class_is_harvested_with_its_entry_and_inputs():
    namespace = {"ResBlock": ResBlock, "Tagger": Tagger, "GraphLayer": GraphLayer, "Scale": Scale}
    block = harvest_class(ResBlock, namespace, "ResBlock")
    assert (block.status, block.entry, block.inputs) == ("runnable", "ResBlock(16, 16)", ["float32[1,16,16,16]"])
    tagger = harvest_class(Tagger, namespace, "Tagger")
    assert tagger.status == "runnable" and tagger.inputs == ["int64[1,8]<32"]
    graph = harvest_class(GraphLayer, namespace, "GraphLayer")
    assert graph.status == "runnable" and graph.inputs[1] == "int64[2,16]<8"
    scale = harvest_class(Scale, namespace, "Scale")
    assert (scale.status, scale.entry) == ("trivial", "Scale('mul', 2.0)")
    wrapper = harvest_class(Wrapper, {"Wrapper": Wrapper, "nn": nn}, "Wrapper")
    assert (wrapper.status, wrapper.reason) == ("not buildable", "forward failed")  # Wrapper has no forward
    unbound = harvest_class(Wrapper, {"Wrapper": Wrapper}, "Wrapper")  # `nn` not bound: the layer is not written
    assert unbound.status == "not buildable" and unbound.entry == ""


def test_classes_of_a_module_that_does_not_import_are_found_from_its_syntax(tmp_path):
    source = textwrap.dedent(
        """
        import missing_dependency
        from torch import nn

        class Block(nn.Module):
            pass

        class Bigger(Block):
            class Inner(nn.Linear):
                pass

        class Config:
            pass
        """
    )
    path = tmp_path / "model.py"
    path.write_text(source)
    ast.parse(source)
    assert [name for name, _ in static_module_classes(path, {"Module", "Linear"})] == [
        "Block",
        "Bigger",
        "Bigger.Inner",
    ]


def test_the_split_is_the_rule_of_packages_yaml():
    names = [f"p{i}" for i in range(10)]
    split = split_packages(names)
    order = sorted(names)
    random.Random(2026).shuffle(order)
    assert [n for n in order if split[n] == "look"] == order[:5]
    assert split_packages(list(reversed(names))) == split


def test_details_lose_what_changes_between_machines():
    text = "/x/lib/python3.11/site-packages/timm/a.py: object at 0x7f3a2b1c9d00"
    assert stable(text) == "timm/a.py: object at 0x…"


class Reordered(nn.Module):
    """Registers its head before its stem: the forward, not the registration, says the input."""

    def __init__(self):
        super().__init__()
        self.head = nn.Linear(16, 4)
        self.stem = nn.Conv1d(3, 16, 3)

    def forward(self, x):
        return self.head(self.stem(x).mean(-1))


class Normed(nn.Module):
    def __init__(self, channels: int, normalization, activation):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.norm = normalization(channels)
        self.act = activation()

    def forward(self, x):
        return self.act(self.norm(self.conv(x)))


def test_the_layer_the_forward_reaches_first_gives_the_input():
    attempt = harvest_class(Reordered, {"Reordered": Reordered}, "Reordered")
    assert (attempt.status, attempt.inputs) == ("runnable", ["float32[1,3,16]"])


def test_norm_and_activation_makers_are_torch_nn_classes():
    assert guess_value("normalization", variant=1) == NORM_MAKERS[0]
    assert guess_value("norm_layer", "Callable[..., nn.Module]", 2) == NORM_MAKERS[1]
    assert guess_value("activation", variant=1) == ACTIVATION_MAKER
    assert guess_value("sample_shape") == ()
    attempt = harvest_class(Normed, {"Normed": Normed, "nn": nn}, "Normed")
    assert (attempt.status, attempt.entry) == ("runnable", "Normed(8, nn.BatchNorm2d, nn.ReLU)")


class FunctionNormed(nn.Module):
    """pytorchcv's way: a norm maker must be a plain function (`inspect.isfunction`), called by keyword."""

    def __init__(self, in_channels, normalization):
        super().__init__()
        import inspect

        assert inspect.isfunction(normalization)
        self.conv = nn.Conv2d(in_channels, in_channels, 3, padding=1)
        self.bn = normalization(num_features=in_channels)

    def forward(self, x):
        return self.bn(self.conv(x))


def test_a_norm_maker_may_be_a_function():
    assert guess_value("normalization", variant=3) == NORM_MAKERS[2]
    attempt = harvest_class(FunctionNormed, {"FunctionNormed": FunctionNormed, "nn": nn}, "FunctionNormed")
    assert attempt.status == "runnable", attempt.detail
    assert attempt.entry == "FunctionNormed(16, lambda *args, **kwargs: nn.BatchNorm2d(*args, **kwargs))"


class WholeNet(nn.Module):
    """A whole network whose final pooling needs the image size it states (`in_size`)."""

    def __init__(self, in_size=(160, 160)):
        super().__init__()
        self.in_size = in_size
        self.features = nn.Sequential(nn.Conv2d(3, 4, 3, stride=4, padding=1), nn.AvgPool2d(10))
        self.fc = nn.Linear(4 * 4 * 4, 2)

    def forward(self, x):
        return self.fc(self.features(x).flatten(1))


def test_a_network_stating_its_image_size_is_fed_that_size():
    assert ["float32[1,3,160,160]"] in input_candidates(WholeNet())
    attempt = harvest_class(WholeNet, {"WholeNet": WholeNet}, "WholeNet")
    assert (attempt.status, attempt.inputs) == ("runnable", ["float32[1,3,160,160]"])


@dataclasses.dataclass
class TinyConfig:
    """Plain settings a module takes whole (`config: TinyConfig`), defaults large."""

    hidden_size: int = 1152
    num_hidden_layers: int = 27
    num_attention_heads: int = 16
    layer_norm_eps: float = 1e-6


class Configured(nn.Module):
    def __init__(self, config: TinyConfig):
        super().__init__()
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.blocks = nn.ModuleList(
            nn.Linear(config.hidden_size, config.hidden_size) for _ in range(config.num_hidden_layers)
        )

    def forward(self, x):
        for block in self.blocks:
            x = block(self.norm(x))
        return x


def test_a_config_parameter_gets_its_class_built_by_the_rules_and_shrunk():
    namespace = {"Configured": Configured, "TinyConfig": TinyConfig}
    attempt = harvest_class(Configured, namespace, "Configured")
    assert attempt.status == "runnable", attempt.detail
    assert attempt.entry == "Configured(TinyConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2))"
    assert attempt.inputs[0].endswith(",32]")
    unbound = harvest_class(Configured, {"Configured": Configured}, "Configured")  # the name is not bound there
    assert unbound.status == "not buildable"


class Sliced(nn.Module):
    """Its first layer is not what the forward reads (torchdyn's Lorenz system): a 1-wide input
    slices to nothing, a wider one computes."""

    def __init__(self):
        super().__init__()
        self.unused = nn.Linear(1, 1)

    def forward(self, x):
        return x[..., 1:2] * x[..., 2:]


def test_an_input_giving_only_empty_outputs_is_not_taken():
    attempt = harvest_class(Sliced, {"Sliced": Sliced}, "Sliced")
    assert attempt.status == "runnable" and attempt.inputs != ["float32[1,1]"], attempt.inputs

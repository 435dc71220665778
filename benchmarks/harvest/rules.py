"""The harvester's rules: constructor arguments from parameter names, inputs from the first layer.

A harvested corpus is only worth something if nobody chose its cases by hand: each class is built
and fed by the same fixed rules, so the corpus measures what a first contact with unknown code
looks like. These functions are those rules, pure and small (tests/e2e/test_harvest_rules.py):

- `constructor_candidates(cls)`: a few assignments of the constructor's parameters, from its
  defaults and from small values chosen by the parameter's name and annotation (`channels` -> 16,
  `heads` -> 2, `depth` -> 1, `kernel_size` -> 3, `vocab_size` -> 32, `dropout` -> 0.0, ...), each
  as the call expression the case file records (`ResBlock(16, 16, kernel_size=3)`);
- `input_candidates(module)`: input specs in the syntax of `ptranspile verify --input`
  (`float32[1,16,32]`, `int64[1,8]<32`) from the first parametric layer found by walking the built
  module (Conv -> (1, C, L...), Linear -> (1, in) and (1, 4, in), Embedding -> ids < num, norms ->
  their normalized size), extended to every required argument of `forward` by its name;
- `is_trivial(module)`: no parameters and at most one submodule (reported, not counted in rates).
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

#: a parameter nothing could be guessed for
NO_GUESS = object()

#: how many (build, input) candidates are tried at most; a class that needs more is not harvested
MAX_INPUT_CANDIDATES = 8

_SIZE = 16  # channels, features, hidden sizes
_ALT_SIZE = 8
_SHRINK_ABOVE = 64  # a size default above this is replaced when shrinking
_SHRUNK = 32  # by this


@dataclass(frozen=True)
class Code:
    """A value written as code rather than as a literal: a small layer for a parameter that takes
    one (`nn.Linear(16, 16)`), valid where the class's module binds `nn` to torch.nn."""

    text: str

    def __repr__(self) -> str:
        return self.text


#: what a parameter that wraps a layer or a function gets (variants 1 and 2)
INNER_LAYER = Code(f"nn.Linear({16}, {16})")
#: what a parameter that makes norm layers or activations gets (variants 1, 2, then 3: a plain
#: function, for code that tells a maker from a built layer with `inspect.isfunction`)
NORM_MAKERS = (
    Code("nn.BatchNorm2d"),
    Code("nn.LayerNorm"),
    Code("lambda *args, **kwargs: nn.BatchNorm2d(*args, **kwargs)"),
)
ACTIVATION_MAKER = Code("nn.ReLU")
_CALLABLE_HINTS = ("Module", "Callable", "Type[", "type[")


@dataclass(frozen=True)
class Assignment:
    """One way to call a constructor: positional values, keyword values and a note of how the
    values were found (`defaults`, `rules`, `rules+shrink`, ...)."""

    args: tuple[Any, ...] = ()
    kwargs: tuple[tuple[str, Any], ...] = ()
    how: str = "defaults"
    blind: tuple[str, ...] = field(default=())  # parameters filled by the last-resort rule

    @property
    def needs_nn(self) -> bool:
        """Whether a value is code that names `nn` (the module must bind it to torch.nn)."""
        return any(isinstance(v, Code) and "nn." in v.text for v in (*self.args, *(v for _, v in self.kwargs)))

    def expression(self, name: str) -> str:
        """The call expression: `Name(1, 2, key=3)`; every value is a literal, so the expression
        evaluates in the namespace of the file that defines the class."""
        parts = [repr(value) for value in self.args]
        parts += [f"{key}={value!r}" for key, value in self.kwargs]
        return f"{name}({', '.join(parts)})"


def _tokens(name: str) -> list[str]:
    """`numHiddenLayers` / `num_hidden_layers` -> ['num', 'hidden', 'layers']."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return [t for t in spaced.lower().split("_") if t]


def annotation_text(annotation: Any) -> str:
    """An annotation as text, whether it is a type, a typing construct or a string (PEP 563)."""
    if annotation is inspect.Parameter.empty:
        return ""
    if isinstance(annotation, str):
        return annotation
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _literal_choice(text: str) -> Any:
    """The first value of `Literal['a', 'b']` (NO_GUESS when there is none)."""
    found = re.search(r"Literal\[(.*?)\]", text)
    if found is None:
        return NO_GUESS
    try:
        first = ast.literal_eval(f"({found.group(1)},)")[0]
    except (ValueError, SyntaxError):
        return NO_GUESS
    return first


_DROP = {"dropout", "drop", "p", "pdrop", "drop_rate", "drop_prob", "attn_drop", "proj_drop", "drop_path", "dp"}
_KERNEL = {"kernel", "ksize", "k", "kernel_size", "kernel_sizes", "kernels"}
_HEADS = {"heads", "head", "nhead", "nheads"}
_LAYERS = {"layers", "depth", "depths", "blocks", "nlayers", "nlayer", "nblocks", "repeats", "stages", "num_res"}
_VOCAB = {"vocab", "vocab_size", "num_tokens", "n_tokens", "ntoken", "ntokens", "num_embeddings", "n_vocab", "codebook"}
_CLASSES = {"classes", "nclass", "nclasses", "labels", "num_classes", "n_classes", "out_classes", "num_labels"}
_SEQ = {"seq", "len", "length", "ctx", "context", "positions", "max", "block_size", "max_position_embeddings"}
_SIZE_WORDS = {
    "dim", "dims", "channels", "channel", "hidden", "features", "feature", "feats", "feat", "embed", "embedding",
    "emb", "embd", "width", "planes", "filters", "units", "ch", "chans", "chan", "c", "d", "nf", "ngf", "ndf",
    "model", "inp", "oup", "latent", "ninp", "nhid", "size", "hid", "filter", "inplanes", "outplanes",
}  # fmt: skip
_SPATIAL = {"spatial_dims", "ndim", "ndims", "n_dim", "n_dims", "spatial_dim", "dimensions", "dimension", "dims"}
_ACTIVATION = {"activation", "act", "nonlinearity", "activation_fn", "act_fn", "act_layer", "activation_layer"}
_MODULE_WORDS = {"module", "model", "net", "network", "backbone", "encoder", "decoder", "layer", "fn", "func", "block"}


def _sequence_value(tokens: list[str], variant: int) -> Any:
    """A value for a parameter annotated as a sequence (or named in the plural)."""
    if set(tokens) & {"layers", "depths", "blocks", "repeats"}:
        return (1, 1)
    if set(tokens) & {"kernel", "kernels", "kernel_size", "kernel_sizes"}:
        return (3, 3)
    if set(tokens) & {"strides", "stride", "dilations", "dilation"}:
        return (1, 1)
    if set(tokens) & {"heads"}:
        return (2, 2)
    if variant == 2:  # per-stage lists of channels (pytorchcv and others)
        return ((_ALT_SIZE, _ALT_SIZE), (_SIZE, _SIZE))
    return (_ALT_SIZE, _SIZE) if variant == 0 else (_SIZE, _SIZE)


def _by_name(name: str, tokens: list[str], variant: int) -> Any:
    """A value from the parameter's name alone (NO_GUESS when no rule applies)."""
    words = set(tokens)
    joined = "_".join(tokens)
    if joined in _DROP or words & {"dropout", "drop"} or joined.endswith("_p"):
        return 0.0
    if joined in {"sample_rate", "sampling_rate", "sr", "samplerate", "fs"}:
        return 16000
    if words & {"fft", "nfft", "win", "window_length", "win_length"} or joined == "n_fft":
        return 64
    if words & {"hop"}:
        return 16
    if words & {"mels", "mel", "mfcc", "bands"}:
        return 16
    if words & {"eps", "epsilon"}:
        return 1e-5
    if joined in _KERNEL or "kernel" in words:
        return 3
    if words & {"stride", "dilation", "groups"}:
        return 1
    if words & {"padding", "pad"}:
        return 1
    if "patch" in words:
        return 4
    if words & {"image", "img", "resolution"} or joined == "input_resolution":
        return 32
    if "window" in words:
        return 4
    if (words & _HEADS and not words & {"dim", "size", "channels", "features"}) or joined == "num_attention_heads":
        return 2 if variant != 1 else 1
    if joined in _SPATIAL:
        return 2
    if joined in _VOCAB or words & {"vocab", "embeddings", "tokens", "codebook", "codes", "bins"}:
        return 32
    if joined in _CLASSES or words & {"classes", "labels"}:
        return 10
    if words & _LAYERS:
        return 1 if variant != 1 else 2
    if words & {"seq", "ctx", "positions", "position"} or joined in _SEQ or (words & {"max"} and words & {"len"}):
        return 32
    if words & {"ratio", "expansion", "expand", "mult", "factor", "scale", "upscale", "multiplier"}:
        return 2
    if words & {"temperature", "tau", "alpha", "beta", "gamma", "sigma", "lambda", "lam"}:
        return 1.0
    if words & {"nodes", "atoms", "points", "edges"}:
        return 8
    if words & {"groups", "group"}:
        return 2
    if words & _SIZE_WORDS or joined in {"in", "out", "n_in", "n_out"}:
        if words & {"in", "input", "inp"} and variant == 1:
            return 3
        return _SIZE if variant != 1 else _ALT_SIZE
    if tokens and tokens[0] in {"num", "n", "nb", "number"}:
        return 2
    return NO_GUESS


def _optional(text: str) -> bool:
    return text.startswith("Optional[") or text.endswith("| None") or text.startswith("None |")


def guess_value(name: str, annotation: Any = inspect.Parameter.empty, variant: int = 0) -> Any:
    """A small value for a required constructor parameter, by rule: from the annotation's kind
    (bool -> False, Literal -> its first value, Optional -> None) and then from the name (see
    `_by_name`); variant 1 tries alternative sizes, variant 2 also fills what no rule names (ints
    -> 8, strings -> 'relu' for activations). NO_GUESS when nothing applies."""
    text = annotation_text(annotation)
    tokens = _tokens(name)
    if text in ("bool", "builtins.bool"):
        return False
    choice = _literal_choice(text)
    if choice is not NO_GUESS:
        return choice
    words = set(tokens)
    maker = not text or any(w in text for w in _CALLABLE_HINTS)
    if words & {"norm", "normalization", "normalizer"} and maker and "eps" not in words:
        if variant == 2 and _optional(text):
            return None  # no norm layer at all
        return NORM_MAKERS[variant - 1] if variant else NO_GUESS  # called with the channels: a norm class
    variant = min(variant, 2)  # variant 3 differs from 2 in the norm maker only
    if words & _ACTIVATION and (maker or variant == 2) and "inplace" not in words:
        return (NO_GUESS, ACTIVATION_MAKER, "relu")[variant]
    if "_".join(tokens) in _MODULE_WORDS or (words & _MODULE_WORDS and maker):
        return INNER_LAYER if variant else NO_GUESS  # a layer or function to wrap: a small linear layer
    if tokens[-1:] == ["shape"] and not text.startswith(("int", "float", "bool", "str")):
        return () if variant != 1 else (_SIZE,)  # a batch or sample shape: () is the scalar one
    if re.search(r"\b(Sequence|List|Tuple|list|tuple|Iterable)\[", text):
        return _sequence_value(tokens, variant)
    if _optional(text):
        value = _by_name(name, tokens, variant)
        return None if value is NO_GUESS or variant == 2 else value
    value = _by_name(name, tokens, variant)
    plural = tokens[-1:] in (["channels"], ["features"], ["dims"], ["widths"], ["filters"]) and len(tokens) == 1
    if variant >= 1 and not text and plural:
        return _sequence_value(tokens, variant)  # an unannotated plural: a per-stage list
    if value is not NO_GUESS:
        if text in ("float", "builtins.float") and isinstance(value, int):
            return float(value)
        if text in ("int", "builtins.int") and isinstance(value, float):
            return NO_GUESS if value != int(value) else int(value)
        return value
    if text in ("int", "builtins.int") or (variant == 2 and text in ("", "Any")):
        return _ALT_SIZE
    if text in ("float", "builtins.float"):
        return 1.0 if variant != 2 else 0.5
    return NO_GUESS


def shrink_default(name: str, default: Any) -> Any:
    """A smaller value for a parameter whose default builds a large model (a size over 64, more
    than 2 layers, more than 4 heads, a vocabulary over 1000, an image over 64 pixels); NO_GUESS
    when the default may stay."""
    if isinstance(default, bool) or not isinstance(default, int | tuple | list):
        return NO_GUESS
    tokens = _tokens(name)
    words = set(tokens)
    if isinstance(default, tuple | list):
        ints = [v for v in default if isinstance(v, int) and not isinstance(v, bool)]
        if len(ints) != len(default) or not ints:
            return NO_GUESS
        if words & {"layers", "depths", "blocks", "repeats", "depth"} and max(ints) > 2:
            return type(default)(min(v, 1) for v in ints)
        if words & (_SIZE_WORDS - {"size"}) and max(ints) > _SHRINK_ABOVE:  # not (224, 224): an image size
            return type(default)(min(v, _SHRUNK) for v in ints)
        return NO_GUESS
    if "_".join(tokens) in {"in_size", "input_size", "size"}:
        return NO_GUESS  # an image's or a feature's size: the model's pooling may depend on it
    guess = _by_name(name, tokens, 0)
    if guess is NO_GUESS or not isinstance(guess, int) or isinstance(guess, bool):
        return NO_GUESS
    limits = [
        (words & _HEADS, 4),
        (words & _LAYERS, 2),
        (words & {"image", "img", "resolution", "patch"}, 64),
        (words & (_SIZE_WORDS | {"vocab", "embeddings", "tokens"}), _SHRINK_ABOVE),
        (words & {"seq", "ctx", "positions", "position", "len"}, 1000),
        (words & {"classes", "labels"}, 1000),
    ]
    for matched, limit in limits:
        if matched:
            if guess == _SIZE:
                guess = _SHRUNK  # a model's own width: reductions (SE blocks, heads) must stay >= 1
            return guess if default > limit else NO_GUESS
    return NO_GUESS


def _parameters(cls: type) -> list[inspect.Parameter]:
    """The constructor's parameters (without `self`); empty when there is no readable signature."""
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):
        return []
    return list(signature.parameters.values())


def _resolved(annotation: Any, cls: type) -> Any:
    """A string annotation (PEP 563) evaluated in the namespace of the module defining `cls`."""
    if not isinstance(annotation, str):
        return annotation
    module = sys.modules.get(getattr(cls, "__module__", ""))
    try:
        return eval(annotation, dict(vars(module))) if module is not None else annotation
    except Exception:
        return annotation


def config_value(annotation: Any, owner: type) -> Any:
    """A configuration object for a parameter annotated with a class of plain settings
    (`config: MoonViTConfig`, a dataclass): that class built by the same rules, its large
    defaults shrunk (`MoonViTConfig(hidden_size=32, num_hidden_layers=1)`). Written as code
    naming the class, so it builds where the module binds that name. NO_GUESS otherwise."""
    annotation = _resolved(annotation, owner)
    if not isinstance(annotation, type) or annotation.__module__ in ("builtins", "typing"):
        return NO_GUESS
    if issubclass(annotation, nn.Module | torch.Tensor) or annotation.__module__.split(".")[0] == "torch":
        return NO_GUESS
    settings = _assign(_parameters(annotation), 0, True, "config")
    if settings is None or any(isinstance(v, Code) for v in (*settings.args, *(v for _, v in settings.kwargs))):
        return NO_GUESS
    return Code(settings.expression(annotation.__name__))


def _assign(
    params: list[inspect.Parameter], variant: int, shrink: bool, how: str, owner: type | None = None
) -> Assignment | None:
    """One assignment for one variant; None when a required parameter has no guess."""
    args: list[Any] = []
    kwargs: list[tuple[str, Any]] = []
    blind: list[str] = []
    positional_open = True  # a positional value may follow only positional values
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.default is p.empty:
            value = guess_value(p.name, p.annotation, variant)
            if value is NO_GUESS and owner is not None:
                value = config_value(p.annotation, owner)
            if value is NO_GUESS:
                return None
            if variant >= 2 and guess_value(p.name, p.annotation, 0) is NO_GUESS:
                blind.append(p.name)
            if p.kind == p.POSITIONAL_ONLY or (p.kind == p.POSITIONAL_OR_KEYWORD and positional_open):
                args.append(value)
            else:
                kwargs.append((p.name, value))
            continue
        positional_open = False
        if shrink:
            smaller = shrink_default(p.name, p.default)
            if smaller is not NO_GUESS and p.kind != p.POSITIONAL_ONLY:
                kwargs.append((p.name, smaller))
    return Assignment(tuple(args), tuple(kwargs), how, tuple(blind))


def constructor_candidates(cls: type) -> list[Assignment]:
    """The assignments to try, in order, without duplicates: the defaults with the required
    parameters guessed; the same with large defaults shrunk; alternative sizes; last-resort
    values for parameters no rule names. Empty when some required parameter has no guess at all
    (the class's arguments are not guessable)."""
    params = _parameters(cls)
    plans = [
        (0, False, "rules"),
        (0, True, "rules+shrink"),
        (1, True, "alternative"),
        (2, True, "last resort"),
        (3, True, "last resort"),
    ]
    seen: set[str] = set()
    found: list[Assignment] = []
    for variant, shrink, how in plans:
        assignment = _assign(params, variant, shrink, how, owner=cls)
        if assignment is None:
            continue
        key = repr((assignment.args, assignment.kwargs))  # values may be lists (unhashable)
        if key in seen:
            continue
        seen.add(key)
        required = any(p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params)
        found.append(assignment if required or assignment.kwargs else Assignment(how="defaults"))
    return found


def unguessable(cls: type) -> list[str]:
    """The required constructor parameters for which no rule has a value."""
    return [
        p.name
        for p in _parameters(cls)
        if p.default is p.empty
        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        and all(guess_value(p.name, p.annotation, v) is NO_GUESS for v in (0, 1, 2))
        and config_value(p.annotation, cls) is NO_GUESS
    ]


# ---------------------------------------------------------------------------------------------- inputs


def float_spec(*shape: int) -> str:
    return f"float32[{','.join(map(str, shape))}]"


def int_spec(high: int, *shape: int) -> str:
    return f"int64[{','.join(map(str, shape))}]<{max(1, high)}"


def _conv_shapes(layer: nn.Module) -> list[str]:
    channels = layer.in_channels  # type: ignore[attr-defined]
    rank = len(layer.kernel_size)  # type: ignore[attr-defined]
    sides = {1: (16, 64), 2: (16, 32, 64, 128, 224), 3: (8, 16)}.get(rank, (8,))
    return [float_spec(1, channels, *([side] * rank)) for side in sides]


_RMS_TYPE: type = getattr(nn, "RMSNorm", nn.LayerNorm)


def _norm_shapes(layer: nn.Module) -> list[str]:
    if isinstance(layer, nn.LayerNorm | _RMS_TYPE):
        shape = tuple(layer.normalized_shape)  # type: ignore[attr-defined]
        return [float_spec(1, 4, *shape), float_spec(1, *shape), float_spec(1, 4, 4, *shape)]
    channels = getattr(layer, "num_features", None) or getattr(layer, "num_channels", None)
    if isinstance(layer, nn.BatchNorm1d | nn.InstanceNorm1d):
        return [float_spec(1, channels, 16), float_spec(2, channels)]
    if isinstance(layer, nn.BatchNorm3d | nn.InstanceNorm3d):
        return [float_spec(1, channels, 8, 8, 8)]
    return [float_spec(1, channels, 16, 16), float_spec(1, channels, 16), float_spec(1, channels, 8, 8, 8)]


def _recurrent_shapes(layer: nn.Module) -> list[str]:
    size = layer.input_size  # type: ignore[attr-defined]
    first = [float_spec(1, 5, size), float_spec(5, 1, size)]
    return first if layer.batch_first else first[::-1]  # type: ignore[attr-defined]


_RMS = (nn.RMSNorm,) if hasattr(nn, "RMSNorm") else ()
_LAYER_RULES: list[tuple[tuple[type, ...], Callable[[nn.Module], list[str]]]] = [
    ((nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d), _conv_shapes),
    (
        (nn.Linear, nn.Bilinear),
        lambda m: [
            float_spec(1, getattr(m, "in_features", 0) or m.in1_features),  # type: ignore[attr-defined]
            float_spec(1, 4, getattr(m, "in_features", 0) or m.in1_features),  # type: ignore[attr-defined]
            float_spec(8, getattr(m, "in_features", 0) or m.in1_features),  # type: ignore[attr-defined]
        ],
    ),
    (
        (nn.Embedding, nn.EmbeddingBag),
        lambda m: [int_spec(m.num_embeddings, 1, 8), int_spec(m.num_embeddings, 1, 4), int_spec(m.num_embeddings, 8)],  # type: ignore[attr-defined]
    ),
    ((nn.LSTM, nn.GRU, nn.RNN), _recurrent_shapes),
    (
        (nn.MultiheadAttention,),
        lambda m: [float_spec(1, 4, m.embed_dim), float_spec(4, 1, m.embed_dim)],  # type: ignore[attr-defined]
    ),
    (
        (nn.LayerNorm, nn.GroupNorm, nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, *_RMS),
        _norm_shapes,
    ),
]  # fmt: skip


def is_rule_layer(module: nn.Module) -> bool:
    """Whether an input rule knows this kind of layer."""
    return any(isinstance(module, kinds) for kinds, _ in _LAYER_RULES)


def first_layer(module: nn.Module) -> nn.Module | None:
    """The first module, in registration order (the module itself first), of a kind an input rule
    knows (conv, linear, embedding, recurrent, attention, norm layers)."""
    for sub in module.modules():
        if any(isinstance(sub, kinds) for kinds, _ in _LAYER_RULES):
            return sub
    return None


def layer_shapes(layer: nn.Module) -> list[str]:
    """The candidate specs of the first input that the given layer implies."""
    for kinds, rule in _LAYER_RULES:
        if isinstance(layer, kinds):
            return rule(layer)
    return []


def _fallback_shapes(module: nn.Module) -> list[str]:
    """Shapes for a module no layer rule covers: from its own 1-d parameters' size, else generic."""
    shapes: list[str] = []
    for param in module.parameters(recurse=False):
        if param.dim() == 1 and param.numel() > 1:
            shapes += [float_spec(1, param.numel()), float_spec(1, 4, param.numel())]
            break
    generic = [float_spec(1, 16), float_spec(1, 4, 16), float_spec(1, 3, 32, 32), float_spec(1, 16, 16, 16)]
    return [*shapes, *generic, float_spec(2)]  # last: a vector (timesteps, noise levels)


_SIZE_ATTRIBUTES = ("in_size", "input_size", "image_size", "img_size", "resolution")


def _size_hint(module: nn.Module, layer: nn.Module) -> list[str]:
    """The image size a whole network says it takes (`self.in_size = (224, 224)`, `image_size`):
    its final pooling may need exactly that. Only for a first 2-d convolution."""
    if not isinstance(layer, nn.Conv2d | nn.ConvTranspose2d):
        return []
    for name in _SIZE_ATTRIBUTES:
        value = getattr(module, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            value = (value, value)
        if isinstance(value, tuple | list) and len(value) == 2 and all(isinstance(v, int) for v in value):
            if all(4 <= v <= 512 for v in value):
                return [float_spec(1, layer.in_channels, *value)]
    return []


def forward_arguments(module: nn.Module) -> list[str] | None:
    """The names of `forward`'s required arguments, None when it takes only `*args` (one input)."""
    try:
        signature = inspect.signature(module.forward)
    except (TypeError, ValueError):
        return None
    names: list[str] = []
    for p in signature.parameters.values():
        if p.kind == p.VAR_POSITIONAL:
            return names or None
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty:
            names.append(p.name)
    return names


_GRAPH = ("edge_index", "edges", "adj_t", "senders_receivers")
_DIMS = re.compile(r"\[([^\]]*)\]")


def _dims(spec: str) -> list[int]:
    found = _DIMS.search(spec)
    return [int(d) for d in found.group(1).split(",")] if found and found.group(1) else []


def other_argument(name: str, first: str, vocab: int | None) -> str:
    """The spec of a further required argument of forward, by its name, given the first input's
    spec: graph edges, timesteps, masks, token ids, else the first input's own spec."""
    dims = _dims(first)
    tokens = set(_tokens(name))
    batch = dims[0] if dims else 1
    if name in _GRAPH:
        return int_spec(batch, 2, 16)
    if name in ("batch", "batch_index", "graph_index"):
        return int_spec(1, batch)
    if tokens & {"t", "time", "timestep", "timesteps", "sigma", "sigmas", "noise", "level"} and len(tokens) <= 2:
        return float_spec(batch)
    if tokens & {"mask"}:
        return f"bool[{','.join(map(str, dims[:2]))}]"
    if tokens & {"ids", "tokens", "labels", "indices", "target", "targets", "y", "tags", "tag"} and vocab:
        return int_spec(vocab, *dims[: max(1, len(dims) - 1)])
    return first


def input_candidates(
    module: nn.Module, layer: nn.Module | None = None, limit: int = MAX_INPUT_CANDIDATES
) -> list[list[str]]:
    """Candidate input lists for the module's forward, best first: the first input from the first
    parametric layer (or the `layer` given; else the fallback shapes), every further required
    argument of forward by its name (`other_argument`)."""
    layer = layer if layer is not None else first_layer(module)
    firsts = layer_shapes(layer) if layer is not None else []
    firsts += [s for s in (_size_hint(module, layer) if layer is not None else []) if s not in firsts]
    firsts += [s for s in _fallback_shapes(module) if s not in firsts]
    names = forward_arguments(module)
    vocab = getattr(layer, "num_embeddings", None)
    found: list[list[str]] = []
    if names and any(n in _GRAPH for n in names[1:]):  # node features first: (nodes, features)
        firsts.sort(key=lambda spec: _dims(spec)[:1] == [1])
    for first in firsts:
        if names is None or len(names) <= 1:
            found.append([first])
        else:
            found.append([first, *(other_argument(n, first, vocab) for n in names[1:])])
    return found[:limit]


def is_trivial(module: nn.Module) -> bool:
    """No parameters and at most one submodule: a wrapper or a function in module form, reported
    but not counted in the rates."""
    has_params = any(True for _ in module.parameters())
    submodules = sum(1 for _ in module.modules()) - 1
    return not has_params and submodules <= 1


def make_inputs(specs: list[str], seed: int = 0) -> list[torch.Tensor]:
    """Tensors for the specs, the same values `ptranspile verify` feeds (its seeded NumPy arrays)."""
    import numpy as np

    from precision_transpiler.verify.spec import parse_input_spec

    rng = np.random.default_rng(seed)
    return [torch.from_numpy(parse_input_spec(s).make(rng)) for s in specs]


def tensors_in(value: Any) -> Iterator[torch.Tensor]:
    """The tensors of a forward's output (nested tuples, lists, dicts, dataclass-like objects)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors_in(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from tensors_in(item)
    elif hasattr(value, "__dict__") and not isinstance(value, nn.Module | type):
        for item in vars(value).values():
            yield from tensors_in(item)

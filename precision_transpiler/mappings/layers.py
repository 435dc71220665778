"""The layer table (`kind: layers`, mappings/layers/*.yaml): torch.nn layers and their
counterparts in other frameworks, and the layers listed `unsupported:` with the reason. See the
header of mappings/layers/torch_nn.yaml.
"""

from __future__ import annotations

import ast
import keyword
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from precision_transpiler.mappings.model import MappingSet

_TARGET_KEYS = (
    "call",
    "shim",
    "args",
    "keywords",
    "defaults",
    "drop",
    "reference",
    "rngs",
    "attributes",
    "torch_attributes",
    "sizes",
    "sized_init",
)
#: how a torch parameter's array becomes the target's (mappings/layers/torch_nn.yaml's header);
#: precision_transpiler/weights/torch_to_flax.py implements each
LAYOUTS = ("same", "transposed", "conv_kernel", "conv_transpose_kernel")
#: torch code reading a renamed parameter (`self.fc.weight`) gets this, per layout
_ATTRIBUTE_READS = {"same": "{{layer}}.{name}[...]", "transposed": "{{layer}}.{name}[...].T"}


@dataclass(frozen=True)
class ParamLayout:
    """Where the target keeps one torch parameter or buffer: `name` in `layout`, or nowhere
    (`name` None: the torch entry is accepted and dropped when loading weights)."""

    name: str | None
    layout: str = "same"


@dataclass(frozen=True)
class SignatureParam:
    name: str
    default: str | None  # source text of the default, None when required


@dataclass(frozen=True)
class LayerTarget:
    call: str | None = None  # a direct counterpart (bind the signature, emit args/keywords)
    shim: str | None = None  # a torch-signature class (keep the arguments)
    args: tuple[str, ...] = ()
    keywords: dict[str, str] = field(default_factory=dict)  # target keyword -> torch parameter
    defaults: dict[str, str] = field(default_factory=dict)  # target keyword -> code when not given
    drop: frozenset[str] = frozenset()
    reference: str | None = None  # class used where the layer is passed around, not called
    rngs: bool = True  # Flax NNX only: the table's default is True for `jax` targets, False for others
    # torch attribute read from the layer -> target expression, `{layer}` standing for the layer
    # (`weight: "{layer}.kernel[...].T"`: torch code that reads `self.fc.weight`)
    attributes: dict[str, str] = field(default_factory=dict)
    # torch attributes the direct `call` class lacks and the `reference` class has (Embedding's
    # `embedding_dim`): a file that reads one gets the reference class
    torch_attributes: frozenset[str] = frozenset()
    # torch parameters that size a weight, which torch lets be 0 (`nn.Linear(16, 0)`, whose init it
    # skips) and the `call` class's default initializer does not (JAX's divide by the fan): a call
    # whose sizes are not all positive integer literals gets `sized_init`, target keyword -> the
    # initializer that also builds an empty weight
    sizes: tuple[str, ...] = ()
    sized_init: dict[str, str] = field(default_factory=dict)

    @property
    def class_symbol(self) -> str:
        """What a bare reference to the layer class becomes."""
        return self.reference or self.shim or self.call or ""


@dataclass(frozen=True)
class LayerSpec:
    symbol: str
    signature: tuple[SignatureParam, ...]
    targets: dict[str, LayerTarget]
    origin: str


def parse_signature(text: str) -> tuple[SignatureParam, ...]:
    """`"in_features, out_features, bias=True"` -> parameters (parsed as a Python def)."""
    tree = ast.parse(f"def f({text}): pass")
    func = tree.body[0]
    assert isinstance(func, ast.FunctionDef)
    args = func.args.args
    defaults = [None] * (len(args) - len(func.args.defaults)) + [ast.unparse(d) for d in func.args.defaults]
    return tuple(SignatureParam(a.arg, d) for a, d in zip(args, defaults, strict=True))


def is_qualified(value: Any) -> bool:
    """`module.Name`: dotted identifiers (what the rewriter turns into an attribute chain)."""
    return isinstance(value, str) and all(
        part.isidentifier() and not keyword.iskeyword(part) for part in value.split(".")
    )


def _params(raw: Any, where: Any, line: int, ctx: str) -> dict[str, ParamLayout]:
    """One class of the `params:` section: `torch name: target name | {name, layout} | null`."""
    if not hasattr(raw, "items"):
        raise where.error(line, ctx, "expected torch name: target name (or {name, layout}, or null) pairs")
    params: dict[str, ParamLayout] = {}
    for torch_name, value in raw.items():
        if value is None:
            params[str(torch_name)] = ParamLayout(None)
            continue
        if isinstance(value, str):
            value = {"name": value}
        if not hasattr(value, "items") or set(value) - {"name", "layout"} or not isinstance(value.get("name"), str):
            raise where.error(line, f"{ctx}.{torch_name}", "expected a target name or {name, layout}")
        layout = value.get("layout", "same")
        if layout not in LAYOUTS:
            raise where.error(
                line, f"{ctx}.{torch_name}.layout", f"expected one of {', '.join(LAYOUTS)}, got {layout!r}"
            )
        if not str(value["name"]).isidentifier():
            raise where.error(line, f"{ctx}.{torch_name}.name", f"{value['name']!r} is not an attribute name")
        params[str(torch_name)] = ParamLayout(str(value["name"]), str(layout))
    return params


def _implied_attributes(params: dict[str, ParamLayout]) -> dict[str, str]:
    """What torch code reading a renamed parameter gets, where the layout says it."""
    return {
        torch_name: _ATTRIBUTE_READS[p.layout].format(name=p.name)
        for torch_name, p in params.items()
        if p.name is not None and p.name != torch_name and p.layout in _ATTRIBUTE_READS
    }


def layers_handler(result: MappingSet, data: Any, where: Any) -> None:
    """Validate a `kind: layers` table and merge it into `result.layers`."""
    zoo = data.get("zoo")
    if zoo is not None:
        if not hasattr(zoo, "items"):
            raise where.error(data.line, "zoo", "expected a mapping of calls/decorators/bases: [names]")
        for key, names in zoo.items():
            if key not in ("calls", "decorators", "bases", "names"):
                raise where.error(data.line, f"zoo.{key}", "expected one of calls, decorators, bases, names")
            result.zoo.setdefault(str(key), []).extend(str(n) for n in names)
    params = data.get("params")
    if params is not None:  # first: a `call` target's attribute reads follow from its class's params
        if not hasattr(params, "items"):
            raise where.error(data.line, "params", "expected target class: {torch name: ...} pairs")
        for cls, spec in params.items():
            line = params.lines.get(cls, data.line)
            if not is_qualified(cls):
                raise where.error(line, f"params.{cls}", f"{cls!r} is not a qualified name")
            result.layer_params[str(cls)] = _params(spec, where, line, f"params.{cls}")
    symbols = data.get("symbols")
    if symbols is not None:
        if not hasattr(symbols, "items"):
            raise where.error(data.line, "symbols", "expected symbol: {framework: target} pairs")
        for symbol, per_fw in symbols.items():
            if not hasattr(per_fw, "items"):
                raise where.error(
                    symbols.lines.get(symbol, data.line), f"symbols.{symbol}", "expected framework: target"
                )
            entry = {str(k): str(v) for k, v in per_fw.items()}
            positional = entry.pop("positional", None)
            if positional is not None:
                result.symbol_positional[str(symbol)] = positional
            result.layer_symbols.setdefault(str(symbol), {}).update(entry)
    _namespaces(result, data, where)
    layers = data.get("layers")
    if layers is None and (symbols is not None or params is not None or "unsupported" in data):
        _unsupported(result, data, where)
        return  # a table of symbols, params or unsupported layers only (mappings/layers/transformers.yaml)
    if not hasattr(layers, "items"):
        raise where.error(data.line, "layers", "expected a mapping of torch layer symbols")
    for symbol, spec in layers.items():
        line = layers.lines.get(symbol, data.line)
        ctx = f"layers.{symbol}"
        if not hasattr(spec, "items"):
            raise where.error(line, ctx, "expected a mapping")
        signature: tuple[SignatureParam, ...] = ()
        if "signature" in spec:
            try:
                signature = parse_signature(str(spec["signature"]))
            except SyntaxError:
                raise where.error(line, f"{ctx}.signature", "not a Python parameter list") from None
        targets: dict[str, LayerTarget] = {}
        for fw, raw in spec.items():
            if fw == "signature":
                continue
            if not hasattr(raw, "items"):
                raise where.error(line, f"{ctx}.{fw}", "expected a mapping")
            unknown = set(raw) - set(_TARGET_KEYS)
            if unknown:
                raise where.error(line, f"{ctx}.{fw}", f"unknown key(s) {sorted(unknown)} (allowed: {_TARGET_KEYS})")
            if ("call" in raw) == ("shim" in raw):
                raise where.error(line, f"{ctx}.{fw}", "give exactly one of 'call' or 'shim'")
            for key in ("call", "shim"):
                if key in raw and not is_qualified(raw[key]):
                    raise where.error(line, f"{ctx}.{fw}.{key}", f"{raw[key]!r} is not a qualified name")
            names = {p.name for p in signature}
            keywords = {str(k): str(v) for k, v in dict(raw.get("keywords", {})).items()}
            args = tuple(str(a) for a in raw.get("args", ()))
            drop = frozenset(str(d) for d in raw.get("drop", ()))
            if "call" in raw:
                if not signature:
                    raise where.error(line, ctx, "a 'call' mapping needs the torch 'signature'")
                for used in (*args, *keywords.values(), *drop, *raw.get("sizes", ())):
                    if used not in names:
                        raise where.error(line, f"{ctx}.{fw}", f"{used!r} is not a parameter of the signature")
            sized_init = {str(k): str(v) for k, v in dict(raw.get("sized_init", {})).items()}
            if bool(sized_init) != bool(raw.get("sizes")) or not all(map(is_qualified, sized_init.values())):
                raise where.error(line, f"{ctx}.{fw}", "'sizes' needs 'sized_init' (keyword: qualified name), and back")
            params = result.layer_params.get(str(raw.get("call")), {})
            attributes = {str(k): str(v) for k, v in dict(raw.get("attributes", {})).items()}
            targets[str(fw)] = LayerTarget(
                call=raw.get("call"),
                shim=raw.get("shim"),
                args=args,
                keywords=keywords,
                defaults={str(k): str(v) for k, v in dict(raw.get("defaults", {})).items()},
                drop=drop,
                reference=raw.get("reference"),
                rngs=bool(raw.get("rngs", str(fw) == "jax")),  # Keras layers take no rngs
                attributes={**_implied_attributes(params), **attributes},
                torch_attributes=frozenset(str(a) for a in raw.get("torch_attributes", ())),
                sizes=tuple(str(a) for a in raw.get("sizes", ())),
                sized_init=sized_init,
            )
        result.layers[str(symbol)] = LayerSpec(str(symbol), signature, targets, f"{where.path}:{line}")
    _unsupported(result, data, where)


def _namespaces(result: MappingSet, data: Any, where: Any) -> None:
    """The `namespaces:` section: `module: {members: [names], partial: reason}`."""
    namespaces = data.get("namespaces")
    if namespaces is None:
        return
    if not hasattr(namespaces, "items"):
        raise where.error(data.line, "namespaces", "expected module: {members: [...]} pairs")
    for module, spec in namespaces.items():
        line = namespaces.lines.get(module, data.line)
        ctx = f"namespaces.{module}"
        if not is_qualified(module):
            raise where.error(line, ctx, f"{module!r} is not a qualified name")
        members = spec.get("members") if hasattr(spec, "get") else None
        if not isinstance(members, list) or not all(str(m).isidentifier() for m in members):
            raise where.error(line, f"{ctx}.members", "expected a list of member names")
        unknown = set(spec) - {"members", "partial"}
        if unknown:
            raise where.error(line, ctx, f"unknown key {sorted(unknown)[0]!r} (allowed: members, partial)")
        partial = spec.get("partial")
        from precision_transpiler.mappings.model import NamespaceSpec

        result.namespaces[str(module)] = NamespaceSpec(
            tuple(str(m) for m in members), None if partial is None else str(partial)
        )


def _unsupported(result: MappingSet, data: Any, where: Any) -> None:
    """The `unsupported:` section: `symbol: reason` (every target) or `symbol: {framework: reason}`.
    A layer listed for a target it is also mapped to is an error (which one would the converter use?)."""
    unsupported = data.get("unsupported")
    if unsupported is None:
        return
    if not hasattr(unsupported, "items"):
        raise where.error(data.line, "unsupported", "expected symbol: reason (or {framework: reason}) pairs")
    for symbol, value in unsupported.items():
        line = unsupported.lines.get(symbol, data.line)
        ctx = f"unsupported.{symbol}"
        if not is_qualified(symbol):
            raise where.error(line, ctx, f"{symbol!r} is not a qualified name")
        reasons = {"*": value} if isinstance(value, str) else value
        if not hasattr(reasons, "items") or not all(isinstance(r, str) and r.strip() for r in reasons.values()):
            raise where.error(line, ctx, "expected a reason (a non-empty string) or {framework: reason}")
        spec = result.layers.get(str(symbol))
        for fw in reasons:
            if spec is not None and ((fw == "*" and spec.targets) or fw in spec.targets):
                raise where.error(line, ctx, f"the layer is mapped to {fw!r} in layers: as well")
        result.layer_unsupported.setdefault(str(symbol), {}).update({str(k): str(v) for k, v in reasons.items()})

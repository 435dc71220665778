"""Typed, indexed view of the merged mapping tables."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from precision_transpiler.mappings.patterns import Pattern

#: Frameworks a file can be converted from and to.
FRAMEWORKS: tuple[str, ...] = ("torch", "jax", "tf", "numpy")


@dataclass(frozen=True)
class ImportHelper:
    """A library function that imports a module named by a string (frameworks.yaml
    `import_helpers`): where the module's name and the attribute's name are passed, and whether
    it returns the object (`value`) or an (object, found) pair (`pair`)."""

    module_position: int | None = 0
    module_keyword: str | None = "module"
    name_keyword: str | None = None
    returns: str = "value"


@dataclass(frozen=True)
class FrameworkInfo:
    """One framework of mappings/frameworks.yaml (the file's header explains each field)."""

    name: str
    display: str
    roots: tuple[str, ...]
    imports: dict[str, str]  # module -> preferred alias
    companions: tuple[str, ...] = ()  # other modules its emitted code uses
    module_bases: tuple[str, ...] = ()  # base classes of user modules, under every import name
    layer_namespaces: tuple[str, ...] = ()  # where layer classes live
    not_layers: tuple[str, ...] = ()  # names (or namespaces) there that are not layer classes
    model_bases: tuple[str, ...] = ()  # base classes of whole models
    model_calls: tuple[str, ...] = ()  # calls that build a whole model from layers
    sequential_calls: tuple[str, ...] = ()  # calls that build a sequential container
    operators: dict[str, str] = field(default_factory=dict)  # "+" -> function with torch's promotion
    #: keyword -> the keyword it stands for in this framework's calls (torch's `axis` for `dim`)
    keyword_aliases: dict[str, str] = field(default_factory=dict)
    #: the function that makes an array of a variable or an array (`jnp.asarray`)
    as_array: str | None = None
    #: internal namespace -> the public one that re-exports its classes (`torch.nn.modules` ->
    #: `torch.nn`: `nn.modules.PReLU` and `torch.nn.modules.activation.PReLU` are `torch.nn.PReLU`)
    reexports: dict[str, str] = field(default_factory=dict)
    #: namespace -> the namespace it is another name of, for every member (`torch.torch` is
    #: `torch`: kornia's `isinstance(x, torch.torch.Tensor)`)
    namespace_aliases: dict[str, str] = field(default_factory=dict)
    #: functions that import a module named by a string (monai's `optional_import`):
    #: convert/import_helpers.py writes their calls as import statements
    import_helpers: dict[str, ImportHelper] = field(default_factory=dict)

    def public_name(self, qualified: str) -> str:
        """`qualified` under the public namespace that re-exports it (a class: a capitalised
        last part, in the internal namespace or one of its modules), else as it is; a name under a
        namespace alias (`torch.torch.Tensor`) under the namespace it names."""
        for alias, namespace in self.namespace_aliases.items():
            if qualified.startswith(alias + "."):
                qualified = namespace + qualified[len(alias) :]
        for internal, public in self.reexports.items():
            if qualified.startswith(internal + "."):
                last = qualified.rsplit(".", 1)[1]
                if last[:1].isupper() and qualified not in self.module_bases:
                    return f"{public}.{last}"
        return qualified

    def is_module_base(self, qualified: str | None) -> bool:
        """`torch.nn.Module` (under any of its names) for torch."""
        return qualified is not None and qualified in self.module_bases

    def is_layer_class(self, qualified: str | None) -> bool:
        """A layer class of the framework (`torch.nn.Conv2d`, `flax.nnx.Linear`, a runtime
        class): a capitalised name under `layer_namespaces`, not a module base nor excluded.
        The one place the converters and policies tell a layer class from a function."""
        if not qualified or qualified in self.module_bases:
            return False
        if any(qualified == n or qualified.startswith(n + ".") for n in self.not_layers):
            return False
        if not any(qualified.startswith(n + ".") for n in self.layer_namespaces):
            return False
        return qualified.rsplit(".", 1)[1][:1].isupper()


@dataclass(frozen=True)
class OpSpec:
    """One operation and its patterns in each framework."""

    name: str
    summary: str
    params: dict[str, str]  # parameter -> kind (any | dtype | device | tensor | int | ints)
    drop: frozenset[str]
    patterns: dict[str, tuple[Pattern, ...]]  # framework -> patterns, first is emitted first
    origin: str  # "file:line" for messages
    warn_if_missing: dict[str, str] = field(default_factory=dict)  # parameter -> warning text
    warn: str | None = None  # said whenever the op is converted between frameworks
    #: say each of the op's warnings only at its first conversion in a file (`torch.arange`'s
    #: int64 note would otherwise repeat on every line that builds an index)
    once: bool = False
    #: framework -> why the op has no pattern there (said instead of a bare "no mapping")
    unsupported: dict[str, str] = field(default_factory=dict)
    #: what the result holds when that is not its input's dtype: "int" (indices, counts, integer
    #: ranges: `torch.argmax`, `torch.arange(n)`; a float argument or a `dtype` overrides it)
    returns: str | None = None
    #: draws from torch's global random generator: JAX has none, so the op-pattern rule passes
    #: the emitted runtime function the key source in reach (`rngs=rngs` while building layers,
    #: `rngs=self` in a module's methods; runtime/flax/rng.py)
    draws: bool = False


@dataclass(frozen=True)
class NamespaceSpec:
    """A torch module that model code reads as a value (`getattr(nn, act_layer)()`,
    `vars(torch.nn.modules.activation)`): the members a converted namespace carries."""

    members: tuple[str, ...]
    #: why the converted namespace holds fewer members than torch's, said where one is built
    partial: str | None = None


@dataclass(frozen=True)
class NotDerived:
    """The runtime counterparts a precision class leaves out of its derived entries
    (mappings/precision_classes.py): per target, the torch symbols whose counterparts stay out,
    or None for all of them."""

    targets: dict[str, frozenset[str] | None]
    origin: str  # "file:line" for messages


@dataclass(frozen=True)
class Surface:
    """What a framework offers model code, by name (mappings/torch_surface.yaml): what the
    converter must recognise where no table maps it."""

    tensor_methods: frozenset[str]
    module_methods: frozenset[str]
    #: qualified prefix -> why calls under it have no counterpart (training, I/O, ...)
    outside_models: dict[str, str]
    #: top-level packages known to be built on the framework, installed here or not (fairscale, timm)
    packages: frozenset[str] = frozenset()
    #: GPU kernel libraries (triton, flash_attn): a module importing one at load is an optional
    #: accelerated path, which a package imports only inside the function that takes it
    kernel_packages: frozenset[str] = frozenset()

    def outside_model(self, qualified: str) -> str | None:
        """Why `qualified` belongs outside a converted model, or None."""
        for prefix, reason in self.outside_models.items():
            if qualified == prefix or qualified.startswith(prefix if prefix.endswith("_") else prefix + "."):
                return reason
        return None


@dataclass
class MappingSet:
    """All tables, merged. Built by `load_mappings`; treat as read-only."""

    frameworks: dict[str, FrameworkInfo] = field(default_factory=dict)
    dtype_canonical: tuple[str, ...] = ()
    dtype_symbols: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    dtype_strings: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    keras_policies: dict[str, dict[str, str]] = field(default_factory=dict)
    #: framework -> its dtype symbols no canonical dtype stands for (`torch.complex32`)
    dtype_without_equivalent: dict[str, frozenset[str]] = field(default_factory=dict)
    ops: dict[str, OpSpec] = field(default_factory=dict)
    #: precision op class -> framework -> qualified symbols (`Tensor.x` for methods); the
    #: runtime's definitions derived from the torch ones (mappings/precision_classes.py)
    precision_classes: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    #: precision op class -> the runtime counterparts its table keeps out of the derivation
    precision_not_derived: dict[str, NotDerived] = field(default_factory=dict)
    #: torch layer symbol -> LayerSpec (mappings/layers/*.yaml)
    layers: dict[str, Any] = field(default_factory=dict)
    #: model-zoo names dropped when converting between frameworks: {"calls"|"decorators"|"bases": [...]}
    zoo: dict[str, list[str]] = field(default_factory=dict)
    #: target class -> torch parameter/buffer name -> ParamLayout (the layer tables' `params:`)
    layer_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: other torch symbols with a direct counterpart: symbol -> framework -> target symbol
    layer_symbols: dict[str, dict[str, str]] = field(default_factory=dict)
    #: symbol -> the torch keyword its counterparts take as their first positional argument
    #: (`nn.Parameter(data=t)` -> `nnx.Param(t)`: Flax names it `value`)
    symbol_positional: dict[str, str] = field(default_factory=dict)
    #: layers with no counterpart and why (the layer tables' `unsupported:`): symbol -> framework
    #: (or "*" for every framework) -> reason
    layer_unsupported: dict[str, dict[str, str]] = field(default_factory=dict)
    #: torch modules read as values: qualified module -> NamespaceSpec (the layer tables' `namespaces:`)
    namespaces: dict[str, NamespaceSpec] = field(default_factory=dict)
    sources: list[Path] = field(default_factory=list)
    #: in-place methods whose op is derived from the out-of-place method's (`triu_` from `triu`),
    #: with the "file:line" that lists them (registry._derive_inplace)
    derived_inplace: dict[str, str] = field(default_factory=dict)
    #: framework -> Surface (mappings/*_surface.yaml)
    surfaces: dict[str, Surface] = field(default_factory=dict)
    #: per-process caches that rules build from the tables (indexes); not part of the data
    caches: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    # -- indexes -------------------------------------------------------------------------------

    def unsupported_layer(self, symbol: str | None, framework: str) -> str | None:
        """Why layer `symbol` has no counterpart in `framework` (the layer tables' `unsupported:`), or None."""
        reasons = self.layer_unsupported.get(symbol or "")
        return None if reasons is None else reasons.get(framework, reasons.get("*"))

    @cached_property
    def symbol_to_dtype(self) -> dict[str, tuple[str, str]]:
        """Qualified symbol -> (framework, canonical dtype)."""
        index: dict[str, tuple[str, str]] = {}
        for fw, table in self.dtype_symbols.items():
            for canon, spellings in table.items():
                for spelling in spellings:
                    index.setdefault(spelling, (fw, canon))
        return index

    @cached_property
    def all_roots(self) -> frozenset[str]:
        """Every top-level module a pattern or dtype symbol may name."""
        roots = {r for info in self.frameworks.values() for r in info.roots}
        roots |= {m.split(".")[0] for info in self.frameworks.values() for m in info.imports}
        roots |= {s.split(".")[0] for s in self.symbol_to_dtype}
        return frozenset(roots)

    @cached_property
    def root_to_framework(self) -> dict[str, str]:
        return {root: info.name for info in self.frameworks.values() for root in info.roots}

    def framework_of(self, qualified: str) -> str | None:
        return self.root_to_framework.get(qualified.split(".", 1)[0])

    def dtype_symbol(self, framework: str, canon: str) -> str | None:
        spellings = self.dtype_symbols.get(framework, {}).get(canon)
        return spellings[0] if spellings else None

    def string_to_dtype(self, framework: str, text: str) -> str | None:
        """Canonical dtype a string spelling means in `framework` (None if it means none)."""
        if framework == "torch":  # torch takes no strings: read them the way NumPy-likes spell names
            framework = "jax"
        for canon, spellings in self.dtype_strings.get(framework, {}).items():
            if text in spellings:
                return canon
        if text in self.dtype_canonical:
            return text
        return None

    def dtype_string(self, framework: str, canon: str) -> str | None:
        spellings = self.dtype_strings.get(framework, {}).get(canon)
        return spellings[0] if spellings else None

    @cached_property
    def symbol_to_precision_class(self) -> dict[str, dict[str, str]]:
        """Framework -> qualified symbol (or `Tensor.name`) -> precision op class."""
        index: dict[str, dict[str, str]] = {}
        for cls, per_fw in self.precision_classes.items():
            for fw, symbols in per_fw.items():
                for symbol in symbols:
                    index.setdefault(fw, {}).setdefault(symbol, cls)
        return index

    def integer_results(self, framework: str) -> tuple[frozenset[str], frozenset[str]]:
        """(qualified functions, method names) of `framework` whose result holds integers: the
        patterns of ops with `returns: int`, and patterns that bind `dtype` to an integer type
        (`{x}.long()`)."""
        key = f"integer-results:{framework}"
        if key not in self.caches:
            functions: set[str] = set()
            methods: set[str] = set()
            for op in self.ops.values():
                for pattern in op.patterns.get(framework, ()):
                    bound = pattern.bind.get("dtype")
                    if op.returns == "int" or (isinstance(bound, str) and bound.startswith(("int", "uint"))):
                        if pattern.method_name:
                            methods.add(pattern.method_name)
                        elif pattern.function_name:
                            functions.add(pattern.function_name)
            self.caches[key] = (frozenset(functions), frozenset(methods))
        return self.caches[key]

    def converted_symbols(self, source: str, target: str) -> frozenset[str]:
        """Qualified names of `source` the tables convert to `target`: functions of op patterns
        with a `target` pattern, layer classes and symbols with a `target` entry, and every
        module above one of them (`torch.nn.functional`, `torch.compiler`)."""
        key = f"converted-symbols:{source}:{target}"
        if key not in self.caches:
            names: set[str] = set()
            for op in self.ops.values():
                if op.patterns.get(target):
                    names.update(p.function_name for p in op.patterns.get(source, ()) if p.function_name)
            names.update(s for s, per in self.layer_symbols.items() if target in per)
            names.update(s for s, spec in self.layers.items() if target in spec.targets)
            modules = {name.rsplit(".", i)[0] for name in names for i in range(1, name.count(".") + 1)}
            self.caches[key] = frozenset(names | modules)
        return self.caches[key]

    def converts(self, qualified: str, source: str, target: str) -> bool:
        """Whether the tables convert the `source` name `qualified` to `target`: among
        `converted_symbols` and not outside a model (`torch._dynamo`)."""
        surface = self.surfaces.get(source)
        outside = surface is not None and surface.outside_model(qualified) is not None
        return qualified in self.converted_symbols(source, target) and not outside

    @cached_property
    def method_names(self) -> dict[str, frozenset[str]]:
        """Framework -> names of tensor methods that some pattern recognises."""
        result: dict[str, set[str]] = {}
        for op in self.ops.values():
            for fw, patterns in op.patterns.items():
                for pattern in patterns:
                    if pattern.method_name and not pattern.emit_only:
                        result.setdefault(fw, set()).add(pattern.method_name)
        return {fw: frozenset(names) for fw, names in result.items()}

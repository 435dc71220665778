"""Which classes are models and which functions build layers, in a torch model file.

Flax NNX layers take an `rngs` argument; torch layers do not. To convert a file, every function
that (directly or through other functions) constructs a layer must receive `rngs` and pass it
on. This module finds them statically, on Python's `ast`, with a fixpoint over the file:

* module classes: classes deriving from `torch.nn.Module`, from a torch layer class
  (`nn.Sequential`), or from another module class of the file;
* builders: `__init__` of module classes, and functions or methods whose body calls a torch
  layer, a module class, another builder, or a *layer factory* (a parameter or local that holds
  a layer class: `norm_layer = nn.BatchNorm2d`, `block: Type[BasicBlock]`, `partial(...)`).
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

import libcst as cst

from precision_transpiler.analysis.view import FileView
from precision_transpiler.mappings.model import FrameworkInfo
from precision_transpiler.mappings.registry import load_mappings
from precision_transpiler.syntax import dotted_name

_FACTORY_SUFFIXES = ("_layer", "layer", "block", "Block", "_cls", "_module", "norm", "act", "activation")


def _torch() -> FrameworkInfo:
    """torch as mappings/frameworks.yaml describes it (module bases, where layer classes live)."""
    return load_mappings().frameworks["torch"]


@functools.cache
def _mapped_roots() -> frozenset[str]:
    """Top-level packages the tables map (frameworks, einops, transformers): converted through
    the tables, never as user code."""
    table = load_mappings()
    return frozenset(table.all_roots | {s.split(".")[0] for s in (*table.layers, *table.layer_symbols)})


def is_layer_symbol(qualified: str | None) -> bool:
    """`torch.nn.Conv2d` and friends: torch's layer classes (not Module/Parameter/functions)."""
    return _torch().is_layer_class(qualified)


def is_module_base(qualified: str | None) -> bool:
    """`torch.nn.Module`, under any name it is importable as."""
    return _torch().is_module_base(qualified)


def dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


@dataclass
class ModelAnalysis:
    module_classes: set[str] = field(default_factory=set)
    builders: set[str] = field(default_factory=set)  # "func" or "Class.method"
    public: set[str] = field(default_factory=set)  # builders that get `rngs=None` (entry points)
    factories: dict[str, set[str]] = field(default_factory=dict)  # builder -> factory names
    uses_training: set[str] = field(default_factory=set)  # module classes reading `self.training`
    buffers: dict[str, set[str]] = field(default_factory=dict)  # module class -> registered buffer names
    # module class -> buffers some registration may set to None (`register_buffer("scale", None)`)
    nullable_buffers: dict[str, set[str]] = field(default_factory=dict)
    #: class -> buffers the class also assigns as plain attributes (`self.x = value` on another
    #: path): read through the runtime's `buffer_value`, which takes either
    plain_or_buffers: dict[str, set[str]] = field(default_factory=dict)
    # module class -> attributes only ever assigned an `nn.Parameter(...)` (`self.cls = nn.Parameter(...)`)
    params: dict[str, set[str]] = field(default_factory=dict)
    # module class -> attributes assigned a torch tensor op's result somewhere (`self.m = torch.eye(n)`)
    array_attrs: dict[str, set[str]] = field(default_factory=dict)
    # top-level functions annotated to return tensors (alone or in a container)
    tensor_functions: frozenset[str] = frozenset()
    layer_bases: dict[str, str] = field(default_factory=dict)  # class -> torch layer it derives from
    # class -> {attribute: torch layer}: `self.fc = nn.Linear(...)` in a module class
    layer_attrs: dict[str, dict[str, str]] = field(default_factory=dict)
    # module classes with no `__init__` of their own: where their constructor comes from, a torch
    # layer (qualified), "torch.nn.Module", or None when a base is imported from elsewhere
    inherited_init: dict[str, str | None] = field(default_factory=dict)
    # module-level names bound to a layer class or a partial of one (`LinearNoBias = partial(nn.Linear, bias=False)`)
    global_factories: set[str] = field(default_factory=set)
    #: module classes whose converted `__init__` makes the random stream their methods draw from
    #: (`self.torch_rng`): each class that draws outside `__init__`, or the nearest base of the
    #: file with an `__init__` when it has none
    random_streams: set[str] = field(default_factory=set)
    #: module classes that draw random numbers in their methods but have no `__init__` in the
    #: file to make a stream (nn.Module's constructor): they draw from the process-wide keys
    draws_without_stream: set[str] = field(default_factory=set)

    def needs_rngs(self, key: str) -> bool:
        return key in self.builders

    def constructor_takes_rngs(self, cls: str, layer_takes_rngs: Callable[[str], bool]) -> bool:
        """Whether the converted class's constructor accepts `rngs`: its own `__init__` (or an
        inherited one of the file) does, a class whose constructor is `nn.Module`'s (a
        parameter-free activation written as a class) does not, and one inheriting a torch
        layer's does when the layer's counterpart takes it (`layer_takes_rngs`). A base from
        elsewhere is assumed to take it, as converted module classes do."""
        if cls not in self.inherited_init:
            return True
        base = self.inherited_init[cls]
        if base is None:
            return True
        if is_module_base(base):
            return False
        return layer_takes_rngs(base)


def resolve(node: ast.AST, bindings: Mapping[str, str | None]) -> str | None:
    """Qualified name of a dotted expression through the module's imports (None if local)."""
    text = dotted(node)
    if text is None:
        return None
    head, _, rest = text.partition(".")
    qualified = bindings.get(head)
    if qualified is None:
        return None
    return f"{qualified}.{rest}" if rest else qualified


def _imported_module_class(cls: ast.ClassDef, base: ast.AST, bindings: Mapping[str, str | None]) -> bool:
    """A base imported from elsewhere in the package (`class MLPBlock(MLP)`, MLP from
    `..ops.misc`; `class GCNConv(MessagePassing)`, MessagePassing from
    `torch_geometric.nn.conv`) or from a torch library: a module class when the subclass looks
    like one (defines `forward` or `__init__`); a weights enum (`class X_Weights(WeightsEnum)`)
    defines neither. Bases of the standard library (`ABC`, `Enum`) and of the packages the tables
    map are never such a base."""
    name = dotted(base)
    if name is None or name.split(".")[0] not in bindings:
        return False
    qualified = bindings.get(name.split(".")[0])
    if qualified is not None:
        root = qualified.split(".")[0]
        if root in sys.stdlib_module_names or root in _mapped_roots():
            return False
    methods = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    return bool(methods & {"forward", "__init__"})


def _functions(tree: ast.Module) -> Iterator[tuple[str, str | None, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(key, class name or None, node) for top-level functions and methods."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node.name, None, node
    for cls in _classes(tree):
        for item in cls.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                yield f"{cls.name}.{item.name}", cls.name, item


def _classes(tree: ast.Module) -> list[ast.ClassDef]:
    """The file's classes: top-level ones and those defined in their bodies, at any depth (rtdl's
    `class MLP(nn.Module): class Block(nn.Module): ...`), each keyed by its own name."""
    found: list[ast.ClassDef] = []
    pending = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    while pending:
        cls = pending.pop(0)
        found.append(cls)
        pending.extend(n for n in cls.body if isinstance(n, ast.ClassDef))
    return found


def _walk_body(func: ast.AST) -> Iterator[ast.AST]:
    """Nodes of a function body, nested functions and classes included (closures see `rngs`)."""
    for stmt in getattr(func, "body", []):
        yield from ast.walk(stmt)


def analyse(tree: ast.Module, bindings: Mapping[str, str | None], *, strict: bool = False) -> ModelAnalysis:
    """`strict`: module classes only through torch bases and the file's own classes (no guess
    about bases imported from elsewhere)."""
    result = ModelAnalysis()
    result.tensor_functions = _tensor_returning(tree, bindings)
    classes = _classes(tree)
    _module_classes(classes, bindings, result, strict=strict)
    _inherited_inits(classes, bindings, result)
    _random_streams(classes, bindings, result)
    result.global_factories = _global_factories(tree, bindings, result.module_classes)
    functions = list(_functions(tree))
    for key, owner, func in functions:
        result.factories[key] = _factory_names(func, bindings, result.module_classes) | result.global_factories
        if owner in result.module_classes and func.name == "__init__":
            result.builders.add(key)
    changed = True
    while changed:
        changed = False
        for key, owner, func in functions:
            if key in result.builders:
                continue
            if _builds(func, owner, key, bindings, result):
                result.builders.add(key)
                changed = True
    for key, owner, func in functions:
        # top-level functions, constructors, and what is called through an instance, where no
        # caller can be seen to pass rngs: `__call__` (timm's EfficientNetBuilder instance is
        # called as `builder(stem_size, block_args)`) and `forward` (tabnet builds `ReLU()` there)
        if key in result.builders and (owner is None or func.name in ("__init__", "__call__", "forward")):
            result.public.add(key)
    for cls in classes:
        if cls.name in result.module_classes and any(
            isinstance(n, ast.Attribute)
            and n.attr == "training"
            and isinstance(n.value, ast.Name)
            and n.value.id == "self"
            for n in ast.walk(cls)
        ):
            result.uses_training.add(cls.name)
    for cls in classes:
        if cls.name in result.module_classes:
            _class_facts(cls, bindings, result)
    return result


def _module_classes(
    classes: list[ast.ClassDef], bindings: Mapping[str, str | None], result: ModelAnalysis, *, strict: bool
) -> None:
    """Fill `module_classes` (a fixpoint: a class deriving from one of the file's module classes is one) and
    `layer_bases`."""
    changed = True
    while changed:
        changed = False
        for cls in classes:
            if cls.name in result.module_classes:
                continue
            for base in cls.bases:
                q = resolve(base, bindings)
                if q is not None and is_layer_symbol(q):
                    result.layer_bases[cls.name] = q
                elif dotted(base) in result.layer_bases:  # `class WSLinear(Linear)`, Linear(nn.Linear) here
                    result.layer_bases[cls.name] = result.layer_bases[dotted(base)]  # type: ignore[index]
                if (
                    is_module_base(q)
                    or is_layer_symbol(q)
                    or dotted(base) in result.module_classes
                    or (not strict and _imported_module_class(cls, base, bindings))
                ):
                    result.module_classes.add(cls.name)
                    changed = True
                    break


def _class_facts(cls: ast.ClassDef, bindings: Mapping[str, str | None], result: ModelAnalysis) -> None:
    """Fill what a module class keeps: buffers (and those that may be None or plain attributes too),
    parameters, attributes holding tensors, and attributes holding one kind of torch layer."""
    names = {
        n.args[0].value
        for n in ast.walk(cls)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "register_buffer"
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id == "self"
        and n.args
        and isinstance(n.args[0], ast.Constant)
        and isinstance(n.args[0].value, str)
    }
    if names:
        result.buffers[cls.name] = names
    none_names = _names_that_may_be_none(cls)
    nullable = {
        n.args[0].value
        for n in ast.walk(cls)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr in ("register_buffer", "register_parameter")  # `(name, None)`
        and len(n.args) > 1
        and isinstance(n.args[0], ast.Constant)
        and isinstance(n.args[0].value, str)
        and (_may_be_none(n.args[1]) or (isinstance(n.args[1], ast.Name) and n.args[1].id in none_names))
    }
    if nullable:
        result.nullable_buffers[cls.name] = nullable
    plain = {
        t.attr
        for n in ast.walk(cls)
        if isinstance(n, ast.Assign)
        for t in n.targets
        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
    } & names
    if plain:
        result.plain_or_buffers[cls.name] = plain
    params = _parameter_attributes(cls, bindings)
    if params:
        result.params[cls.name] = params
    arrays = _array_attributes(cls, bindings, result.tensor_functions)
    if arrays:
        result.array_attrs[cls.name] = arrays
    layers = {}
    for n in ast.walk(cls):
        if (
            isinstance(n, ast.Assign)
            and isinstance(n.value, ast.Call)
            and len(n.targets) == 1
            and isinstance(n.targets[0], ast.Attribute)
            and isinstance(n.targets[0].value, ast.Name)
            and n.targets[0].value.id == "self"
        ):
            q = resolve(n.value.func, bindings)
            if q is not None and is_layer_symbol(q):
                layers.setdefault(n.targets[0].attr, set()).add(q)
    # an attribute assigned one layer type only (two types: which attribute names apply is unknown)
    single = {attr: next(iter(qs)) for attr, qs in layers.items() if len(qs) == 1}
    if single:
        result.layer_attrs[cls.name] = single


def _parameter_attributes(cls: ast.ClassDef, bindings: Mapping[str, str | None]) -> set[str]:
    """`self.X` attributes of a class assigned `nn.Parameter(...)` and nothing else (an
    attribute that may also be None is left out: its reads cannot be rewritten blindly)."""
    parameter, other = set(), set()
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)):
                    continue
                if target.value.id != "self":
                    continue
                value = node.value
                is_param = isinstance(value, ast.Call) and resolve(value.func, bindings) in (
                    "torch.nn.Parameter",
                    "torch.nn.parameter.Parameter",
                )
                (parameter if is_param else other).add(target.attr)
    return parameter - other


def _array_attributes(
    cls: ast.ClassDef, bindings: Mapping[str, str | None], returning: frozenset[str] = frozenset()
) -> set[str]:
    """`self.X` attributes of a class assigned the result of a torch function (not a layer or
    `nn.Parameter`) or of a function of the file annotated to return tensors (kornia's
    `self.grid = get_grid_dict(n)`, `-> Dict[str, torch.Tensor]`): `self.group_matrix =
    torch.eye(n)` on one path, a constructor argument (None by default) on another. nnx decides
    an attribute's kind at its first assignment, so every assignment of such an attribute is
    marked data (torch_modules_jax)."""
    found = set()
    for node in ast.walk(cls):
        if not (isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Call)):
            continue
        func = node.value.func
        q = resolve(func, bindings)
        local = isinstance(func, ast.Name) and func.id in returning
        if not local and (q is None or not q.startswith("torch.") or q.startswith("torch.nn.") or is_layer_symbol(q)):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                found.add(target.attr)
    return found


def _tensor_returning(tree: ast.Module, bindings: Mapping[str, str | None]) -> frozenset[str]:
    """Top-level functions of the file whose return annotation names a torch tensor (alone or in
    a container: `Dict[str, torch.Tensor]`)."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.returns is not None:
            for sub in ast.walk(node.returns):
                if isinstance(sub, ast.Name | ast.Attribute) and resolve(sub, bindings) == "torch.Tensor":
                    names.add(node.name)
                    break
    return frozenset(names)


def _inherited_inits(classes: list[ast.ClassDef], bindings: Mapping[str, str | None], result: ModelAnalysis) -> None:
    """Fill `result.inherited_init` for module classes that define no `__init__`."""
    by_name = {c.name: c for c in classes}

    def source(cls: ast.ClassDef, seen: frozenset[str]) -> str | None:
        for base in cls.bases:
            text = dotted(base)
            if text in by_name and text not in seen and text in result.module_classes:
                local = by_name[text]
                if any(isinstance(n, ast.FunctionDef) and n.name == "__init__" for n in local.body):
                    return None  # the file's own class: its converted __init__ takes rngs
                return source(local, seen | {text})
            q = resolve(base, bindings)
            if q is not None and (is_layer_symbol(q) or is_module_base(q)):
                return q
            if text is not None and text not in ("object", "ABC", "Generic"):
                return None  # a base from elsewhere: unknown
        return None

    for cls in classes:
        if cls.name in result.module_classes and not any(
            isinstance(n, ast.FunctionDef) and n.name == "__init__" for n in cls.body
        ):
            result.inherited_init[cls.name] = source(cls, frozenset({cls.name}))


#: in-place random methods used as values (`x.new_empty(s).bernoulli_(p)`): the torch-inplace-init
#: rule makes them runtime functions of rng.py
RANDOM_INPLACE = {
    "normal_": "tensor_normal_",
    "uniform_": "tensor_uniform_",
    "bernoulli_": "tensor_bernoulli_",
    "exponential_": "tensor_exponential_",
}


@functools.cache
def _drawing_calls() -> tuple[frozenset[str], frozenset[str]]:
    """(qualified functions, method names) that draw from torch's generator: the torch patterns
    of the ops marked `draws: true` (mappings/ops/random_ops.yaml) and the in-place methods."""
    functions: set[str] = set()
    methods: set[str] = set(RANDOM_INPLACE)
    for op in load_mappings().ops.values():
        if op.draws:
            for pattern in op.patterns.get("torch", ()):
                head = pattern.text.split("(", 1)[0]
                if head.startswith("{"):
                    methods.add(head.rsplit(".", 1)[-1])
                else:
                    functions.add(head)
    return frozenset(functions), frozenset(methods)


def _draws(func: ast.AST, bindings: Mapping[str, str | None]) -> bool:
    functions, methods = _drawing_calls()
    for node in _walk_body(func):
        if not isinstance(node, ast.Call):
            continue
        if resolve(node.func, bindings) in functions:
            return True
        if isinstance(node.func, ast.Attribute) and node.func.attr in methods and resolve(node.func, bindings) is None:
            return True
    return False


def _random_streams(classes: list[ast.ClassDef], bindings: Mapping[str, str | None], result: ModelAnalysis) -> None:
    """Fill `random_streams` and `draws_without_stream` (see ModelAnalysis)."""
    by_name = {c.name: c for c in classes}

    def has_init(cls: ast.ClassDef) -> bool:
        return any(isinstance(n, ast.FunctionDef) and n.name == "__init__" for n in cls.body)

    def holder(cls: ast.ClassDef, seen: frozenset[str]) -> str | None:
        if has_init(cls):
            return cls.name
        for base in cls.bases:
            text = dotted(base)
            if text in by_name and text not in seen and text in result.module_classes:
                return holder(by_name[text], seen | {text})
        return None

    for cls in classes:
        if cls.name not in result.module_classes:
            continue
        methods = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name != "__init__"]
        if any(_draws(m, bindings) for m in methods):
            found = holder(cls, frozenset({cls.name}))
            if found is None:
                result.draws_without_stream.add(cls.name)
            else:
                result.random_streams.add(found)


def builder_rngs_in_scope(ctx: FileView) -> bool:
    """Whether the node being converted sees the `rngs` of a function that builds layers: in its
    body (nested functions, lambdas and classes included: closures see it), not in its parameter
    defaults or decorators, which run where the `def` is (`def __init__(self, norm=make_norm())`)."""
    key = ctx.enclosing_function()
    return key is not None and key in analysis_for(ctx).builders and ctx.in_def_body()


def random_source(ctx: FileView) -> str | None:
    """The key source a torch random draw at the node being converted passes to JAX's runtime:
    "rngs" in a function that builds layers (its nnx.Rngs), "self" in another method of a module
    class (the stream its `__init__` made), None where neither is in reach (a free function, a
    static method, a class drawing without an `__init__` of its own)."""
    key = ctx.enclosing_function()
    if key is None or not ctx.in_def_body():
        return None
    analysis = analysis_for(ctx)
    owner, _, method = key.rpartition(".")
    if not owner:
        return "rngs" if key in analysis.builders else None
    if method == "__init__" and key in analysis.builders:
        return "rngs"
    if owner in analysis.module_classes and owner not in analysis.draws_without_stream:
        func = ctx.enclosing_def()
        params = [*func.params.posonly_params, *func.params.params] if func is not None else []
        static = {dotted_name(d.decorator) for d in func.decorators} & {"staticmethod", "classmethod"}
        if params and params[0].name.value == "self" and not static:
            return "self"
    return "rngs" if key in analysis.builders else None


def warn_process_random(ctx: FileView, node: cst.CSTNode, what: str) -> None:
    """The warning for a draw no module stream or rngs reaches (random_source gave None)."""
    ctx.diagnose(
        node,
        "warning",
        "process-random",
        f"{what} draws from torch's global generator and JAX has none; no module stream or rngs is in "
        "reach here, so the converted call draws from the runtime's process-wide keys, whose values jax.jit "
        "fixes when it traces: pass rngs= (an nnx.Rngs, a stream or a key) to draw from your own",
    )


def _global_factories(tree: ast.Module, bindings: Mapping[str, str | None], module_classes: set[str]) -> set[str]:
    """Module-level names bound to a layer class or a partial of one, which every function of the
    file can call (x-transformers' `LinearNoBias = partial(nn.Linear, bias = False)`)."""
    names: set[str] = set()
    changed = True
    while changed:
        changed = False
        for node in tree.body:
            if isinstance(node, ast.Assign) and _is_layer_value(node.value, bindings, module_classes, names):
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id not in names and target.id not in module_classes:
                        names.add(target.id)
                        changed = True
    return names


def _factory_names(func: ast.AST, bindings: Mapping[str, str | None], module_classes: set[str]) -> set[str]:
    """Parameters and locals of `func` that hold a layer class (or a partial of one)."""
    names: set[str] = set()
    args = getattr(func, "args", None)
    if args is not None:
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
        defaults: dict[str, ast.AST] = {}
        for param, default in zip(reversed(args.posonlyargs + args.args), reversed(args.defaults), strict=False):
            defaults[param.arg] = default
        for param, default in zip(args.kwonlyargs, args.kw_defaults, strict=False):
            if default is not None:
                defaults[param.arg] = default
        for param in params:
            if param.arg in ("self", "cls"):
                continue
            default = defaults.get(param.arg)
            if isinstance(default, ast.Constant) and default.value is not None:
                continue  # `add_pooling_layer=True` is a flag, not a layer class
            annotation = ast.unparse(param.annotation) if param.annotation is not None else ""
            # a `forward` applies what it is handed (`sublayer(x)`, the Annotated Transformer's
            # residual connection): a name alone makes no factory there
            by_name = getattr(func, "name", "") != "forward" and param.arg.endswith(_FACTORY_SUFFIXES)
            if (
                (default is not None and _is_layer_value(default, bindings, module_classes, names))
                or _factory_annotation(annotation, module_classes)
                or (by_name and not annotation)
                or (param.arg.endswith(_FACTORY_SUFFIXES) and _factory_annotation(annotation, module_classes))
            ):
                names.add(param.arg)
    changed = True
    while changed:
        changed = False
        for node in _walk_body(func):
            if isinstance(node, ast.Assign) and _is_layer_value(node.value, bindings, module_classes, names):
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id not in names:
                        names.add(target.id)
                        changed = True
    return names


def _factory_annotation(annotation: str, module_classes: set[str]) -> bool:
    """`Type[BasicBlock]`, `Callable[..., nn.Module]`: a class or factory, not an instance."""
    if not re.search(r"\b(Type|type|Callable)\[", annotation):
        return False
    words = set(re.findall(r"[A-Za-z_]\w*", annotation))
    return "Module" in words or bool(words & module_classes)


def _is_layer_value(
    node: ast.AST, bindings: Mapping[str, str | None], module_classes: set[str], known: set[str]
) -> bool:
    """A layer class, a module class, a factory name, or `partial(<one of those>, ...)`."""
    if isinstance(node, ast.Call):
        callee = resolve(node.func, bindings)
        if callee == "functools.partial" and node.args:
            return _is_layer_value(node.args[0], bindings, module_classes, known)
        return False
    if isinstance(node, ast.IfExp):
        return _is_layer_value(node.body, bindings, module_classes, known) or _is_layer_value(
            node.orelse, bindings, module_classes, known
        )
    text = dotted(node)
    if text is None:
        return False
    return is_layer_symbol(resolve(node, bindings)) or text in module_classes or text in known


def _builds(
    func: ast.AST, owner: str | None, key: str, bindings: Mapping[str, str | None], result: ModelAnalysis
) -> bool:
    factories = result.factories.get(key, set())
    for node in _walk_body(func):
        if isinstance(node, ast.Call) and callee_needs_rngs(node.func, owner, bindings, result, factories):
            return True
    return False


def callee_needs_rngs(
    func: ast.AST,
    owner: str | None,
    bindings: Mapping[str, str | None],
    result: ModelAnalysis,
    factories: set[str],
) -> bool:
    """Whether a call to `func` constructs layers (and so, once converted, takes `rngs`)."""
    text = dotted(func)
    if text is None:
        return False
    if is_layer_symbol(resolve(func, bindings)):
        return True
    if text in result.module_classes or text in factories:
        return True
    if text in result.builders:
        return True
    return owner is not None and text.startswith("self.") and f"{owner}.{text[5:]}" in result.builders


def analysis_for(ctx: FileView) -> ModelAnalysis:
    """The analysis of the file a rule is converting (computed once per file)."""

    def build() -> ModelAnalysis:
        tree, bindings = ctx.module_ast()
        return analyse(tree, bindings) if tree is not None else ModelAnalysis()

    return ctx.per_file("torch-model-analysis", build)


def _names_that_may_be_none(cls: ast.ClassDef) -> set[str]:
    """Names a method of the class binds to None (or to a conditional with a None branch), or
    takes as a parameter defaulting to None: Swin's `attn_mask = None` in the unshifted branch,
    then `self.register_buffer("attn_mask", attn_mask)`."""
    found: set[str] = set()
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign) and _may_be_none(node.value):
            found.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.arguments):
            positional = [*node.posonlyargs, *node.args]
            defaults = [None] * (len(positional) - len(node.defaults)) + list(node.defaults)
            pairs = [*zip(positional, defaults, strict=True), *zip(node.kwonlyargs, node.kw_defaults, strict=True)]
            found.update(arg.arg for arg, default in pairs if default is not None and _may_be_none(default))
    return found


def _may_be_none(value: ast.expr) -> bool:
    """`None`, or a conditional with a `None` branch (`torch.ones(4) if use_scale else None`)."""
    if isinstance(value, ast.Constant) and value.value is None:
        return True
    return isinstance(value, ast.IfExp) and (_may_be_none(value.body) or _may_be_none(value.orelse))

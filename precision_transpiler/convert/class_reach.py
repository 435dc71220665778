"""Which members of a class copied in from another module the converted code can reach.

diffusers' `UNet2DModel(ModelMixin, ConfigMixin)` needs `ModelMixin`'s constructor and its
`dtype` property; the class also has `from_pretrained` (600 lines), `save_pretrained`,
offloading and hub helpers that pull in most of the library. A class copied in by
convert/siblings/ keeps only what is reachable: its class-level statements, dunder methods,
framework entry points (`forward`, Keras' `call`), and the methods whose names the converted
code or the kept code use as attributes (`self.dtype`, `cls._get_signature_keys`,
`super().to`), as plain names or as strings (`getattr(self, "forward_chunk")`), up to a fixed
point. A `torch.autograd.Function` subclass keeps all its methods: torch calls `setup_context`,
`backward`, `jvp` and `vmap` itself, so nothing names them. Name-based, so it over-approximates
(any `.to(` keeps `to`) and never drops what a plain attribute access reaches. The left-out
methods are named in a comment in the class, so a dynamic call of one fails visibly, not
silently.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

#: methods frameworks call on their own (torch's `forward`, Keras' `call` and `build`, what the
#: runtimes' module classes call: `extra_repr`, `reset_parameters`)
ENTRY_POINTS = frozenset(
    {"forward", "call", "build", "compute_output_shape", "get_config", "extra_repr", "reset_parameters"}
)

#: marks the names left out of a copied class
LEFT_OUT = "# ptranspile: not reached from the converted code, left out: {names}"


def used_attributes(nodes: Iterable[ast.AST]) -> set[str]:
    """Attribute names read or written in `nodes`, and identifier-like string constants (names
    handed to `getattr`/`hasattr`)."""
    found: set[str] = set()
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Attribute):
                found.add(sub.attr)
            elif isinstance(sub, ast.Constant) and isinstance(sub.value, str) and sub.value.isidentifier():
                found.add(sub.value)
    return found


def used_names(nodes: list[ast.AST]) -> set[str]:
    """`used_attributes` and the plain names of `nodes`: library code left imported may call a
    method named like the function the file uses (diffusers' `@register_to_config` decorator
    calls `self.register_to_config`)."""
    names = used_attributes(nodes)
    for node in nodes:
        names.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name))
    return names


def _is_method(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef)


def _is_static_forward(stmt: ast.stmt) -> bool:
    return (
        _is_method(stmt)
        and stmt.name == "forward"  # type: ignore[attr-defined]
        and any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in stmt.decorator_list)  # type: ignore[attr-defined]
    )


def is_autograd_function(cls: ast.ClassDef) -> bool:
    """Whether `cls` looks like a torch.autograd.Function subclass: a base named `...Function`
    (`Function`, `torch.autograd.Function`, `InplaceFunction`) or a static `forward`, which a
    subclass of a local Function subclass has and an nn.Module never does."""
    for base in cls.bases:
        name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
        if name.endswith("Function"):
            return True
    return any(_is_static_forward(stmt) for stmt in cls.body)


#: Python's container classes, whose methods code outside the user's calls on a subclass
#: (a framework flattening a returned mapping calls `items()` / `values()`)
CONTAINER_BASES = frozenset(
    {
        "dict", "OrderedDict", "defaultdict", "list", "tuple", "set", "frozenset", "UserDict", "UserList",
        "Mapping", "MutableMapping", "Sequence", "MutableSequence", "NamedTuple",
    }
)  # fmt: skip
#: the methods of those classes
CONTAINER_METHODS = frozenset(
    name for kind in (dict, list, tuple, set) for name in dir(kind) if not name.startswith("__")
) | {"keys", "values", "items", "get"}


def kept_members(cls: ast.ClassDef, attributes: set[str]) -> list[ast.stmt]:
    """The statements of `cls`'s body that stay: everything but methods no one reaches (an
    autograd Function's methods are all reached by torch's autograd once the class is; a
    container subclass's overrides of its container methods are reached by whoever reads the
    container: torchmultimodal's `ModelOutput(OrderedDict)` returned `values`/`items` of its
    dataclass fields, and without them Keras flattened the output to nothing)."""
    if is_autograd_function(cls):
        return list(cls.body)
    local = {n.id for stmt in cls.body if not _is_method(stmt) for n in ast.walk(stmt) if isinstance(n, ast.Name)}
    container = _container(cls)
    return [
        stmt
        for stmt in cls.body
        if not _is_method(stmt)
        or stmt.name.startswith("__")  # type: ignore[attr-defined]
        or stmt.name in ENTRY_POINTS  # type: ignore[attr-defined]
        or stmt.name in attributes  # type: ignore[attr-defined]
        or stmt.name in local  # type: ignore[attr-defined]  # `forward = _forward_impl`
        or (container and stmt.name in CONTAINER_METHODS)  # type: ignore[attr-defined]
    ]


def _container(cls: ast.ClassDef) -> bool:
    """Whether a base of `cls` is one of Python's containers (`OrderedDict`, `collections.abc.Mapping`)."""
    names = [b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in cls.bases]
    return any(name in CONTAINER_BASES for name in names)


def reachable_parts(node: ast.stmt, attributes: set[str]) -> Iterator[ast.AST]:
    """What of a top-level definition is reached: a class's bases, decorators, keywords and kept
    members; anything else whole."""
    if not isinstance(node, ast.ClassDef):
        yield node
        return
    yield from node.bases
    yield from node.keywords
    yield from node.decorator_list
    yield from kept_members(node, attributes)


def reached_lines(node: ast.stmt, attributes: set[str]) -> list[tuple[int, int]]:
    """Line ranges of what of a top-level definition is kept (a class: its header and kept
    members), so diagnostics of left-out methods are not reported."""
    if not isinstance(node, ast.ClassDef):
        return [(node.lineno, node.end_lineno or node.lineno)]
    header = (min([node.lineno, *[d.lineno for d in node.decorator_list]]), node.body[0].lineno - 1)
    return [header, *[(m.lineno, m.end_lineno or m.lineno) for m in kept_members(node, attributes)]]


def class_text(node: ast.ClassDef, lines: list[str], attributes: set[str]) -> str:
    """The source of `node` (from `lines`, the module's lines with their ends) without the
    methods no one reaches, and a comment naming them."""
    start = min([node.lineno, *[d.lineno for d in node.decorator_list]])
    kept = kept_members(node, attributes)
    dropped = [stmt for stmt in node.body if stmt not in kept]
    if not dropped:
        return "".join(lines[start - 1 : node.end_lineno]).rstrip("\n")
    skip: set[int] = set()
    for stmt in dropped:
        first = min([stmt.lineno, *[d.lineno for d in getattr(stmt, "decorator_list", [])]])
        skip.update(range(first, (stmt.end_lineno or stmt.lineno) + 1))
    # the comment goes after the docstring, which stays the first statement
    docstring = isinstance(node.body[0], ast.Expr) and isinstance(getattr(node.body[0], "value", None), ast.Constant)
    anchor = node.body[1] if docstring and len(node.body) > 1 else node.body[0]
    body_start = min([anchor.lineno, *[d.lineno for d in getattr(anchor, "decorator_list", [])]])
    indent = " " * node.body[0].col_offset
    names = ", ".join(stmt.name for stmt in dropped)  # type: ignore[attr-defined]
    out: list[str] = []
    for number in range(start, (node.end_lineno or start) + 1):
        if number == body_start:
            out.append(indent + LEFT_OUT.format(names=names) + "\n")
        if number not in skip:
            out.append(lines[number - 1])
    if not kept:
        out.append(indent + "pass\n")
    return "".join(out).rstrip("\n")

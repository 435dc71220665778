"""What a rule sees: the frameworks involved, the tables, name resolution and reporting."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import libcst as cst

from precision_transpiler.diagnostics import Severity
from precision_transpiler.mappings.model import MappingSet
from precision_transpiler.rewrite.imports import ImportNamer
from precision_transpiler.syntax import code_of, dotted_name

if TYPE_CHECKING:
    from precision_transpiler.rewrite.engine import Transpiler

_Node = TypeVar("_Node", bound=cst.CSTNode)
_X64 = {"int64": "int32", "float64": "float32", "complex128": "complex64", "uint64": "uint32"}
_DEVICE_STRING = re.compile(r"^(cpu|cuda|mps|xla|meta|xpu|tpu|gpu|hpu|npu)(:\d+)?$")
_DEVICE_PREFIX = re.compile(r"^(cpu|cuda|mps|xla|meta|xpu|tpu|gpu|hpu|npu)(:|$)")


def string_value(node: cst.CSTNode) -> str | None:
    """The value of a plain (non-f, non-bytes) string literal, else None."""
    if isinstance(node, cst.SimpleString) and "b" not in node.prefix.lower() and "f" not in node.prefix.lower():
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


#: functions of the source and target frameworks that return a dtype
DTYPE_FUNCTIONS = frozenset(
    {
        "torch.promote_types",
        "torch.result_type",
        "torch.get_default_dtype",
        "jax.numpy.promote_types",
        "jax.numpy.result_type",
        "keras.backend.result_type",
        "keras.config.floatx",
    }
)


class RuleContext:
    """Per-file services for rules. Created by the engine; one per transpile call."""

    def __init__(self, command: Transpiler, mappings: MappingSet, namer: ImportNamer) -> None:
        self._command = command
        self.mappings = mappings
        self.namer = namer
        self.source: str = command.options.source or ""
        self.target: str = command.options.target

    # -- resolution ----------------------------------------------------------------------------

    def qualified_name(self, node: cst.CSTNode) -> str | None:
        """The imported qualified name a dotted Name/Attribute chain refers to here.

        None for locals, shadowed names and anything that is not a plain dotted chain
        (`torch.finfo(t).max` is an attribute of a value, not a symbol)."""
        qualified = self._command.names.qualified_name(node, self._command.stack)
        if qualified is None:
            return None
        framework = self.mappings.frameworks.get(self.mappings.framework_of(qualified) or "")
        return framework.public_name(qualified) if framework is not None else qualified

    def framework_of(self, node: cst.CSTNode) -> str | None:
        qualified = self.qualified_name(node)
        return self.mappings.framework_of(qualified) if qualified else None

    def is_foreign_call(self, call: cst.Call) -> bool:
        """A call of an imported function that no framework table knows and that is not the
        runtime's (`einops.repeat`, a helper library's function): it receives arguments as
        they are, so a framework variable (an nnx.Param, a keras.Variable) must be passed as
        its array."""
        qualified = self.qualified_name(call.func)
        if qualified is None or qualified.split(".")[0] == "precision_transpiler":
            return False
        return self.mappings.framework_of(qualified) is None

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """Parent of an original node on the path being visited (None for other nodes)."""
        return self._command.parent_of(node)

    def position(self, node: cst.CSTNode) -> tuple[int, int]:
        """1-based line and column of `node` in the input."""
        return self._command.position(node)

    def updated(self, node: cst.CSTNode) -> cst.CSTNode:
        """The converted version of an original node that was already left."""
        return self._command.updated_nodes.get(node, node)

    def is_outermost_name(self, node: cst.CSTNode) -> bool:
        """False for `torch.nn` inside `torch.nn.Linear`: only whole dotted names count."""
        parent = self.parent(node)
        return not (isinstance(parent, cst.Attribute) and parent.value is node)

    def module_ast(self) -> tuple[Any, dict[str, str | None]]:
        """The file's `ast` tree (None if it does not parse) and its module-level bindings
        (local name -> qualified name of what it imports), for whole-file analyses."""
        names = self._command.names
        return names.tree, names.module_bindings

    def module_alias(self, receiver: cst.BaseExpression) -> bool:
        """`torchutils` (or `torchutils.ops`) in `torchutils.tile(x, 2)` after `from pkg.utils
        import torchutils`, a module file of the package: what it calls are its functions, not
        tensor methods. Sibling copying converts and copies them later."""
        root = receiver
        while isinstance(root, cst.Attribute):
            root = root.value
        find = self._command.options.module_aliases
        tree = self._command.names.tree
        if not isinstance(root, cst.Name) or find is None or tree is None:
            return False
        aliases = self.per_file("module-aliases", lambda: frozenset(find(tree)))
        return root.value in aliases and self._command.names.module_level(root.value, self._command.stack)

    def enclosing_function(self) -> str | None:
        """ "func" or "Class.method" of the top-level function or method being visited; a method
        of a class defined in another class's body (rtdl's `MLP.Block`) is "Block.method"."""
        stack = self._command.stack
        for i, node in enumerate(stack):
            if isinstance(node, cst.FunctionDef):
                owner = stack[i - 2] if i >= 2 else None
                if isinstance(owner, cst.ClassDef) and _in_class_bodies(stack[1:i]):
                    return f"{owner.name.value}.{node.name.value}"
                if i == 1:
                    return node.name.value
                return None
        return None

    def in_def_body(self) -> bool:
        """Whether the node being visited is in the body of the top-level function or method
        `enclosing_function` names, where its parameters are in scope (not in its parameter
        defaults, annotations or decorators, which run where the `def` is)."""
        stack = self._command.stack
        for i, node in enumerate(stack):
            if isinstance(node, cst.FunctionDef):
                return i + 1 < len(stack) and stack[i + 1] is node.body
        return False

    def in_lambda(self) -> bool:
        """Whether the node being visited is inside a lambda's body."""
        return any(isinstance(node, cst.Lambda) for node in self._command.stack)

    def enclosing_def(self) -> cst.FunctionDef | None:
        """The top-level function or method being visited (the node `enclosing_function` names)."""
        if self.enclosing_function() is None:
            return None
        return next(node for node in self._command.stack if isinstance(node, cst.FunctionDef))

    def innermost(self, kind: type[_Node]) -> _Node | None:
        """The innermost node of type `kind` (a class, a function) around the node being visited."""
        return next((node for node in reversed(self._command.stack) if isinstance(node, kind)), None)

    def per_file(self, key: str, build: Any) -> Any:
        """A value computed once per converted file (analyses shared by several rules)."""
        cache = self.__dict__.setdefault("_per_file", {})
        if key not in cache:
            cache[key] = build()
        return cache[key]

    # -- dtypes --------------------------------------------------------------------------------

    def dtype_of(self, node: cst.CSTNode) -> str | None:
        """Canonical dtype an expression statically denotes (a dtype symbol of any framework,
        or a dtype string in the source framework's spelling), else None."""
        if isinstance(node, cst.Name | cst.Attribute):
            qualified = self.qualified_name(node)
            if qualified is not None:
                hit = self.mappings.symbol_to_dtype.get(qualified)
                if hit is not None:
                    return hit[1]
            return None
        text = string_value(node)
        if text is not None:
            return self.mappings.string_to_dtype(self.source, text)
        return None

    def is_dtype_like(self, node: cst.CSTNode) -> bool:
        if self.dtype_of(node) is not None:
            return True
        if isinstance(node, cst.Call) and self.qualified_name(node.func) in DTYPE_FUNCTIONS:
            return True  # `x.to(torch.promote_types(a, b))`, already converted or not
        dotted = dotted_name(node)
        if dotted is not None:
            return "dtype" in dotted.rsplit(".", 1)[-1].lower()
        return False

    def is_device_like(self, node: cst.CSTNode) -> bool:
        text = string_value(node)
        if text is not None:
            return bool(_DEVICE_STRING.match(text))
        if isinstance(node, cst.Call):
            qualified = self.qualified_name(node.func)
            return qualified in {"torch.device", "jax.devices", "tensorflow.device"}
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
            head_text = string_value(node.left)  # "cuda:" + str(index)
            return head_text is not None and bool(_DEVICE_PREFIX.match(head_text))
        if isinstance(node, cst.FormattedString):  # f"cuda:{index}"
            head = node.parts[0] if node.parts else None
            return isinstance(head, cst.FormattedStringText) and bool(_DEVICE_PREFIX.match(head.value))
        dotted = dotted_name(node)
        if dotted is not None:
            return "device" in dotted.rsplit(".", 1)[-1].lower()
        return False

    def dtype_expr(
        self, canon: str, *, as_string: bool = False, at: cst.CSTNode | None = None
    ) -> cst.BaseExpression | None:
        """Target-framework code for a canonical dtype (None when the target has none).

        `at` is the source node the dtype comes from, for the JAX 64-bit warning."""
        if at is not None:
            self.warn_if_x64(canon, at)
        if as_string:
            spelling = self.mappings.dtype_string(self.target, canon) or canon
            return cst.SimpleString(f'"{spelling}"')
        symbol = self.mappings.dtype_symbol(self.target, canon)
        return self.expr_for(symbol) if symbol else None

    def convert_dtype_string(self, node: cst.CSTNode) -> cst.BaseExpression | None:
        """A string dtype of the source (`"float"`, `"i4"`, `"bfloat16"`) in target form.

        Spellings mean different things (NumPy's "float" is float64), so the string is read in
        the source's sense; the target gets its canonical string, or a symbol where it takes no
        string for that dtype (torch takes none; NumPy has no "bfloat16")."""
        text = string_value(node)
        canon = self.mappings.string_to_dtype(self.source, text) if text is not None else None
        if canon is None:
            return None
        if self.target != "torch":
            self.warn_if_x64(canon, node)
            spelling = self.mappings.dtype_string(self.target, canon)
            if spelling is not None:
                return node if spelling == text else cst.SimpleString(f'"{spelling}"')  # type: ignore[return-value]
        return self.dtype_expr(canon, at=node if self.target == "torch" else None)

    def warn_if_x64(self, canon: str, at: cst.CSTNode) -> None:
        """JAX silently computes 64-bit dtypes in 32 bits unless x64 is enabled: say so."""
        if self.target == "jax" and canon in _X64:
            self.diagnose(
                at,
                "warning",
                "jax-x64",
                f"JAX uses {_X64[canon]} for {canon} unless jax_enable_x64 is set "
                "(jax.config.update('jax_enable_x64', True))",
            )

    def expr_for(self, qualified: str) -> cst.BaseExpression:
        """Code for a qualified name, using the file's aliases, adding an import if needed."""
        return self.namer.expr_for(qualified)

    # -- reporting -----------------------------------------------------------------------------

    def record(self, rule: str, original: cst.CSTNode, replacement: cst.CSTNode) -> None:
        self._command.record_rewrite(rule, original, replacement)

    def diagnose(self, node: cst.CSTNode, severity: Severity, code: str, message: str) -> None:
        self._command.add_diagnostic(node, severity, code, message)

    def unsupported(self, node: cst.CSTNode, message: str, code: str = "unsupported-construct") -> None:
        """Report `node` as not convertible; it is also marked in the output."""
        self._command.add_candidate(node, message, code)

    def retract_under(self, subtree: cst.CSTNode) -> None:
        """Drop non-unsupported diagnostics about nodes in a subtree the output does not keep."""
        self._command.retract_under(subtree)

    def consume(self, nodes: Iterable[cst.CSTNode]) -> None:
        """Mark original nodes as handled by a rewrite (so they are not reported unsupported)."""
        self._command.consumed.update(nodes)

    def code(self, node: cst.CSTNode) -> str:
        return code_of(node)


def _in_class_bodies(path: list[cst.CSTNode]) -> bool:
    """Whether the nodes between the module and a def are classes and their bodies only (a
    method of a top-level class, or of a class nested in class bodies)."""
    return len(path) % 2 == 0 and all(
        isinstance(node, cst.ClassDef if k % 2 == 0 else cst.IndentedBlock) for k, node in enumerate(path)
    )

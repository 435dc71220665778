"""Find, validate and merge mapping tables.

Every table is a YAML file with a top-level `kind:` (`frameworks`, `dtypes`, `ops`, `layers`,
`surface`, ...). A table that does not fit its schema raises `MappingError` naming the file, the line and the key, so
that a contributor adding a mapping sees exactly what is wrong.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import pickle
import sys
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from precision_transpiler.errors import MappingError
from precision_transpiler.mappings.layers import is_qualified, layers_handler
from precision_transpiler.mappings.linetypes import LineDict, LineList
from precision_transpiler.mappings.model import FrameworkInfo, ImportHelper, MappingSet, OpSpec, Surface
from precision_transpiler.mappings.patterns import Pattern, parse_pattern
from precision_transpiler.mappings.precision_classes import derive_runtime_entries, precision_classes_handler
from precision_transpiler.syntax import OPERATORS

ENTRY_POINT_GROUP = "precision_transpiler.mappings"
#: `any` binds anything; `dtype`/`device` must look like one (method patterns only); `tensor`,
#: `int` and `ints` (an int or a sequence of ints) reject literals that cannot be one, so that
#: `s.split(",")` on a string is never read as a tensor split.
#: `known_tensor` only matches what tensor inference proves is a tensor (analysis/tensors.py).
#: `undecided` matches what is neither a literal nor a framework symbol nor dtype- or device-like (so
#: `x.to(value)`'s fallback leaves `x.to("cuda")` and `x.to(device)` to the device op).
#: `optional_dtype` matches a parameter of the function that may be None (`dtype=None`,
#: `dtype: Optional[torch.dtype]`): torch's `x.to(dtype=None)` keeps x's dtype.
PARAM_KINDS = frozenset(
    {"any", "dtype", "device", "tensor", "known_tensor", "undecided", "int", "ints", "display", "optional_dtype"}
)
_BIND_SCALARS = (str, int, float, bool, type(None))
#: values of an op's `returns:` (what its result holds when that is not its input's dtype)
OP_RESULTS = frozenset({"int", "bool"})


def builtin_mappings_dir() -> Path:
    """The shipped tables: inside the package when installed from a wheel, else the repo's."""
    here = Path(__file__).resolve().parent.parent
    packaged = here / "_builtin_mappings"
    if packaged.is_dir():
        return packaged
    return here.parent / "mappings"


def entry_point_dirs() -> list[Path]:
    """Directories contributed by installed packages (entry-point group above)."""
    dirs: list[Path] = []
    entries = _plugin_entry_points()
    for attempt in (1, 2):
        try:
            dirs = [_load_entry_point(name, value) for name, value in entries]
            break
        except ModuleNotFoundError as exc:
            if attempt == 2:
                raise MappingError(f"a plug-in's entry point failed to load: {exc}") from None
            entries = _plugin_entry_points(refresh=True)  # a stale cache named an uninstalled plug-in
    return dirs


def _load_entry_point(name: str, value: str) -> Path:
    try:
        from importlib import metadata

        target = metadata.EntryPoint(name, value, ENTRY_POINT_GROUP).load()
        path = target() if callable(target) else target
    except ModuleNotFoundError:
        raise
    except Exception as exc:  # a broken plug-in must not look like our bug
        raise MappingError(f"entry point {name!r} ({value}): failed to load: {exc}") from None
    return Path(os.fspath(path))


def _plugin_entry_points(refresh: bool = False) -> list[tuple[str, str]]:
    """(name, value) of the group's entry points.

    Scanning every installed distribution costs ~45 ms in a framework-sized environment, a
    sixth of the CLI's start-up budget, so the answer is cached per interpreter and per state
    of sys.path (any install or uninstall changes a site directory's mtime)."""
    key_parts = [sys.executable]
    for entry in sys.path:
        try:
            key_parts.append(f"{entry}:{os.stat(entry or '.').st_mtime_ns}")
        except OSError:
            continue
    key = hashlib.sha256("\n".join(key_parts).encode()).hexdigest()[:24]
    folder = cache_dir()
    cache = folder / f"plugins-{key}.json"
    if not refresh:
        try:
            return [tuple(item) for item in json.loads(cache.read_text())]  # type: ignore[misc]
        except (OSError, ValueError):
            pass
    from importlib import metadata  # ~15 ms: only on a cache miss

    found = sorted((ep.name, ep.value) for ep in metadata.entry_points(group=ENTRY_POINT_GROUP))
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(found))
        os.replace(tmp, cache)
    except OSError:
        pass  # a read-only home is fine: we just scan every time
    return found


def load_mappings(extra_dirs: Sequence[str | os.PathLike[str]] = (), *, plugins: bool = True) -> MappingSet:
    """Load built-in tables, plug-in tables and `extra_dirs`, validated and merged."""
    dirs = [builtin_mappings_dir()]
    if plugins:
        dirs += entry_point_dirs()
    dirs += [Path(os.fspath(d)) for d in extra_dirs]
    return _load_cached(tuple(d.resolve() for d in dirs))


@lru_cache(maxsize=8)
def _load_cached(dirs: tuple[Path, ...]) -> MappingSet:
    files: list[Path] = []
    for directory in dirs:
        if not directory.is_dir():
            raise MappingError(f"{directory}: mapping directory does not exist")
        files += sorted(directory.rglob("*.yaml")) + sorted(directory.rglob("*.yml"))
    cached = _read_pickle(files)
    if cached is not None:
        return cached
    result = MappingSet()
    for path in files:
        _merge_file(result, path)
        result.sources.append(path)
    _derive_inplace(result)
    derive_runtime_entries(result)
    _check_complete(result)
    _write_pickle(files, result)
    return result


def _pickle_path(files: list[Path]) -> Path | None:
    """Validated tables are cached (pickled) per exact set of table files and their mtimes:
    parsing YAML and ~60 patterns costs a tenth of the CLI's start-up budget."""
    from precision_transpiler.version import __version__

    parts = [__version__, sys.version]
    try:
        # the code that builds the tables is part of the key too (matters while developing)
        code = [Path(__file__).with_name(n) for n in ("registry.py", "patterns.py", "model.py", "layers.py")]
        for f in (*code, Path(__file__).with_name("precision_classes.py"), *files):
            st = f.stat()
            parts.append(f"{f.resolve()}:{st.st_mtime_ns}:{st.st_size}")
    except OSError:
        return None
    key = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]
    return cache_dir() / f"tables-{key}.pickle"


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ptranspile"


def _read_pickle(files: list[Path]) -> MappingSet | None:
    path = _pickle_path(files)
    if path is None or os.environ.get("PTRANSPILE_NO_CACHE"):
        return None
    try:
        with path.open("rb") as fh:
            value = pickle.load(fh)
    except Exception:  # missing, truncated or from another version: rebuild
        return None
    return value if isinstance(value, MappingSet) else None


def _write_pickle(files: list[Path], value: MappingSet) -> None:
    path = _pickle_path(files)
    if path is None or os.environ.get("PTRANSPILE_NO_CACHE"):
        return
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tmp.open("wb") as fh:
            pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except Exception:  # a read-only home or an unpicklable plug-in table: just do not cache
        pass
    finally:  # never leave a partial file behind (an error, Ctrl-C)
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


# ----------------------------------------------------------------------------------------------


class _Where:
    """Formats `file:line: key: message` for one table."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def error(self, line: int, key: str, message: str) -> MappingError:
        return MappingError(f"{self.path}:{line}: {key}: {message}")


def _merge_file(result: MappingSet, path: Path) -> None:
    import yaml  # only when tables are (re)parsed: the pickled tables need no YAML

    from precision_transpiler.mappings.yaml_lines import load_yaml_with_lines

    where = _Where(path)
    try:
        raw = path.read_bytes()
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise MappingError(f"{path}:{line}: not valid UTF-8 (byte 0x{raw[exc.start]:02x})") from None
    except OSError as exc:
        raise MappingError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        data = load_yaml_with_lines(path)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise MappingError(f"{path}:{line}: invalid YAML: {problem}") from None
    except OSError as exc:
        raise MappingError(f"{path}: cannot read: {exc.strerror}") from None
    if data is None:
        return
    if not isinstance(data, LineDict):
        raise where.error(1, "<top>", "a mapping table must be a YAML mapping with a 'kind' key")
    kind = data.get("kind")
    handler = _HANDLERS.get(kind) if isinstance(kind, str) else None
    if handler is None:
        raise where.error(
            data.lines.get("kind", data.line), "kind", f"expected one of {sorted(_HANDLERS)}, got {kind!r}"
        )
    handler(result, data, where)


def _expect(where: _Where, parent: LineDict, key: str, kind: type | tuple[type, ...], what: str) -> Any:
    value = parent.get(key)
    if not isinstance(value, kind):
        raise where.error(parent.lines.get(key, parent.line), key, f"expected {what}, got {_show(value)}")
    return value


def _show(value: Any) -> str:
    if value is None:
        return "nothing"
    return f"{type(value).__name__} {value!r}"[:80]


def _unknown_keys(where: _Where, data: LineDict, allowed: Iterable[str], context: str) -> None:
    for key in data:
        if key not in allowed:
            raise where.error(data.lines[key], f"{context}{key}", f"unknown key (allowed: {', '.join(allowed)})")


def _str_list(where: _Where, parent: LineDict, key: str, context: str) -> list[str]:
    value = parent.get(key)
    if isinstance(value, str):
        return [value]
    if not isinstance(value, LineList) or not value or not all(isinstance(v, str) for v in value):
        raise where.error(parent.lines.get(key, parent.line), f"{context}{key}", "expected a list of strings")
    return list(value)


def _frameworks(result: MappingSet, data: LineDict, where: _Where) -> None:
    _unknown_keys(where, data, ("kind", "frameworks"), "")
    frameworks = _expect(where, data, "frameworks", LineDict, "a mapping of framework names")
    for name, spec in frameworks.items():
        ctx = f"frameworks.{name}."
        if not isinstance(spec, LineDict):
            raise where.error(frameworks.lines[name], f"frameworks.{name}", "expected a mapping")
        _unknown_keys(
            where,
            spec,
            (
                "display",
                "roots",
                "imports",
                "companions",
                *_SYMBOL_LISTS,
                "operators",
                "reexports",
                "namespace_aliases",
                "import_helpers",
                "keyword_aliases",
                "as_array",
            ),
            ctx,
        )
        roots = _str_list(where, spec, "roots", ctx)
        companions = _str_list(where, spec, "companions", ctx) if "companions" in spec else []
        imports = spec.get("imports", LineDict())
        if not isinstance(imports, LineDict) or not all(isinstance(v, str) for v in imports.values()):
            raise where.error(spec.lines.get("imports", spec.line), f"{ctx}imports", "expected module: alias pairs")
        lists = {key: tuple(_qualified_list(where, spec, key, ctx)) for key in _SYMBOL_LISTS if key in spec}
        operators = spec.get("operators", LineDict())
        if not isinstance(operators, LineDict) or not all(
            op in OPERATORS and isinstance(f, str) and is_qualified(f) for op, f in operators.items()
        ):
            raise where.error(
                spec.lines.get("operators", spec.line),
                f"{ctx}operators",
                f"expected operator: qualified function pairs (operators: {' '.join(OPERATORS)})",
            )
        reexports = spec.get("reexports", LineDict())
        if not isinstance(reexports, LineDict) or not all(
            is_qualified(k) and isinstance(v, str) and is_qualified(v) for k, v in reexports.items()
        ):
            raise where.error(
                spec.lines.get("reexports", spec.line), f"{ctx}reexports", "expected namespace: namespace pairs"
            )
        namespace_aliases = spec.get("namespace_aliases", LineDict())
        if not isinstance(namespace_aliases, LineDict) or not all(
            is_qualified(k) and isinstance(v, str) and is_qualified(v) for k, v in namespace_aliases.items()
        ):
            raise where.error(
                spec.lines.get("namespace_aliases", spec.line),
                f"{ctx}namespace_aliases",
                "expected namespace: namespace pairs",
            )
        aliases = spec.get("keyword_aliases", LineDict())
        if not isinstance(aliases, LineDict) or not all(
            isinstance(k, str) and isinstance(v, str) and k.isidentifier() and v.isidentifier()
            for k, v in aliases.items()
        ):
            raise where.error(
                spec.lines.get("keyword_aliases", spec.line), f"{ctx}keyword_aliases", "expected keyword: keyword pairs"
            )
        as_array = spec.get("as_array")
        if as_array is not None and not (isinstance(as_array, str) and is_qualified(as_array)):
            raise where.error(spec.lines.get("as_array", spec.line), f"{ctx}as_array", "expected a qualified function")
        display = spec.get("display", name)
        helpers = _import_helpers(where, spec, ctx) if "import_helpers" in spec else {}
        result.frameworks[name] = FrameworkInfo(
            name,
            str(display),
            tuple(roots),
            dict(imports),
            tuple(companions),
            **lists,
            operators=dict(operators),
            keyword_aliases=dict(aliases),
            as_array=as_array,
            reexports=dict(reexports),
            namespace_aliases=dict(namespace_aliases),
            import_helpers=helpers,
        )


def _import_helpers(where: _Where, spec: LineDict, context: str) -> dict[str, ImportHelper]:
    """`import_helpers:` qualified function -> {module: POSITION, module_keyword: K, name: KEYWORD,
    returns: value|pair}."""
    helpers = spec.get("import_helpers")
    line = spec.lines.get("import_helpers", spec.line)
    if not isinstance(helpers, LineDict):
        raise where.error(line, f"{context}import_helpers", "expected a mapping of qualified function names")
    found: dict[str, ImportHelper] = {}
    for function, fields in helpers.items():
        here = f"{context}import_helpers.{function}"
        if not is_qualified(function) or not isinstance(fields, LineDict):
            raise where.error(helpers.lines.get(function, line), here, "expected qualified.name: {module: 0, ...}")
        _unknown_keys(where, fields, ("module", "module_keyword", "name", "returns"), here + ".")
        position, keyword, name = fields.get("module", 0), fields.get("module_keyword"), fields.get("name")
        returns = fields.get("returns", "value")
        if not isinstance(position, int) or not all(isinstance(v, str | None) for v in (keyword, name)):
            raise where.error(fields.line, here, "module: a position, module_keyword and name: keywords")
        if returns not in ("value", "pair"):
            raise where.error(fields.lines.get("returns", fields.line), f"{here}.returns", "expected value or pair")
        found[function] = ImportHelper(position, keyword, name, returns)
    return found


#: frameworks.yaml keys that list qualified names (FrameworkInfo fields of the same names)
_SYMBOL_LISTS = ("module_bases", "layer_namespaces", "not_layers", "model_bases", "model_calls", "sequential_calls")


def _qualified_list(where: _Where, parent: LineDict, key: str, context: str) -> list[str]:
    values = _str_list(where, parent, key, context)
    for value in values:
        if not is_qualified(value):
            raise where.error(
                parent.lines.get(key, parent.line), f"{context}{key}", f"{value!r} is not a qualified name"
            )
    return values


def _dtypes(result: MappingSet, data: LineDict, where: _Where) -> None:
    _unknown_keys(where, data, ("kind", "canonical", "symbols", "strings", "keras_policies", "without_equivalent"), "")
    if "canonical" in data:
        result.dtype_canonical = tuple(_str_list(where, data, "canonical", ""))
    canonical = set(result.dtype_canonical)
    for section, target in (("symbols", result.dtype_symbols), ("strings", result.dtype_strings)):
        if section not in data:
            continue
        table = _expect(where, data, section, LineDict, "a mapping of framework -> dtype spellings")
        for fw, spellings in table.items():
            if not isinstance(spellings, LineDict):
                raise where.error(table.lines[fw], f"{section}.{fw}", "expected a mapping canonical dtype -> list")
            for canon in spellings:
                if canonical and canon not in canonical:
                    raise where.error(spellings.lines[canon], f"{section}.{fw}.{canon}", "not a canonical dtype name")
                values = _str_list(where, spellings, canon, f"{section}.{fw}.")
                if section == "symbols":
                    for v in values:
                        if "." not in v or not is_qualified(v):
                            raise where.error(
                                spellings.lines[canon],
                                f"{section}.{fw}.{canon}",
                                f"{v!r} is not a qualified name",
                            )
                target.setdefault(fw, {})[canon] = values
    if "keras_policies" in data:
        policies = _expect(where, data, "keras_policies", LineDict, "a mapping of policy names")
        for name, spec in policies.items():
            if not isinstance(spec, LineDict) or set(spec) != {"variable", "compute"}:
                raise where.error(policies.lines[name], f"keras_policies.{name}", "expected {variable, compute}")
            result.keras_policies[name] = dict(spec)
    if "without_equivalent" in data:
        table = _expect(where, data, "without_equivalent", LineDict, "a mapping of framework -> dtype symbols")
        for fw in table:
            result.dtype_without_equivalent[fw] = frozenset(_qualified_list(where, table, fw, "without_equivalent."))


def _ops(result: MappingSet, data: LineDict, where: _Where) -> None:
    _unknown_keys(where, data, ("kind", "emit_only", "ops", "derived"), "")
    for method in _str_list(where, data, "derived", "") if "derived" in data else ():
        if not method.endswith("_"):
            raise where.error(data.lines["derived"], "derived", f"{method!r} is not an in-place method (name_)")
        result.derived_inplace[method] = f"{where.path}:{data.lines['derived']}"
    ops = _expect(where, data, "ops", LineDict, "a mapping of op names")
    framework_keys = set(result.frameworks) | {"torch", "jax", "tf", "numpy"}
    # frameworks whose patterns in this file only emit code (the table converts one way)
    emit_only = set(_str_list(where, data, "emit_only", "")) if "emit_only" in data else set()
    if emit_only - framework_keys:
        raise where.error(
            data.lines["emit_only"], "emit_only", f"unknown framework(s) {sorted(emit_only - framework_keys)}"
        )
    for name, spec in ops.items():
        ctx = f"ops.{name}"
        line = ops.lines[name]
        if not isinstance(spec, LineDict):
            raise where.error(line, ctx, "expected a mapping")
        _unknown_keys(
            where,
            spec,
            (
                "summary",
                "params",
                "drop",
                "warn_if_missing",
                "warn",
                "once",
                "unsupported",
                "returns",
                "draws",
                *sorted(framework_keys),
            ),
            f"{ctx}.",
        )
        once = spec.get("once")
        if once is not None and not isinstance(once, bool):
            raise where.error(spec.lines.get("once", line), f"{ctx}.once", "expected true or false")
        draws = spec.get("draws")
        if draws is not None and not isinstance(draws, bool):
            raise where.error(spec.lines.get("draws", line), f"{ctx}.draws", "expected true or false")
        unsupported = spec.get("unsupported", LineDict())
        if not isinstance(unsupported, LineDict) or not all(
            fw in framework_keys and isinstance(v, str) for fw, v in unsupported.items()
        ):
            raise where.error(
                spec.lines.get("unsupported", line), f"{ctx}.unsupported", "expected framework: reason pairs"
            )
        returns = spec.get("returns")
        if returns is not None and returns not in OP_RESULTS:
            raise where.error(
                spec.lines.get("returns", line), f"{ctx}.returns", f"expected one of {sorted(OP_RESULTS)}"
            )
        op_warn = spec.get("warn")
        if op_warn is not None and not isinstance(op_warn, str):
            raise where.error(spec.lines.get("warn", line), f"{ctx}.warn", "expected a message string")
        warn = spec.get("warn_if_missing", LineDict())
        if not isinstance(warn, LineDict) or not all(isinstance(v, str) for v in warn.values()):
            raise where.error(
                spec.lines.get("warn_if_missing", line), f"{ctx}.warn_if_missing", "expected param: message"
            )
        params = spec.get("params", LineDict())
        if not isinstance(params, LineDict):
            raise where.error(spec.lines.get("params", line), f"{ctx}.params", "expected name: kind pairs")
        for pname, pkind in params.items():
            if pkind not in PARAM_KINDS:
                raise where.error(
                    params.lines[pname], f"{ctx}.params.{pname}", f"kind must be one of {sorted(PARAM_KINDS)}"
                )
        drop = frozenset(_str_list(where, spec, "drop", f"{ctx}.")) if "drop" in spec else frozenset()
        previous = result.ops.get(name)
        patterns: dict[str, tuple[Pattern, ...]] = dict(previous.patterns) if previous else {}
        merged_params = {**(previous.params if previous else {}), **params}
        for fw in framework_keys & set(spec):
            patterns[fw] = _patterns(
                where, spec, fw, f"{ctx}.{fw}", set(merged_params), merged_params, emit_only=fw in emit_only
            )
        result.ops[name] = OpSpec(
            name=name,
            summary=str(spec.get("summary", previous.summary if previous else "")),
            params=merged_params,
            drop=drop | (previous.drop if previous else frozenset()),
            patterns=patterns,
            origin=f"{where.path}:{line}",
            warn_if_missing={**(previous.warn_if_missing if previous else {}), **warn},
            warn=op_warn if op_warn is not None else (previous.warn if previous else None),
            once=once if once is not None else (previous.once if previous else False),
            unsupported={**(previous.unsupported if previous else {}), **unsupported},
            returns=returns if returns is not None else (previous.returns if previous else None),
            draws=draws if draws is not None else (previous.draws if previous else False),
        )


def _patterns(
    where: _Where,
    spec: LineDict,
    fw: str,
    ctx: str,
    params: set[str],
    kinds: dict[str, str] | None = None,
    *,
    emit_only: bool = False,
) -> tuple[Pattern, ...]:
    raw = spec[fw]
    line = spec.lines[fw]
    items: list[tuple[Any, int]]
    if isinstance(raw, str | LineDict):
        items = [(raw, line)]
    elif isinstance(raw, LineList):
        items = list(zip(raw, raw.lines, strict=True))
    else:
        raise where.error(line, ctx, "expected a pattern string, a {pattern, bind} mapping or a list of them")
    out: list[Pattern] = []
    for item, item_line in items:
        bind: dict[str, object] = {}
        warn: str | None = None
        missing: dict[str, str] = {}
        unless_float: list[str] = []
        item_emit_only = emit_only
        if isinstance(item, LineDict):
            _unknown_keys(
                where, item, ("pattern", "bind", "warn", "warn_if_missing", "unless_float", "emit_only"), f"{ctx}."
            )
            item_emit_only = item.get("emit_only", emit_only)
            if not isinstance(item_emit_only, bool):
                raise where.error(item_line, f"{ctx}.emit_only", "expected true or false")
            warn = item.get("warn")
            if warn is not None and not isinstance(warn, str):
                raise where.error(item_line, f"{ctx}.warn", "expected a message string")
            # per pattern, so a warning about one target (JAX's int32 without x64) is said only there
            raw_missing = item.get("warn_if_missing", {})
            if not isinstance(raw_missing, dict) or not all(isinstance(v, str) for v in raw_missing.values()):
                raise where.error(item_line, f"{ctx}.warn_if_missing", "expected param: message")
            if set(raw_missing) - params:
                unknown_params = sorted(set(raw_missing) - params)
                raise where.error(item_line, f"{ctx}.warn_if_missing", f"{unknown_params} not declared in params")
            missing = dict(raw_missing)
            unless_float = _str_list(where, item, "unless_float", f"{ctx}.") if "unless_float" in item else []
            if set(unless_float) - params:
                unknown_params = sorted(set(unless_float) - params)
                raise where.error(item_line, f"{ctx}.unless_float", f"{unknown_params} not declared in params")
            text = item.get("pattern")
            raw_bind = item.get("bind", {})
            if not isinstance(raw_bind, dict) or not all(_is_bind_value(v) for v in raw_bind.values()):
                raise where.error(item_line, f"{ctx}.bind", "expected parameter: value pairs")
            for key, value in raw_bind.items():
                if (kinds or {}).get(key) == "dtype" and not isinstance(value, str):
                    raise where.error(item_line, f"{ctx}.bind.{key}", "expected a canonical dtype name")
            bind = {k: list(v) if isinstance(v, list) else v for k, v in raw_bind.items()}
        else:
            text = item
        if not isinstance(text, str):
            raise where.error(item_line, ctx, f"expected a pattern string, got {_show(text)}")
        try:
            pattern = parse_pattern(
                text, bind, warn, emit_only=item_emit_only, warn_if_missing=missing, unless_float=unless_float
            )
        except ValueError as exc:
            raise where.error(item_line, ctx, str(exc)) from None
        unknown = (pattern.params | set(bind)) - params
        if unknown:
            raise where.error(item_line, ctx, f"placeholder(s) {sorted(unknown)} not declared in params")
        out.append(pattern)
    return tuple(out)


def _is_bind_value(value: object) -> bool:
    """A `bind` constant: a YAML scalar, or a list of them (a shape or a tuple of dims)."""
    if isinstance(value, list):
        return all(isinstance(v, _BIND_SCALARS) for v in value)
    return isinstance(value, _BIND_SCALARS)


def _policies(where: _Where) -> None:
    """The built-in policies are read by `precision_transpiler.precision.policy`; a policy table elsewhere
    would be silently ignored, so say how policies are given instead."""
    if where.path.resolve() != (builtin_mappings_dir() / "policies" / "builtin.yaml").resolve():
        raise where.error(1, "kind", "policies are not mapping tables: pass a policy file with --policy FILE.yaml")


def _derive_inplace(result: MappingSet) -> None:
    """An op for each `derived:` in-place method (`x.triu_(1)`), from the op whose torch method
    pattern calls the out-of-place method (`{x}.triu({diagonal?})`): the same parameters and
    target patterns, the torch patterns calling the in-place method. All its patterns only emit
    code (as the in-place table's own): the in-place rule reads the torch ones, and the target
    patterns must not turn `jnp.triu(x)` back into a mutation."""
    for method, origin in result.derived_inplace.items():
        base = method[:-1]
        found = next(
            (
                (op, [p for p in op.patterns.get("torch", ()) if p.method_name == base])
                for op in result.ops.values()
                if any(p.method_name == base for p in op.patterns.get("torch", ()))
            ),
            None,
        )
        if found is None:
            raise MappingError(f"{origin}: derived in-place method {method!r}: no op maps the method {base!r}")
        op, methods = found
        torch_patterns = tuple(
            parse_pattern(
                p.text.replace(f".{base}(", f".{method}("),
                p.bind,
                p.warn,
                emit_only=True,
                warn_if_missing=p.warn_if_missing,
                unless_float=p.unless_float,
            )
            for p in methods
        )
        patterns = {
            fw: tuple(dataclasses.replace(p, emit_only=True) for p in fw_patterns)
            for fw, fw_patterns in op.patterns.items()
            if fw != "torch"
        }
        result.ops.setdefault(
            method,
            dataclasses.replace(
                op,
                name=method,
                summary=f"In place: {op.summary}",
                origin=origin,
                patterns={"torch": torch_patterns, **patterns},
            ),
        )


def _check_complete(result: MappingSet) -> None:
    for fw in ("torch", "jax", "tf", "numpy"):
        if fw not in result.frameworks:
            raise MappingError(f"mapping tables define no framework {fw!r} (is the frameworks table missing?)")


def _surface(result: MappingSet, data: LineDict, where: _Where) -> None:
    """`kind: surface`: a framework's method names and what lies outside models."""
    keys = ("kind", "framework", "tensor_methods", "module_methods", "outside_models", "packages", "kernel_packages")
    _unknown_keys(where, data, keys, "")
    framework = data.get("framework")
    if not isinstance(framework, str) or not framework:
        raise where.error(data.lines.get("framework", data.line), "framework", "expected a framework name")
    outside = data.get("outside_models", LineDict())
    if not isinstance(outside, LineDict) or not all(
        is_qualified(k.rstrip("_")) and isinstance(v, str) and v for k, v in outside.items()
    ):
        raise where.error(
            data.lines.get("outside_models", data.line), "outside_models", "expected qualified name: reason pairs"
        )
    previous = result.surfaces.get(framework)
    result.surfaces[framework] = Surface(
        frozenset(_str_list(where, data, "tensor_methods", "")) | (previous.tensor_methods if previous else set()),
        frozenset(_str_list(where, data, "module_methods", "")) | (previous.module_methods if previous else set()),
        {**(previous.outside_models if previous else {}), **outside},
        frozenset(_str_list(where, data, "packages", "")) | (previous.packages if previous else set()),
        frozenset(_str_list(where, data, "kernel_packages", "")) | (previous.kernel_packages if previous else set()),
    )


_HANDLERS: dict[str, Callable[[MappingSet, LineDict, _Where], None]] = {
    "surface": _surface,
    "frameworks": _frameworks,
    "dtypes": _dtypes,
    "ops": _ops,
    "precision_classes": precision_classes_handler,
    "policies": lambda result, data, where: _policies(where),
    "layers": layers_handler,
}

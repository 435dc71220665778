"""The policy data model: loading, `extends`, overrides and per-op decisions.

A policy says, per op class (mappings/precision_classes.yaml), which dtype parameters are stored
in, which dtype the op computes in, and which dtype it returns; plus a keep-fp32 list, a promote
list and overrides by module path glob or class name. Built-in policies live in
mappings/policies/builtin.yaml; a user's YAML file may `extends:` one of them.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
import os
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from precision_transpiler.errors import PolicyError

DEVICES = ("auto", "cpu", "gpu", "tpu")
DTYPES = ("float32", "bfloat16", "float16", "float64", "half")
OP_CLASSES = (
    "linear",
    "conv",
    "matmul",
    "attention",
    "embedding",
    "norm",
    "batch_norm",
    "softmax",
    "reduction",
    "loss",
    "elementwise_math",
    "pooling",
    "activation",
    "output",
)
_DTYPE_ALIASES = {
    "float32": "float32",
    "fp32": "float32",
    "f32": "float32",
    "full": "float32",
    "float": "float32",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "f16": "float16",
    "float64": "float64",
    "fp64": "float64",
    "half": "half",
}
_FIELDS = ("param", "compute", "output")


@dataclass(frozen=True)
class Precision:
    """The three dtypes of one decision, and the rule that produced it (for --report)."""

    param: str
    compute: str
    output: str
    rule: str


@dataclass(frozen=True)
class Override:
    """`path:` (glob over module paths such as `encoder.layer.*.attention`) or `class:`."""

    path: str | None = None
    class_name: str | None = None
    values: dict[str, str] = field(default_factory=dict)

    def matches(self, path: str | None, class_name: str | None) -> bool:
        if self.path is not None:
            return path is not None and fnmatch.fnmatchcase(path, self.path)
        return self.class_name is not None and self.class_name == class_name


@dataclass(frozen=True)
class Policy:
    """Default dtypes for parameters, computation and outputs (jmp's three-part policy), with
    per-class and per-module refinements. Dtypes are resolved (no `half`)."""

    name: str
    param: str = "float32"
    compute: str = "float32"
    output: str = "float32"
    device: str = "auto"
    # the low-precision dtype as the policy spells it (half / bfloat16 / float16; "" when it has
    # none): under device "auto" the generated code decides from it where it runs
    requested: str = ""
    description: str = ""
    classes: dict[str, dict[str, str]] = field(default_factory=dict)
    keep_fp32: tuple[str, ...] = ()
    promote: tuple[str, ...] = ()
    overrides: tuple[Override, ...] = ()

    @property
    def is_full_precision(self) -> bool:
        return (
            self.param == self.compute == self.output == "float32"
            and all(v == "float32" for c in self.classes.values() for v in c.values())
            and not any(v != "float32" for o in self.overrides for v in o.values.values())
        )

    def precision_for(self, op_class: str | None, path: str | None = None, class_name: str | None = None) -> Precision:
        """Decide dtypes for one op/layer; the last matching override wins."""
        values = {"param": self.param, "compute": self.compute, "output": self.compute}
        rule = f"policy {self.name}: default"
        if op_class is not None and op_class in self.classes:
            values.update(self.classes[op_class])
            rule = f"policy {self.name}: class {op_class}"
        if op_class in self.keep_fp32:
            values["compute"] = "float32"
            values["output"] = "float32"
            rule = f"policy {self.name}: keep_fp32 {op_class}"
        for override in self.overrides:
            if override.matches(path, class_name):
                values.update(override.values)
                rule = f"policy {self.name}: override {override.path or override.class_name}"
        if op_class == "output":
            values["output"] = self.classes.get("output", {}).get("output", self.output)
        return Precision(values["param"], values["compute"], values["output"], rule)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "param": self.param,
            "compute": self.compute,
            "output": self.output,
            "device": self.device,
            "requested": self.requested,
            "classes": self.classes,
            "keep_fp32": list(self.keep_fp32),
            "promote": list(self.promote),
            "overrides": [{"path": o.path, "class": o.class_name, **o.values} for o in self.overrides],
        }


def builtin_policies_file() -> Path:
    from precision_transpiler.mappings.registry import builtin_mappings_dir

    return builtin_mappings_dir() / "policies" / "builtin.yaml"


@lru_cache(maxsize=1)
def _builtin_specs() -> dict[str, dict[str, Any]]:
    path = builtin_policies_file()
    cache = _spec_cache(path)
    if cache is not None:
        try:
            return json.loads(cache.read_text())  # type: ignore[no-any-return]
        except (OSError, ValueError):
            pass
    data = _read_yaml(path)
    specs = data.get("policies") if isinstance(data, dict) else None
    if not isinstance(specs, dict):
        raise PolicyError(f"{path}: expected 'policies:' mapping")
    if cache is not None:
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(specs))
            os.replace(tmp, cache)
        except (OSError, TypeError, ValueError):
            pass
        finally:  # never leave a partial file behind (an error, Ctrl-C)
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
    return specs


def _spec_cache(path: Path) -> Path | None:
    """Parsed built-in policies, cached as JSON per file version: loading PyYAML alone would
    cost a twentieth of the CLI's start-up budget."""
    if os.environ.get("PTRANSPILE_NO_CACHE"):
        return None
    try:
        st = path.stat()
    except OSError:
        return None
    from precision_transpiler.mappings.registry import cache_dir

    key = hashlib.sha256(f"{path.resolve()}:{st.st_mtime_ns}:{st.st_size}".encode()).hexdigest()[:24]
    return cache_dir() / f"policies-{key}.json"


BUILTIN_POLICIES: tuple[str, ...] = ("fp32", "mixed", "mixed-bf16", "mixed-fp16", "bf16", "fp16")


def _read_yaml(path: Path) -> Any:
    import yaml

    try:
        data = path.read_bytes()
        return yaml.safe_load(data.decode("utf-8"))
    except OSError as exc:
        raise PolicyError(f"{path}: cannot read policy: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise PolicyError(f"{path}:{line}: not valid UTF-8 (byte 0x{data[exc.start]:02x})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise PolicyError(f"{path}{line}: invalid YAML: {getattr(exc, 'problem', exc)}") from None


def _dtype(value: Any, where: str) -> str:
    dtype = _DTYPE_ALIASES.get(value.strip().lower()) if isinstance(value, str) else None
    if dtype is None:
        raise PolicyError(f"{where}: unknown dtype {value!r} (use one of {', '.join(DTYPES)})")
    return dtype


def _kind(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"[:80]


def _resolve(dtype: str, device: str) -> str:
    """`half` as jmp resolves it: float16 on GPUs, bfloat16 elsewhere. Under "auto" the static
    passes plan with bfloat16 and the generated code picks the real dtype where it runs."""
    if dtype == "half":
        return "float16" if device == "gpu" else "bfloat16"
    return dtype


def _build(
    name: str, spec: dict[str, Any], device: str, where: str, seen: tuple[str, ...], base_dir: Path | None = None
) -> Policy:
    allowed = {
        "extends",
        "description",
        "param",
        "compute",
        "output",
        "classes",
        "keep_fp32",
        "promote",
        "overrides",
        "kind",
        "name",
    }
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise PolicyError(f"{where}: unknown key(s) {unknown} (allowed: {', '.join(sorted(allowed))})")
    for key in ("extends", "description", "kind", "name"):
        if key in spec and not isinstance(spec[key], str):
            raise PolicyError(f"{where}: {key}: expected a string, got {_kind(spec[key])}")
    for key in ("keep_fp32", "promote"):
        if key in spec and not (isinstance(spec[key], list) and all(isinstance(item, str) for item in spec[key])):
            raise PolicyError(f"{where}: {key}: expected a list of op classes, got {_kind(spec[key])}")
    if spec.get("overrides") is not None and not isinstance(spec["overrides"], list):
        raise PolicyError(f"{where}: overrides: expected a list of mappings, got {_kind(spec['overrides'])}")
    base: Policy | None = None
    parent = spec.get("extends")
    if parent is not None:
        parent = str(parent)
        if parent.endswith((".yaml", ".yml")) and base_dir is not None and not Path(parent).is_absolute():
            parent = str(base_dir / parent)  # relative to the policy file that names it
        if parent in seen or parent == name:
            raise PolicyError(f"{where}: 'extends' cycle through {parent!r}")
        base = _policy(parent, device, (*seen, name, where))
    values = {f: getattr(base, f) if base else "float32" for f in _FIELDS}
    for f in _FIELDS:
        if f in spec:
            values[f] = _resolve(_dtype(spec[f], f"{where}: {f}"), device)
    classes: dict[str, dict[str, str]] = {k: dict(v) for k, v in (base.classes if base else {}).items()}
    raw_classes = spec.get("classes") or {}
    if not isinstance(raw_classes, dict):
        raise PolicyError(f"{where}: classes must be a mapping of op class -> dtypes")
    for cls, dtypes in raw_classes.items():
        if cls not in OP_CLASSES:
            raise PolicyError(f"{where}: classes.{cls}: unknown op class (known: {', '.join(OP_CLASSES)})")
        if not isinstance(dtypes, dict) or set(dtypes) - set(_FIELDS):
            raise PolicyError(f"{where}: classes.{cls}: expected a mapping with param/compute/output")
        merged = classes.setdefault(cls, {})
        for f, v in dtypes.items():
            merged[f] = _resolve(_dtype(v, f"{where}: classes.{cls}.{f}"), device)
    # A child changing `compute` moves every class that followed the parent's compute.
    if base is not None and values["compute"] != base.compute:
        for merged in classes.values():
            if merged.get("compute") == base.compute:
                merged["compute"] = values["compute"]
    keep = tuple(spec.get("keep_fp32", base.keep_fp32 if base else ()))
    for cls in keep:
        if cls not in OP_CLASSES:
            raise PolicyError(f"{where}: keep_fp32: unknown op class {cls!r}")
    promote = tuple(spec.get("promote", base.promote if base else ()))
    overrides = list(base.overrides if base else ())
    for i, raw in enumerate(spec.get("overrides") or []):
        if not isinstance(raw, dict) or ("path" in raw) == ("class" in raw):
            raise PolicyError(f"{where}: overrides[{i}]: give exactly one of 'path' or 'class'")
        extra = set(raw) - {"path", "class", *_FIELDS}
        if extra:
            raise PolicyError(f"{where}: overrides[{i}]: unknown key(s) {sorted(extra)}")
        for key in ("path", "class"):
            if key in raw and not isinstance(raw[key], str):
                raise PolicyError(f"{where}: overrides[{i}].{key}: expected a string, got {_kind(raw[key])}")
        vals = {f: _resolve(_dtype(raw[f], f"{where}: overrides[{i}].{f}"), device) for f in _FIELDS if f in raw}
        overrides.append(Override(raw.get("path"), raw.get("class"), vals))
    return Policy(
        name=name,
        device=device,
        requested=_requested(spec, base, where),
        description=str(spec.get("description", base.description if base else "")),
        classes=classes,
        keep_fp32=keep,
        promote=promote,
        overrides=tuple(overrides),
        **values,
    )


def _requested(spec: dict[str, Any], base: Policy | None, where: str) -> str:
    """The policy's low-precision dtype as spelled (`half` stays `half`): its own `compute` when
    low, else its parent's, else the first low dtype among its classes and overrides."""
    if "compute" in spec:
        compute = _dtype(spec["compute"], f"{where}: compute")
        if compute in ("half", "bfloat16", "float16"):
            return compute
    if base is not None and base.requested:
        return base.requested
    raw = [v for d in (spec.get("classes") or {}).values() if isinstance(d, dict) for v in d.values()]
    raw += [v for o in spec.get("overrides") or [] if isinstance(o, dict) for k, v in o.items() if k in _FIELDS]
    raw += [spec.get("param")]
    spelled = [_DTYPE_ALIASES.get(str(v).strip().lower()) for v in raw if v is not None]
    return next((d for d in spelled if d in ("half", "bfloat16", "float16")), "")


def _policy(name: str, device: str, seen: tuple[str, ...] = ()) -> Policy:
    specs = _builtin_specs()
    if name in specs:
        return _build(name, specs[name], device, f"{builtin_policies_file()}: {name}", seen)
    if name.endswith((".yaml", ".yml")):
        path = Path(name)
        if not path.is_file():
            raise PolicyError(f"policy file {name} does not exist")
        if str(path.resolve()) in seen:
            raise PolicyError(f"{name}: 'extends' cycle through {name!r}")
        data = _read_yaml(path)
        if not isinstance(data, dict):
            raise PolicyError(f"{name}: a policy file must be a YAML mapping")
        return _build(str(data.get("name", path.stem)), data, device, name, (*seen, str(path.resolve())), path.parent)
    raise PolicyError(
        f"unknown policy {name!r} (choose from {', '.join(BUILTIN_POLICIES)}, a jmp string such as "
        "'params=float32,compute=bfloat16,output=float32', or a policy .yaml file)"
    )


def _parse_jmp(text: str, device: str) -> Policy:
    parts: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or key not in ("params", "compute", "output"):
            raise PolicyError(f"invalid policy string {text!r}: expected params=...,compute=...,output=...")
        dtype = _DTYPE_ALIASES.get(value.strip().lower())
        if dtype is None:
            raise PolicyError(f"invalid policy string {text!r}: unknown dtype {value.strip()!r}")
        parts[key] = _resolve(dtype, device)
    param = parts.get("params", "float32")
    compute = parts.get("compute", param)
    output = parts.get("output", compute)
    if compute == "float32" and param == "float32":
        return replace(_policy("fp32", device), name=text, output=output)
    spec = {
        "extends": "mixed",
        "param": param,
        "compute": compute,
        "output": output,
        "classes": {"output": {"output": output}},
    }
    return _build(text, spec, device, f"policy string {text!r}", ())


def resolve_policy(spec: str, *, device: str = "auto") -> Policy:
    """Turn a policy name, jmp string or YAML path into a Policy; raise PolicyError if unknown."""
    if device not in DEVICES:
        raise PolicyError(f"unknown device {device!r} (choose from {', '.join(DEVICES)})")
    if "=" in spec and not spec.endswith((".yaml", ".yml")):
        return _parse_jmp(spec, device)
    return _policy(spec, device)

"""The policy data model and name resolution."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from precision_transpiler.errors import PolicyError

DEVICES = ("cpu", "gpu", "tpu")
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
}


@dataclass(frozen=True)
class Policy:
    """Default dtypes for parameters, computation and outputs (jmp's three-part policy)."""

    name: str
    param: str = "float32"
    compute: str = "float32"
    output: str = "float32"

    @property
    def is_full_precision(self) -> bool:
        return self.param == self.compute == self.output == "float32"


def _half(device: str) -> str:
    """jmp's "half": bf16 on TPU and CPU (fast bf16 kernels, fp16 is a trap on CPU), fp16 on GPU."""
    return "float16" if device == "gpu" else "bfloat16"


def builtin_policy(name: str, device: str) -> Policy | None:
    half = _half(device)
    table = {
        "fp32": Policy("fp32"),
        "mixed": Policy("mixed", "float32", half, "float32"),
        "mixed-bf16": Policy("mixed-bf16", "float32", "bfloat16", "float32"),
        "mixed-fp16": Policy("mixed-fp16", "float32", "float16", "float32"),
        "bf16": Policy("bf16", "bfloat16", "bfloat16", "bfloat16"),
        "fp16": Policy("fp16", "float16", "float16", "float16"),
    }
    return table.get(name)


BUILTIN_POLICIES: tuple[str, ...] = ("fp32", "mixed", "mixed-bf16", "mixed-fp16", "bf16", "fp16")


def _parse_jmp(text: str) -> Policy:
    parts: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or key not in ("params", "compute", "output"):
            raise PolicyError(f"invalid policy string {text!r}: expected params=...,compute=...,output=...")
        dtype = _DTYPE_ALIASES.get(value.strip().lower())
        if dtype is None:
            raise PolicyError(f"invalid policy string {text!r}: unknown dtype {value.strip()!r}")
        parts[key] = dtype
    return Policy(
        text,
        parts.get("params", "float32"),
        parts.get("compute", parts.get("params", "float32")),
        parts.get("output", parts.get("compute", "float32")),
    )


def resolve_policy(spec: str, *, device: str = "cpu") -> Policy:
    """Turn a policy name, jmp string or YAML path into a Policy; raise PolicyError if unknown."""
    if device not in DEVICES:
        raise PolicyError(f"unknown device {device!r} (choose from {', '.join(DEVICES)})")
    builtin = builtin_policy(spec, device)
    if builtin is not None:
        return builtin
    if "=" in spec:
        return _parse_jmp(spec)
    if spec.endswith((".yaml", ".yml")):
        path = Path(spec)
        if not path.is_file():
            raise PolicyError(f"policy file {spec} does not exist")
        raise PolicyError(f"{spec}: policy files are not supported yet")
    raise PolicyError(
        f"unknown policy {spec!r} (choose from {', '.join(BUILTIN_POLICIES)}, a jmp string such as "
        "'params=float32,compute=bfloat16,output=float32', or a policy .yaml file)"
    )

"""Print, for a policy, which layers and functions each target keeps in float32 (or another
dtype), read from the tables: `python -m precision_transpiler.precision.classes_table mixed`.

The policy (mappings/policies/builtin.yaml, or a policy file) decides per op class; which symbols
of each framework belong to a class is mappings/precision_classes.yaml. docs/policies.md shows
this output and the docs test runs the command, so the page cannot drift from the tables.
"""

from __future__ import annotations

import argparse
import sys

from precision_transpiler.mappings import load_mappings
from precision_transpiler.precision.policy import resolve_policy

TARGETS = {"torch": "torch", "jax": "Flax (`--to jax`)", "tf": "Keras (`--to tf`)"}
_RUNTIME = "precision_transpiler.runtime."


def _short(symbol: str) -> str:
    """`nn.LayerNorm`-like spellings: the runtime's definitions by their name alone (with a `*`:
    a torch-semantics definition of ptranspile's runtime)."""
    if symbol.startswith(_RUNTIME):
        return symbol.rpartition(".")[2] + "*"
    for prefix, short in (
        ("torch.nn.functional.", "F."), ("torch.nn.", "nn."), ("flax.nnx.", "nnx."),
        ("jax.numpy.", "jnp."), ("keras.layers.", "layers."), ("keras.ops.", "ops."), ("tensorflow.", "tf."),
    ):  # fmt: skip
        if symbol.startswith(prefix):
            return short + symbol[len(prefix) :]
    return symbol


def _is_layer(symbol: str) -> bool:
    return symbol.rpartition(".")[2][:1].isupper() and not symbol.startswith("Tensor.")


def table(policy_name: str, dtype: str = "float32") -> str:
    """Markdown: per target, the op classes the policy computes in `dtype`, with their layers and
    functions."""
    policy = resolve_policy(policy_name, device="cpu")
    classes = load_mappings(()).precision_classes
    kept = [name for name in classes if policy.precision_for(name).compute == dtype]
    lines = [f"Op classes `{policy.name}` computes in {dtype}: {', '.join(f'`{c}`' for c in kept)}.", ""]
    for target, title in TARGETS.items():
        lines += [f"**{title}**", "", "| class | layers | functions and methods |", "|---|---|---|"]
        for name in kept:
            symbols = classes[name].get(target, [])
            layers = ", ".join(f"`{_short(s)}`" for s in symbols if _is_layer(s)) or "-"
            functions = ", ".join(f"`{_short(s)}`" for s in symbols if not _is_layer(s)) or "-"
            lines.append(f"| `{name}` | {layers} | {functions} |")
        lines.append("")
    lines.append("`*`: a torch-semantics definition of ptranspile's runtime (`precision_transpiler/runtime/`).")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policy", nargs="?", default="mixed", help="a built-in policy name or a policy file")
    parser.add_argument("--dtype", default="float32", help="the compute dtype to list (default float32)")
    args = parser.parse_args(argv)
    sys.stdout.write(table(args.policy, args.dtype))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

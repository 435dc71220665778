"""`python -m precision_transpiler.precision.classes_table`: what a policy keeps in float32 on each
target, read from the tables (docs/policies.md shows its output)."""

from __future__ import annotations

from precision_transpiler.precision.classes_table import main, table


def test_mixed_lists_the_norms_of_every_target_and_not_the_matmuls() -> None:
    text = table("mixed")
    assert "`norm`" in text and "`softmax`" in text and "`linear`" not in text.splitlines()[0]
    sections = text.split("**")
    torch, flax, keras = sections[2], sections[4], sections[6]
    assert "`nn.LayerNorm`" in torch and "`F.layer_norm`" in torch
    assert "`nnx.LayerNorm`" in flax and "`LayerNorm*`" in flax
    assert "`layers.LayerNormalization`" in keras and "`Softmax*`" in keras


def test_fp32_keeps_every_class_and_bf16_none_in_float32(capsys) -> None:  # type: ignore[no-untyped-def]
    assert "`linear`" in table("fp32").splitlines()[0]
    assert main(["bf16", "--dtype", "bfloat16"]) == 0
    assert "`linear`" in capsys.readouterr().out.splitlines()[0]

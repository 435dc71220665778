"""Framework facts the converters, policies and weight loading read from the tables, not from code.

mappings/frameworks.yaml says which classes are module bases and where layer classes live, and
which function applies an operator with torch's promotion; the layer tables' `params:` say where a
target keeps each torch parameter and in which layout; the op tables' `returns:` say which ops
give integers. Each is validated when the tables load, and each drives behaviour: changing the
table changes what the tool does.
"""

from __future__ import annotations

from pathlib import Path

from precision_transpiler import transpile
from precision_transpiler.mappings import load_mappings
from precision_transpiler.mappings.layers import LAYOUTS, ParamLayout


def test_layer_classes_are_told_from_functions_and_module_bases() -> None:
    frameworks = load_mappings().frameworks
    torch, jax, tf = frameworks["torch"], frameworks["jax"], frameworks["tf"]
    assert torch.is_layer_class("torch.nn.Conv2d")
    assert torch.is_layer_class("torch.nn.TransformerEncoderLayer")
    assert not torch.is_layer_class("torch.nn.functional.conv2d")
    assert not torch.is_layer_class("torch.nn.functional.Any")  # a whole namespace excluded
    assert not torch.is_layer_class("torch.nn.Parameter")
    assert not torch.is_layer_class("torch.nn.Module")  # a module base
    assert not torch.is_layer_class("torch.nn.modules.module.Module")
    assert not torch.is_layer_class("torch.Tensor")  # outside the namespaces
    assert torch.is_module_base("torch.nn.modules.module.Module")
    assert jax.is_layer_class("flax.nnx.Linear") and not jax.is_layer_class("flax.nnx.relu")
    assert jax.is_layer_class("precision_transpiler.runtime.flax.conv.Conv2d")
    assert tf.is_layer_class("keras.layers.Dense") and not tf.is_layer_class("keras.layers.add")
    assert not tf.is_layer_class("keras.layers.Input")
    assert tf.is_module_base("keras.layers.Layer") and "keras.Model" in tf.model_bases


def test_an_nn_module_alias_is_a_module_base_in_both_targets() -> None:
    """`torch.nn.modules.module.Module` is `torch.nn.Module`: a model class either way."""
    src = (
        "import torch\nfrom torch.nn.modules.module import Module\n\n\n"
        "class Net(Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = torch.nn.Linear(4, 2)\n\n    def forward(self, x):\n        return self.fc(x)\n"
    )
    jax = transpile(src, to="jax").code
    assert "class Net(TorchModule)" in jax and "rngs" in jax and "def __call__" in jax
    tf = transpile(src, to="tf").code
    assert "class Net(TorchModule)" in tf and "def call" in tf


def test_linear_weight_layout_comes_from_the_layer_table() -> None:
    """One fact, two uses: torch code reading `fc.weight` and loading a torch state dict."""
    from precision_transpiler.weights.torch_to_flax import LAYOUT_TRANSFORMS, TORCH_PARAM_RULES

    mappings = load_mappings()
    assert mappings.layer_params["flax.nnx.Linear"] == {"weight": ParamLayout("kernel", "transposed")}
    target = mappings.layers["torch.nn.Linear"].targets["jax"]
    assert target.call == "flax.nnx.Linear"
    assert target.attributes == {"weight": "{layer}.kernel[...].T"}  # implied by the layout
    assert set(LAYOUT_TRANSFORMS) == set(LAYOUTS)
    name, transform = TORCH_PARAM_RULES["Linear"]["weight"]  # type: ignore[misc]
    import numpy as np

    weight = np.arange(6.0).reshape(2, 3)  # torch: (out, in)
    assert name == "kernel" and transform(weight, None).shape == (3, 2)
    conv = TORCH_PARAM_RULES["_ConvNd"]["weight"]  # the runtime's base of Conv1d/2d/3d
    assert conv is not None and conv[1](np.zeros((8, 4, 3, 5)), None).shape == (3, 5, 4, 8)  # OIHW -> HWIO


def test_integer_results_come_from_returns_and_integer_casts() -> None:
    functions, methods = load_mappings().integer_results("torch")
    assert {"torch.arange", "torch.argmax", "torch.randint"} <= functions
    assert {"argmax", "long", "int"} <= methods
    assert "float" not in methods and "torch.softmax" not in functions


def test_a_table_op_with_returns_int_is_promoted_by_the_keras_rule(tmp_path: Path) -> None:
    """Adding `returns: int` to an op in a table is all it takes for torch -> Keras to promote
    its result meeting a float as torch does."""

    def table(returns: str) -> Path:
        folder = tmp_path / (returns or "plain")
        folder.mkdir()
        (folder / "count.yaml").write_text(
            f"kind: ops\nops:\n  mylib_count:\n    summary: Non-zero elements.\n{returns}"
            "    params: {x: any}\n    torch: ['torch.ops.mylib.count({x})']\n"
            "    tf: ['keras.ops.count_nonzero({x})']\n"
        )
        return folder

    src = "import torch\n\n\ndef share(x, scale: float):\n    return torch.ops.mylib.count(x) * scale\n"
    plain = transpile(src, to="tf", mappings=[table("")]).code
    assert "keras.ops.count_nonzero(x) * scale" in plain and "keras.ops.multiply" not in plain
    promoted = transpile(src, to="tf", mappings=[table("    returns: int\n")]).code
    assert "keras.ops.multiply(keras.ops.count_nonzero(x), scale)" in promoted

"""convert/vendor.py: copying runtime definitions into converted code, across runtime modules.

The runtime modules here are small files in a temporary folder (vendor.SHIM_DIR is pointed at it);
tests/runtime/test_keras_runtime.py vendors and runs the real Keras runtime (its modules take helpers from
runtime/keras/functional.py and runtime/common.py).
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path
from typing import Any

import pytest

from precision_transpiler.convert import vendor
from precision_transpiler.convert.vendor import MARKER, vendor_shims

P = "precision_transpiler.runtime"


@pytest.fixture
def shims(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(vendor, "SHIM_DIR", tmp_path)

    def write(**modules: str) -> None:
        for name, source in modules.items():  # `flax__conv` is flax/conv.py
            path = tmp_path.joinpath(*name.split("__")).with_suffix(".py")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(source).lstrip("\n"), encoding="utf-8")

    return write


def definitions(code: str, user: str) -> list[str]:
    """The names the copied block defines, in order: from the marker to the converted code's own
    first assignment, to `user`."""
    names = []
    for node in ast.parse(code.split(MARKER, 1)[1]).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
            if user in targets:
                break
            names += targets
    return names


def run(code: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "vendored"}
    exec(compile(code, "<vendored>", "exec"), namespace)
    return namespace


A = """
import math


def _half(x):
    return x / 2


def _root(x):
    return math.sqrt(_half(x))


class Base:
    scale = 3

    def twice(self, x):
        return 2 * x


def unused():
    return 0
"""

B = f"""
from typing import Any

from {P}.a import Base, _root


def _unit(x: Any) -> Any:
    return _root(x) * 1


class Thing(Base):
    def __call__(self, x):
        return self.twice(_unit(x)) * self.scale


LIMIT = _root(16.0)
"""


def test_definitions_follow_imports_between_shim_modules(shims: Any) -> None:
    shims(a=A, b=B)
    code, missing = vendor_shims("import precision_transpiler\n\nT = precision_transpiler.runtime.b.Thing\n")
    assert missing == []
    assert f"from {P}" not in code and "import precision_transpiler" not in code
    # a's definitions (the module b imports from) first, each module in its source order
    assert definitions(code, "T") == ["_half", "_root", "Base", "_unit", "Thing"]
    assert "import math" in code and "from typing import Any" in code  # each module's own imports
    assert run(code)["T"]()(8.0) == 2 * 3 * 2.0


def test_module_level_assignment_after_what_it_calls(shims: Any) -> None:
    shims(a=A, b=B)
    code, missing = vendor_shims("import precision_transpiler\n\nL = precision_transpiler.runtime.b.LIMIT\n")
    assert missing == [] and definitions(code, "L") == ["_half", "_root", "LIMIT"]
    assert run(code)["L"] == 8**0.5


def test_each_definition_copied_once_across_modules(shims: Any) -> None:
    shims(a=A, b=B)
    src = (
        "import precision_transpiler\n\n"
        "T = precision_transpiler.runtime.b.Thing\n"
        "R = precision_transpiler.runtime.a._root\n"
        "B = precision_transpiler.runtime.a.Base\n"
    )
    code, missing = vendor_shims(src)
    assert missing == [] and definitions(code, "T") == ["_half", "_root", "Base", "_unit", "Thing"]
    ns = run(code)
    assert ns["R"](8.0) == 2.0 and issubclass(ns["T"], ns["B"])


def test_name_imported_into_a_shim_module_resolves_to_its_definition(shims: Any) -> None:
    shims(a=A, b=B)
    code, missing = vendor_shims("import precision_transpiler\n\nR = precision_transpiler.runtime.b._root\n")
    assert missing == [] and definitions(code, "R") == ["_half", "_root"]
    assert run(code)["R"](8.0) == 2.0


def test_transitive_across_three_modules_and_from_imports_in_converted_code(shims: Any) -> None:
    c = f"""
    from {P}.b import Thing


    class Bigger(Thing):
        def __call__(self, x):
            return 10 * super().__call__(x)
    """
    shims(a=A, b=B, c=c)
    code, missing = vendor_shims(f"from {P}.c import Bigger as Big\n\ny = Big()(8.0)\n")
    assert missing == []
    assert definitions(code, "y") == ["_half", "_root", "Base", "_unit", "Thing", "Bigger", "Big"]
    assert "Big = Bigger" in code and f"from {P}" not in code
    assert run(code)["y"] == 120.0


def test_import_time_needs_win_over_module_order_in_a_cycle(shims: Any) -> None:
    # Python could not import this pair, but each copied definition still comes after what it
    # needs when it runs (a base class); function bodies may name later definitions
    a = f"""
    from {P}.b import Base


    class Meta:
        tag = "meta"


    def helper():
        return Base.tag


    class Child(Base):
        pass
    """
    b = f"""
    from {P}.a import Meta, helper


    class Base(Meta):
        def describe(self):
            return helper()
    """
    shims(a=a, b=b)
    code, missing = vendor_shims("import precision_transpiler\n\nC = precision_transpiler.runtime.a.Child\n")
    assert missing == []
    assert definitions(code, "C") == ["Meta", "Base", "helper", "Child"]
    assert run(code)["C"]().describe() == "meta"


def test_functions_may_name_later_definitions(shims: Any) -> None:
    shims(
        a="""
        def first():
            return second() + 1


        def second():
            return 1
        """
    )
    code, missing = vendor_shims("import precision_transpiler\n\nv = precision_transpiler.runtime.a.first()\n")
    assert missing == [] and definitions(code, "v") == ["first", "second"]
    assert run(code)["v"] == 2


def test_missing_names_and_modules_are_reported(shims: Any) -> None:
    b = f"""
    from {P}.a import _gone


    def uses_gone():
        return _gone()
    """
    shims(a=A, b=b)
    src = (
        "import precision_transpiler\n\n"
        "f = precision_transpiler.runtime.b.uses_gone\n"
        "g = precision_transpiler.runtime.b.nothing\n"
        "h = precision_transpiler.runtime.nowhere.x\n"
    )
    code, missing = vendor_shims(src)
    assert missing == [f"{P}.nowhere.x", f"{P}.b.nothing", f"{P}.a._gone"]
    assert definitions(code, "f")[0] == "uses_gone"


def test_aliased_imports_between_shim_modules_are_refused(shims: Any) -> None:
    shims(a=A, b=f"from {P}.a import _root as root\n\n\ndef f(x):\n    return root(x)\n")
    with pytest.raises(ValueError, match="unaliased"):
        vendor_shims("import precision_transpiler\n\ny = precision_transpiler.runtime.b.f\n")


def test_relative_imports_between_shim_modules(shims: Any) -> None:
    shims(a=A, b="from .a import _root\n\n\ndef f(x):\n    return _root(x)\n")
    code, missing = vendor_shims("import precision_transpiler\n\ny = precision_transpiler.runtime.b.f(8.0)\n")
    assert missing == [] and "from .a" not in code and run(code)["y"] == 2.0


def test_nested_runtime_modules_and_relative_imports_into_common(shims: Any) -> None:
    # the real layout: flax/conv.py takes arithmetic from common.py, absolutely or relatively
    shims(
        common="def _pair(x):\n    return (x, x)\n",
        flax__functional="def _double(x):\n    return 2 * x\n",
        flax__conv=(
            f"from {P}.common import _pair\nfrom .functional import _double\n\n\n"
            "def conv(x):\n    return _pair(_double(x))\n"
        ),
        keras__conv="from ..common import _pair\n\n\ndef conv(x):\n    return _pair(x)\n",
    )
    code, missing = vendor_shims(f"import precision_transpiler\n\nf = {P}.flax.conv.conv(1)\n")
    assert missing == [] and definitions(code, "f") == ["_pair", "_double", "conv"] and run(code)["f"] == (2, 2)
    code, missing = vendor_shims(f"import precision_transpiler\n\nk = {P}.keras.conv.conv(1)\n")
    assert missing == [] and definitions(code, "k") == ["_pair", "conv"] and run(code)["k"] == (1, 1)
    assert "import precision_transpiler" not in code and "from .." not in code


def test_package_paths_are_not_references_and_unknown_modules_are_reported(shims: Any) -> None:
    shims(flax__conv="def conv(x):\n    return x\n")
    code, missing = vendor_shims(
        f"import precision_transpiler\n\nf = {P}.flax.conv.conv.__name__\ng = {P}.flax.nope.x\n"
    )
    assert missing == [f"{P}.flax.nope.x"]
    assert "f = conv.__name__" in code


def test_real_keras_conv_takes_its_helpers_from_functional_and_common() -> None:
    # read as text only: no keras needed
    code, missing = vendor_shims(f"import precision_transpiler\n\nL = {P}.keras.conv.Conv2d\n")
    names = definitions(code, "L")
    assert missing == [] and len(names) == len(set(names))
    # common's arithmetic first (the module the others import from), then each module's users
    assert names.index("_tuple") < names.index("_conv_nd") < names.index("_ConvNd") < names.index("Conv2d")
    assert names.index("_conv_padding_pairs") < names.index("_conv_nd")
    assert "import" not in "".join(line for line in code.splitlines() if "precision_transpiler" in line)


_SHADOWING_USER = """import torch.nn as nn


def _tuple(x):  # a helper of the user's, named like one the copied Conv2d calls
    return "mine"


class GroupNorm(nn.GroupNorm):  # a class of the user's, named like the copied one
    def forward(self, x):
        return super().forward(x) * 2


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(4, 4, 3)
        self.a = GroupNorm(2, 4)
        self.b = nn.GroupNorm(2, 4)

    def forward(self, x):
        return self.b(self.a(self.c(x))) + len(_tuple(x))
"""


@pytest.mark.slow
@pytest.mark.needs_torch
@pytest.mark.needs_jax
@pytest.mark.needs_tf
@pytest.mark.parametrize("to", ["jax", "tf"])
@pytest.mark.parametrize("policy", ["fp32", "mixed"])
def test_user_definitions_named_like_copied_ones_do_not_replace_them(tmp_path: Path, to: str, policy: str) -> None:
    """The user's `_tuple` and `GroupNorm`, defined after the copied runtime, would replace the
    copies for every copied function calling them at run time (the copied Conv2d calls `_tuple`):
    the copies keep a second name for that, the output runs like torch, and converting it again
    changes nothing."""
    import subprocess
    import sys

    import numpy as np
    import torch

    from precision_transpiler import transpile

    code = transpile(_SHADOWING_USER, to=to, policy=policy).code
    assert "_ptshim__tuple = _tuple" in code and "def _tuple(x):" in code
    assert transpile(code, to=to, policy=policy).code == code
    torch.manual_seed(0)
    namespace: dict[str, Any] = {}
    exec(compile(_SHADOWING_USER, "original.py", "exec"), namespace)
    model = namespace["M"]().eval()
    x = torch.randn(2, 4, 6, 6)
    with torch.no_grad():
        expected = model(x).numpy()
    out = tmp_path / "converted.py"
    out.write_text(code)
    weights = tmp_path / "w.npz"
    np.savez(weights, x=x.numpy(), **{k: v.numpy() for k, v in model.state_dict().items()})
    loader = (
        "from precision_transpiler.weights.torch_to_flax import load_torch_state_dict as load\n"
        "from flax import nnx\nmodel = converted.M(rngs=nnx.Rngs(0)); model.eval()\n"
        if to == "jax"
        else "from precision_transpiler.weights.torch_to_keras import load_torch_state_dict_keras as load\n"
        "model = converted.M(); model(data['x'], training=False)\n"
    )
    script = (
        f"import sys, numpy as np\nsys.path.insert(0, {str(tmp_path)!r})\nimport converted\n"
        f"data = dict(np.load({str(weights)!r}))\n{loader}"
        "load(model, {k: v for k, v in data.items() if k != 'x'})\n"
        + ("y = model(data['x'])\n" if to == "jax" else "y = model(data['x'], training=False)\n")
        + f"np.save({str(tmp_path / 'y.npy')!r}, np.asarray(y, dtype=np.float32))\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    got = np.load(tmp_path / "y.npy")
    tolerance = 1e-4 if policy == "fp32" else 5e-2  # mixed: bf16 convolutions
    np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance * np.abs(expected).max())


@pytest.mark.needs_jax
def test_imports_shared_with_policy_helpers_survive_stripping_the_policy() -> None:
    """A policy's helpers import `jax` (marked, for stripping) before the runtime's batch norm,
    which needs it too, is copied in: the copy's own import must remain once the policy is
    stripped, or the fp32 file verification compares against fails with NameError."""
    import libcst as cst

    from precision_transpiler import transpile
    from precision_transpiler.precision.strip import strip_inserted

    source = "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n"
    source += "        super().__init__()\n        self.bn = nn.BatchNorm1d(4)\n\n"
    source += "    def forward(self, x):\n        return self.bn(x)\n"
    mixed = transpile(source, to="jax", policy="mixed").code
    stripped, removed = strip_inserted(cst.parse_module(mixed))
    assert removed
    namespace: dict[str, Any] = {}
    exec(compile(stripped.code, "stripped.py", "exec"), namespace)
    import numpy as np

    out = namespace["Net"]()(np.ones((3, 4), np.float32))
    assert out.shape == (3, 4)


OPS_OF_THE_USER = """
import torch
import torch.nn as nn

ops = {"scale": 2.0}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x) * ops["scale"]
"""


@pytest.mark.needs_torch
@pytest.mark.needs_tf
def test_a_name_the_copies_import_and_the_user_binds_is_imported_under_another(tmp_path: Path) -> None:
    """Keras' copies use `ops` (`from keras import ops`); a file's own `ops` (kornia's `from .
    import ops`, here a dict) replaced it for every copied function: `'dict' object has no
    attribute 'cast'` at the first call. The copies import it as `_ptshim_ops`; the user's code
    keeps its `ops`."""
    from precision_transpiler import transpile
    from tests.helpers import convert_and_verify

    code = transpile(OPS_OF_THE_USER, to="tf").code
    assert "from keras import ops as _ptshim_ops\n" in code and "_ptshim_ops.cast(" in code
    assert '* ops["scale"]' in code and "\nfrom keras import ops\n" not in code
    assert code.count("_ptshim_ops") == code.count("_ptshim_ops.") + 1  # only the import binds it
    verdict = convert_and_verify(tmp_path, OPS_OF_THE_USER, "tf", "Net()", ["float32[2,4]"])
    assert verdict.passed, verdict.failures
    same = transpile(OPS_OF_THE_USER.replace('ops = {"scale": 2.0}', "from keras import ops"), to="tf").code
    assert "_ptshim_ops" not in same  # the same import is no clash

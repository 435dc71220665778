"""A file that requires torch in a `try` block at its top (`try: import torch / except
ImportError: raise ImportWarning(...)`).

Converted, the `try` imports nothing: it goes whole (a `try` whose body only passes never runs
its handlers; its `else` and `finally` bodies stay). With the runtime copied into the file, the
copies' own imports (`from flax import nnx`) go above them even when the file imports the same
names below the `try`, which ends the leading imports: the copies run first, when the module
loads. Both targets, both runtime layouts, import and verify.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from precision_transpiler import transpile
from precision_transpiler.convert.runtime_module import runtime_module_source
from precision_transpiler.verify import VerifyOptions, verify_files
from tests.helpers import on_both_targets

SOURCE = """try:
    import torch
except ImportError:
    raise ImportWarning("this model needs torch")
import torch.nn as nn


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("scale", torch.ones(4))

    def forward(self, x):
        return self.lin(x) * self.scale
"""

WITH_FINALLY = """try:
    import torch
except ImportError:
    raise
else:
    READY = True
finally:
    LOADED = True
"""


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_the_try_goes_its_else_and_finally_stay(target: str) -> None:
    assert "ImportWarning" not in transpile(SOURCE, to=target).code
    code = transpile(WITH_FINALLY, to=target).code
    assert "try:" not in code and "READY = True" in code and "LOADED = True" in code


def test_a_try_the_user_wrote_with_pass_stays() -> None:
    source = "import torch\n\ntry:\n    pass\nexcept ValueError:\n    x = 1\n"
    assert "try:\n    pass\nexcept ValueError:" in transpile(source, to="jax").code


@on_both_targets
@pytest.mark.parametrize("runtime", ["inline", "module"])
def test_the_converted_module_imports_and_verifies(tmp_path: Path, target: str, runtime: str) -> None:
    original = tmp_path / "required.py"
    original.write_text(SOURCE, encoding="utf-8")
    result = transpile(SOURCE, to=target, path=str(original), runtime=runtime)
    converted = tmp_path / f"required_{target}.py"
    converted.write_text(result.code, encoding="utf-8")
    if runtime == "module":
        text, missing = runtime_module_source(set(result.runtime_names), target)
        assert not missing
        (tmp_path / f"_ptranspile_runtime_{target}.py").write_text(text, encoding="utf-8")
    verdict = verify_files(original, converted, VerifyOptions(entry="M()", inputs=["float32[2,4]"], torch_free=True))
    assert verdict.passed, verdict

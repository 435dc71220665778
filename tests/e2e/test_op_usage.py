"""benchmarks/wild/op_usage.py: the op ranking of the wild corpus, on a small file of our own."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = [pytest.mark.needs_torch]

ROOT = Path(__file__).resolve().parents[2]


def _module():
    spec = importlib.util.spec_from_file_location("op_usage", ROOT / "benchmarks" / "wild" / "op_usage.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_call_sites_are_counted_and_checked_against_the_tables(tmp_path: Path) -> None:
    source = tmp_path / "model.py"
    source.write_text(
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
        "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = nn.Linear(2, 2)\n        self.odd = nn.LazyLinear(2)\n\n"
        "    def forward(self, x, d):\n        y = F.relu(self.fc(x)).view(2, -1).view(-1)\n"
        "        z = torch.special.zeta(y, 2.0) + x.unfold(0, 1, 1).sum()\n"
        "        return self.helper(z), d.values(), torch.flatten(z)\n"
    )
    op_usage = _module()
    functions, methods, layers = op_usage.scan([source], {"view", "unfold", "sum", "helper", "values"} - {"values"})
    assert functions == {"torch.nn.functional.relu": 1, "torch.special.zeta": 1, "torch.flatten": 1}
    assert methods == {"view": 2, "unfold": 1, "sum": 1}  # self.helper(...) is the module's own
    assert layers == {"torch.nn.Linear": 1, "torch.nn.LazyLinear": 1}
    covered_functions, covered_methods, covered_layers = op_usage.covered_sets()
    assert "torch.flatten" in covered_functions and "torch.nn.functional.relu" in covered_functions
    assert "view" in covered_methods and "torch.nn.Linear" in covered_layers
    assert "torch.special.zeta" not in covered_functions and "torch.nn.LazyLinear" not in covered_layers

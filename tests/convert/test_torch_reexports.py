"""torch names imported through a module of the file's own package are imported from torch
(convert/torch_reexports.py): the package's layer module binds them by an import from torch, an
alias, a re-export of another module, or an optional accelerator's `except ImportError` fallback
(fair-esm's `ESM1bLayerNorm`). They stayed imported from that module, so the output loaded torch
and the layers took no weights. The no-op cases are the package's own definitions."""

from __future__ import annotations

from pathlib import Path

from precision_transpiler import transpile
from precision_transpiler.analysis.load_imports import torch_imports_at_load
from precision_transpiler.verify import VerifyOptions, verify_files
from tests.convert.siblings.packages import write_package
from tests.helpers import on_both_targets

NORMS = """
    import torch
    from torch import nn

    try:
        from apex.normalization import FusedLayerNorm as _FusedLayerNorm

        class FastNorm(_FusedLayerNorm):
            def forward(self, x):
                return super().forward(x)

    except ImportError:
        from torch.nn import LayerNorm as FastNorm

    from torch.nn import GroupNorm as PlainNorm
    from .more import Dense

    Act = nn.GELU


    class OwnNorm(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.scale = nn.Parameter(torch.ones(d))

        def forward(self, x):
            return x * self.scale
"""

MODEL = """
    import torch
    from torch import nn

    # the package's layers
    from reexp_pkg.norms import FastNorm, OwnNorm, PlainNorm
    from .norms import Act, Dense, nn as tnn


    class Net(nn.Module):
        def __init__(self, d=8):
            super().__init__()
            self.a = FastNorm(d)
            self.b = PlainNorm(2, d)
            self.c = OwnNorm(d)
            self.fc = Dense(d, d)
            self.act = Act()
            self.drop = tnn.Dropout(0.0)

        def forward(self, x):
            y = self.b(self.a(x).unsqueeze(-1)).squeeze(-1)
            return self.drop(self.act(self.fc(self.c(y))))
"""


def _package(root: Path) -> Path:
    write_package(
        root,
        {
            "reexp_pkg/norms.py": NORMS,
            "reexp_pkg/more.py": "from torch.nn import Linear as Dense\n",
            "reexp_pkg/model.py": MODEL,
        },
    )
    return root / "reexp_pkg/model.py"


@on_both_targets
def test_torch_layers_imported_through_the_package_convert_and_verify(tmp_path: Path, target: str) -> None:
    model = _package(tmp_path)
    result = transpile(model.read_text(), to=target, path=str(model))
    assert "reexp_pkg.norms import FastNorm" not in result.code and "PlainNorm" not in result.code
    assert "from reexp_pkg.norms import OwnNorm" not in result.code  # the package's own: copied in
    assert "class OwnNorm(" in result.code
    converted = tmp_path / f"model_{target}.py"
    converted.write_text(result.code)
    options = VerifyOptions(entry="Net()", inputs=["float32[2,8]"], torch_free=True)
    verdict = verify_files(model, converted, options)
    assert verdict.passed, verdict


def test_the_imports_name_torch_before_the_rules_run(tmp_path: Path) -> None:
    from precision_transpiler.convert.torch_reexports import torch_binding

    _package(tmp_path)
    norms = tmp_path / "reexp_pkg/norms.py"
    found = {name: torch_binding(norms, name) for name in ("FastNorm", "PlainNorm", "Dense", "Act", "nn", "OwnNorm")}
    assert found == {
        "FastNorm": "torch.nn.LayerNorm",  # the fallback of an optional accelerator
        "PlainNorm": "torch.nn.GroupNorm",
        "Dense": "torch.nn.Linear",  # through another module of the package
        "Act": "torch.nn.GELU",  # an alias
        "nn": "torch.nn",
        "OwnNorm": None,  # the package's own class
    }


PROBE = """
    import torch

    try:
        from torch._dynamo import allow_in_graph as maybe_allow_in_graph
    except (ImportError, ModuleNotFoundError):

        def maybe_allow_in_graph(cls):
            return cls

    try:
        from torch.nn.functional import gelu
    except ImportError:

        def gelu(x):
            return x * torch.sigmoid(1.702 * x)
"""

PROBED = """
    import torch
    from torch import nn

    from .probe import gelu, maybe_allow_in_graph


    @maybe_allow_in_graph
    class Block(nn.Module):
        def __init__(self, d=8):
            super().__init__()
            self.fc = nn.Linear(d, d)

        def forward(self, x):
            return gelu(self.fc(x))
"""


@on_both_targets
def test_a_torch_feature_the_target_lacks_takes_the_packages_own_fallback(tmp_path: Path, target: str) -> None:
    # diffusers' utils/torch_utils.py: `maybe_allow_in_graph` is torch.compile's decorator where
    # torch has it, the package's own identity otherwise; other modules import it from there. It
    # was made an import of torch._dynamo (kept, unconverted: the output needed torch), then the
    # fallback was dropped with the `try` as converted code, so the name was left undefined.
    write_package(tmp_path, {"probe_pkg/probe.py": PROBE, "probe_pkg/model.py": PROBED})
    model = tmp_path / "probe_pkg/model.py"
    result = transpile(model.read_text(), to=target, path=str(model))
    assert torch_imports_at_load(result.code, model) == []
    assert "def maybe_allow_in_graph(cls):" in result.code  # the fallback, copied in
    assert not result.unsupported, [d.format() for d in result.unsupported]
    converted = tmp_path / f"model_{target}.py"
    converted.write_text(result.code)
    verdict = verify_files(model, converted, VerifyOptions(entry="Block()", inputs=["float32[2,8]"]))
    assert verdict.passed, verdict


def test_a_mapped_feature_probed_with_a_fallback_stays_torchs(tmp_path: Path) -> None:
    from precision_transpiler.convert.torch_reexports import torch_binding

    write_package(tmp_path, {"probe_pkg/probe.py": PROBE})
    probe = tmp_path / "probe_pkg/probe.py"

    def convertible(name: str) -> bool:
        return name == "torch.nn.functional.gelu"

    assert torch_binding(probe, "gelu", convertible=convertible) == "torch.nn.functional.gelu"
    assert torch_binding(probe, "maybe_allow_in_graph", convertible=convertible) is None  # the package's
    assert torch_binding(probe, "maybe_allow_in_graph") == "torch._dynamo.allow_in_graph"  # no table asked


LAYERS = """
    import torch
    from torch import nn
    from torch.nn import GELU


    class Scale(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.w = nn.Parameter(torch.ones(d))

        def forward(self, x):
            return x * self.w


    class Shift(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.b = nn.Parameter(torch.zeros(d))

        def forward(self, x):
            return x + self.b
"""

SPLIT = """
    from torch import nn

    from .layers import (
        Scale,
        GELU,  # torch's, through the package
        Shift,
    )


    class Net(nn.Module):
        def __init__(self, d=8):
            super().__init__()
            self.scale, self.act, self.shift = Scale(d), GELU(), Shift(d)

        def forward(self, x):
            return self.shift(self.act(self.scale(x)))
"""


@on_both_targets
def test_a_parenthesised_import_split_by_a_reexport_still_parses(tmp_path: Path, target: str) -> None:
    # pyro's `from .cholesky import (CholeskyTransform, CorrCholeskyTransform, ...)` over lines,
    # one of them torch's: what stayed of it lost its parentheses and kept its line breaks, and
    # the output did not parse (an internal error for every model reaching the package).
    write_package(tmp_path, {"split_pkg/layers.py": LAYERS, "split_pkg/model.py": SPLIT})
    model = tmp_path / "split_pkg/model.py"
    result = transpile(model.read_text(), to=target, path=str(model))
    assert not [d for d in result.diagnostics if d.severity == "error"], result.diagnostics
    converted = tmp_path / f"model_{target}.py"
    converted.write_text(result.code)
    verdict = verify_files(model, converted, VerifyOptions(entry="Net()", inputs=["float32[2,8]"], torch_free=True))
    assert verdict.passed, verdict


def test_a_reexport_split_off_a_multiline_import_keeps_the_rest_valid(tmp_path: Path) -> None:
    from precision_transpiler.convert.torch_reexports import resolve_torch_reexports

    write_package(tmp_path, {"split_pkg/layers.py": LAYERS, "split_pkg/model.py": SPLIT})
    model = tmp_path / "split_pkg/model.py"
    import libcst as cst

    changed = resolve_torch_reexports(cst.parse_module(model.read_text()), str(model))
    assert changed is not None
    code = changed.code
    compile(code, "model.py", "exec")
    assert "from torch.nn import GELU" in code and "Scale," in code and "Shift" in code, code

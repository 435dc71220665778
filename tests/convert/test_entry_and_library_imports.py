"""`--entry` pruning (convert/entry.py), library counterparts (convert/library_imports.py), shim
imports in vendoring, operand parentheses in emitted patterns, and run-time dtypes for
factory-built layers under a Flax policy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from precision_transpiler import transpile
from precision_transpiler.convert.entry import MARKER, entry_names, prune_source
from precision_transpiler.convert.library_imports import redirect_library_imports
from precision_transpiler.errors import UsageError

MODEL = """import torch
import torch.nn as nn
from torch.nn import CrossEntropyLoss


def helper(d):
    return nn.Linear(d, d)


# A head nobody asked for
class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.loss = CrossEntropyLoss()

    def forward(self, x, y):
        return self.loss(x, y)


class Net(nn.Module):
    def __init__(self, d=4):
        super().__init__()
        self.fc = helper(d)

    def forward(self, x):
        return torch.digamma(self.fc(x))


__all__ = ["Net", "Head"]
"""


def test_entry_names_and_unknown_entries() -> None:
    assert entry_names("BertModel(BertConfig(n=2))") == ["BertModel", "BertConfig"]
    with pytest.raises(UsageError, match="defines none of"):
        prune_source(MODEL, "Missing()", "m.py")
    with pytest.raises(UsageError, match="not a Python expression"):
        entry_names("Net(")


def test_pruning_keeps_line_numbers_and_what_the_entry_reaches() -> None:
    pruned = prune_source(MODEL, "Net()")
    assert pruned.source.count("\n") == MODEL.count("\n")
    assert "class Head" not in pruned.source and "# A head nobody asked for" not in pruned.source
    assert "def helper" in pruned.source and "__all__" not in pruned.source
    assert pruned.dropped == ["Head", "__all__"] and set(pruned.kept) == {"Net", "helper"}
    assert pruned.import_names == {"CrossEntropyLoss"}
    result = transpile(MODEL, to="jax", entry="Net", prune_to_entry=True)
    assert MARKER not in result.code and "\n\n\n\n" not in result.code
    assert "class Head" not in result.code and "CrossEntropyLoss" not in result.code
    # diagnostics point at the original file's lines
    unsupported = [d for d in result.diagnostics if d.severity == "unsupported"]
    assert [(d.line, "digamma" in d.message) for d in unsupported] == [
        (MODEL.splitlines().index("        return torch.digamma(self.fc(x))") + 1, True)
    ]
    assert any(d.code == "entry-pruned" and "left out 2 (Head, __all__)" in d.message for d in result.diagnostics)


def test_cli_prune_to_entry_converts_only_what_it_reaches(tmp_path: Path) -> None:
    source = tmp_path / "model.py"
    source.write_text(MODEL.replace("torch.digamma", "torch.relu"))
    out = tmp_path / "model_jax.py"
    cli = [sys.executable, "-m", "precision_transpiler"]
    done = subprocess.run(
        [*cli, str(source), "--to", "jax", "--entry", "Net", "--prune-to-entry", "-o", str(out)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "class Net(TorchModule)" in out.read_text() and "Head" not in out.read_text()
    bad = subprocess.run(
        [*cli, str(source), "--to", "jax", "--entry", "Nope", "--prune-to-entry", "-o", str(out)],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "defines none of Nope" in bad.stderr.strip().splitlines()[-1]


def test_entry_alone_does_not_prune(tmp_path: Path) -> None:
    """Pruning is its own flag (`--prune-to-entry`, `prune_to_entry=True`): `--entry` only names
    what verification builds, so it never changes the converted code by itself."""
    with pytest.raises(UsageError, match="prune_to_entry=True"):
        transpile(MODEL, to="jax", entry="Net")
    with pytest.raises(UsageError, match="needs entry="):
        transpile(MODEL, to="jax", prune_to_entry=True)
    source = tmp_path / "model.py"
    source.write_text(MODEL)
    cli = [sys.executable, "-m", "precision_transpiler", str(source), "--to", "jax"]
    alone = subprocess.run([*cli, "--entry", "Net"], capture_output=True, text=True)
    assert alone.returncode == 2 and alone.stdout == "", alone.stderr
    assert alone.stderr.count("\n") == 1 and "--prune-to-entry" in alone.stderr, alone.stderr
    without = subprocess.run([*cli, "--prune-to-entry"], capture_output=True, text=True)
    assert without.returncode == 2 and without.stderr.count("\n") == 1 and "--entry" in without.stderr


PRUNED_POLICY = """import torch
import torch.nn as nn
import torch.nn.functional as F


def unused(x):
    # a helper the entry does not reach: pruning leaves it out
    y = x * 2
    return y.half()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 8)
        self.norm = nn.LayerNorm(8)

    def forward(self, x):
        x = x.double().float()
        return F.softmax(self.norm(self.fc(x)), dim=-1)
"""


def test_report_positions_are_input_lines_when_pruned(tmp_path: Path) -> None:
    """Diagnostics, rewrites and precision decisions of a pruned conversion (and the `--report`
    table and --report-json made from them) name lines of the input file, not of the pruned code."""
    lines = PRUNED_POLICY.splitlines()
    softmax = lines.index("        return F.softmax(self.norm(self.fc(x)), dim=-1)") + 1
    forward = lines.index("    def forward(self, x):") + 1
    double = lines.index("        x = x.double().float()") + 1
    result = transpile(PRUNED_POLICY, to="torch", policy="mixed", entry="Net()", prune_to_entry=True, path="m.py")
    assert "def unused" not in result.code
    found = {(d.op_class, d.line) for d in result.precision}
    assert found == {("module", forward), ("softmax", softmax), ("norm", softmax)}, found
    # an input holding an earlier run's helpers: the decisions name its lines, not the stripped code's
    again, written = transpile(result.code, to="torch", policy="mixed", path="m.py"), result.code.splitlines()
    code_of = {"module": "def forward", "softmax": "F.softmax(", "norm": "self.norm("}
    assert again.code == result.code
    assert all(code_of[d.op_class] in written[d.line - 1] for d in again.precision), again.precision
    jax = transpile(PRUNED_POLICY, to="jax", entry="Net()", prune_to_entry=True, path="m.py")
    assert "def unused" not in jax.code
    assert {r.line for r in jax.rewrites if "double" in r.before} == {double}
    source = tmp_path / "m.py"
    source.write_text(PRUNED_POLICY)
    report = tmp_path / "r.json"
    cli = [sys.executable, "-m", "precision_transpiler", str(source), "--to", "torch", "--policy", "mixed"]
    done = subprocess.run(
        [*cli, "--entry", "Net()", "--prune-to-entry", "--report", "--report-json", str(report), "-o",
         str(tmp_path / "out.py")],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"{source}:{softmax}:" in done.stderr and f"{source}:{forward}:" in done.stderr, done.stderr
    (entry,) = json.loads(report.read_text())["files"]
    assert {p["line"] for p in entry["precision"]} == {softmax, forward}


def test_library_imports_resolve_relative_modules(tmp_path: Path) -> None:
    package = tmp_path / "lib" / "models" / "bert"
    package.mkdir(parents=True)
    for folder in (tmp_path / "lib", tmp_path / "lib" / "models", package):
        (folder / "__init__.py").write_text("")
    path = package / "modeling.py"
    code = "from ...modeling_utils import PreTrainedModel as Base, other\nfrom .config import Config\n"
    path.write_text(code)
    table = {"lib.modeling_utils.PreTrainedModel": {"jax": "pkg.shims.PreTrainedModel"}}
    new, names = redirect_library_imports(str(path), code, table, "jax")
    assert names == ["lib.modeling_utils.PreTrainedModel"]
    assert new.splitlines() == [
        "from ...modeling_utils import other",
        "from pkg.shims import PreTrainedModel as Base",
        "from .config import Config",
    ]
    assert redirect_library_imports(str(path), code, table, "tf") == (code, [])


def test_emitted_patterns_parenthesize_looser_operands() -> None:
    source = "import torch\n\n\ndef f(a, b, c):\n    return torch.addmm(a + b, b, c, beta=0.5)\n"
    code = transpile(source, to="jax").code
    assert "0.5 * (a + b) + 1 * jnp.matmul(b, c)" in code
    code = transpile("import torch\n\n\ndef f(a, b, c):\n    return torch.addmm(a, b, c)\n", to="jax").code
    assert "return a + jnp.matmul(b, c)" in code


FACTORY = """import functools
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, layer=nn.Linear):
        super().__init__()
        conv = functools.partial(nn.Conv2d, kernel_size=3, padding=1)
        self.c = conv(3, 8)
        self.fc = layer(8, 4)
        self.norm = nn.LayerNorm(4)

    def forward(self, x):
        return self.norm(self.fc(self.c(x).mean((2, 3))))
"""


@pytest.mark.needs_jax
@pytest.mark.slow
def test_factory_built_layers_take_their_class_dtype_under_a_flax_policy(tmp_path: Path) -> None:
    jnp = pytest.importorskip("jax.numpy")
    nnx = pytest.importorskip("flax.nnx")
    result = transpile(FACTORY, to="jax", policy="mixed")
    assert "_PTRANSPILE_LAYER_DTYPES = {" in result.code
    namespace: dict = {}
    exec(compile(result.code, "factory_jax.py", "exec"), namespace)
    for jitted in (False, True):
        net = namespace["Net"]()
        call = nnx.jit(lambda n, x: n(x)) if jitted else (lambda n, x: n(x))
        out = call(net, jnp.ones((2, 3, 8, 8)))
        assert out.dtype == jnp.float32
        assert net.c.dtype == jnp.bfloat16 and net.fc.dtype == jnp.bfloat16 and net.norm.dtype == jnp.float32
    plain = transpile(
        FACTORY.replace("layer(8, 4)", "nn.Linear(8, 4)").replace("conv(3, 8)", "nn.Conv2d(3, 8, 3)"),
        to="jax",
        policy="mixed",
    )
    assert "_PTRANSPILE_LAYER_DTYPES" not in plain.code


GRAD_MODES = """import torch
import torch.nn as nn


@torch.fx.wrap
def twice(x):  # timm's helpers: kept out of torch.fx graphs, a plain function elsewhere
    return 2 * x


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    @torch.jit.unused
    def helper(self, x):
        return x

    @torch.no_grad()
    def frozen(self, x):
        return self.fc(x)

    def forward(self, x):
        with torch.no_grad():
            y = self.fc(x)
        with torch.enable_grad():
            y = twice(y)
        return y + self.frozen(x)
"""


@pytest.mark.needs_jax
def test_grad_mode_decorators_and_contexts() -> None:
    """@torch.no_grad() stops gradients through the function's outputs (as torch records no
    graph); `with torch.no_grad()` and enable_grad are no-ops; TorchScript and torch.fx
    decorators go."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    result = transpile(GRAD_MODES, to="jax")
    assert result.ok, [d.format() for d in result.diagnostics]
    assert "torch" not in result.code.split("class Net")[1] and "@torch.jit.unused" not in result.code
    assert "@torch.fx.wrap" not in result.code and "import torch" not in result.code
    namespace: dict = {}
    exec(compile(result.code, "grad_modes_jax.py", "exec"), namespace)
    net = namespace["Net"]()
    x = jnp.ones((2, 4))
    assert jnp.allclose(net(x), 2 * net.fc(x) + net.fc(x), atol=1e-6)
    assert float(jnp.abs(jax.grad(lambda v: net.frozen(v).sum())(x)).sum()) == 0.0
    assert float(jnp.abs(jax.grad(lambda v: net.helper(v).sum())(x)).sum()) > 0.0


REGISTRY = """\
import torch.nn as nn
from .registry import register_model_deprecations, log_usage


class Net(nn.Module):
    def forward(self, x):
        return x


def resnet_tiny():
    return Net()


log_usage(Net)
register_model_deprecations(__name__, {"old_tiny": "resnet_tiny"})
"""


def test_pruning_drops_side_effect_calls_the_entry_does_not_reach() -> None:
    """timm ends model files with `register_model_deprecations(__name__, {...})`, which looks up
    the model functions pruning leaves out (an AttributeError at import of the output): such
    top-level calls go with them, unless they mention what the entry reaches."""
    pruned = prune_source(REGISTRY, "Net()")
    assert "register_model_deprecations(...)" in pruned.dropped and "resnet_tiny" in pruned.dropped
    assert "register_model_deprecations(__name__" not in pruned.source
    assert "log_usage(Net)" in pruned.source  # mentions the entry's class: kept
    assert pruned.source.count("\n") == REGISTRY.count("\n")  # line numbers kept


BUILT_FROM_ARGS = """
import torch.nn as nn
from ._builder import decode_arch_def


class Net(nn.Module):
    def __init__(self, block_args):
        super().__init__()
        self.fc = nn.Linear(block_args, 2)


def _gen_net():
    return Net(decode_arch_def([["ds_r1"]]))
"""


def test_pruning_keeps_the_imports_the_entry_calls() -> None:
    """timm's `EfficientNet(block_args=decode_arch_def([...]))`: `decode_arch_def` is imported and
    otherwise used only by the model functions pruning leaves out; the entry calls it, so its
    import stays (it was dropped: NameError when the entry was evaluated)."""
    pruned = prune_source(BUILT_FROM_ARGS, "Net(decode_arch_def([['ds_r1']]))")
    assert "_gen_net" in pruned.dropped
    assert "decode_arch_def" not in pruned.import_names


MAIN_BLOCK = """import argparse

import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, d=4):
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        return self.fc(x)


def train(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    model = Net()
    train(model)
"""


def test_pruning_leaves_out_the_main_block() -> None:
    """`if __name__ == "__main__":` runs only as a script: what the entry reaches never needs it,
    so it goes (with what only it reaches, and the imports only it used) like other unreached code."""
    pruned = prune_source(MAIN_BLOCK, "Net()")
    assert 'if __name__ == "__main__":' not in pruned.source and "train" not in pruned.source
    assert pruned.dropped == ["train", 'if __name__ == "__main__": ...'] and pruned.kept == ["Net"]
    assert "argparse" in pruned.import_names
    assert pruned.source.count("\n") == MAIN_BLOCK.count("\n")
    result = transpile(MAIN_BLOCK, to="jax", entry="Net", prune_to_entry=True)
    assert "__main__" not in result.code and "argparse" not in result.code
    (note,) = [d for d in result.diagnostics if d.code == "entry-pruned"]
    assert "left out 2 (train, if __name__ ==" in note.message, note.message

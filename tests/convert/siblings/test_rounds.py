"""convert/siblings/rounds.py: the rounds of copying, on real packages: what is copied, what
stays imported, and outputs left as they are when there is nothing to copy."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from precision_transpiler import transpile
from precision_transpiler.convert.siblings import MARKER, inline_siblings
from tests.convert.siblings.packages import unchanged, write_package
from tests.helpers import on_both_targets

LAYERS = """
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        return torch.relu(self.fc(x))


class Unused(nn.Module):
    pass
"""

MODEL = """
from torch import nn

from .layers import Block, Block as Layer
from .util import describe


class Net(nn.Module):
    def __init__(self, d=4):
        super().__init__()
        self.a = Block(d)
        self.b = Layer(d)

    def forward(self, x):
        return self.b(self.a(x))
"""

FILES = {
    "pkg/layers.py": LAYERS,
    "pkg/util.py": "def describe(model):\n    return repr(model)\n",
    "pkg/model.py": MODEL,
}


def test_torch_siblings_are_copied_in_and_plain_python_stays_imported(tmp_path: Path) -> None:
    write_package(tmp_path, FILES)
    model = tmp_path / "pkg/model.py"
    code, report = inline_siblings(str(model), model.read_text(), unchanged)
    assert report.inlined == ["pkg.layers.Block", "pkg.layers.Block"]  # one entry per name imported
    assert code.count(MARKER.format(module="pkg.layers")) == 1 and "class Unused" not in code
    assert "Layer = Block" in code  # a second name for the copy, not a second class
    assert "from .layers import" not in code
    assert "from .util import describe" in code  # no torch there: it stays imported
    assert code.index("class Block(") < code.index("class Net(")
    ast.parse(code)


def test_nothing_to_copy_leaves_the_output_as_it_is(tmp_path: Path) -> None:
    write_package(tmp_path, FILES)
    model = tmp_path / "pkg/model.py"
    alone = "import torch\nfrom torch import nn\n\nx = nn.Linear(2, 2)\n"
    assert inline_siblings(str(model), alone, unchanged)[0] is alone  # no sibling import
    plain = "from .util import describe\n"
    code, report = inline_siblings(str(model), plain, unchanged)
    assert code == plain and not report.inlined and not report.skipped
    not_a_file = inline_siblings(str(tmp_path / "missing.py"), MODEL, unchanged)
    assert not_a_file[0] is MODEL and not not_a_file[1].inlined


def test_a_name_a_package_reexports_is_copied_from_its_module(tmp_path: Path) -> None:
    write_package(
        tmp_path,
        {
            "pkg/ops/__init__.py": "from .blocks import Block\n",
            "pkg/ops/blocks.py": LAYERS,
            "pkg/model.py": "from .ops import Block\n\nNET = Block(2)\n",
        },
    )
    model = tmp_path / "pkg/model.py"
    code, report = inline_siblings(str(model), model.read_text(), unchanged)
    assert report.inlined == ["pkg.ops.blocks.Block"]
    assert "from .ops import" not in code and "from pkg.ops.blocks import" not in code


def test_copying_stops_at_the_budget_and_says_what_it_left(tmp_path: Path) -> None:
    write_package(tmp_path, FILES)
    model = tmp_path / "pkg/model.py"
    code, report = inline_siblings(str(model), model.read_text(), unchanged, budget=3)
    assert set(report.over_budget) == {"pkg.layers.Block"} and not report.inlined
    assert code == model.read_text()


@pytest.mark.needs_jax
def test_copies_are_converted_by_the_pipeline(tmp_path: Path) -> None:
    write_package(tmp_path, FILES)
    model = tmp_path / "pkg/model.py"
    result = transpile(model.read_text(), to="jax", path=str(model))
    tree = ast.parse(result.code)
    imported = {n.module or "" for n in tree.body if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names}
    assert not any(name.split(".")[0] in ("torch", "pkg") or name.startswith(".") for name in imported), imported
    assert MARKER.format(module="pkg.layers") in result.code
    assert "class Block(" in result.code
    assert any(d.code == "siblings-inlined" and "pkg.layers.Block" in d.message for d in result.diagnostics)


def test_a_base_copied_along_with_a_class_is_not_imported_again(tmp_path: Path) -> None:
    """kornia's checks: `ShapeError(BaseError)` is copied with its base; a helper copied later
    imports `BaseError` from the same module, which must bind the copy, not the original."""
    write_package(
        tmp_path,
        {
            "pkg/exceptions.py": """
                import torch

                class BaseError(Exception):
                    pass

                class ShapeError(BaseError, ValueError):
                    def __init__(self, message, shape: torch.Size = None):
                        super().__init__(message)
            """,
            "pkg/check.py": """
                import torch
                from pkg.exceptions import BaseError

                def check(x: torch.Tensor, ok: bool):
                    if not ok:
                        raise BaseError("failed")
                    return x
            """,
            "pkg/model.py": """
                import torch
                from torch import nn
                from pkg.exceptions import ShapeError
                from pkg.check import check

                class Net(nn.Module):
                    def forward(self, x):
                        if x.dim() != 2:
                            raise ShapeError("2-d")
                        return check(x, True)
            """,
        },
    )
    model = tmp_path / "pkg/model.py"
    code, _ = inline_siblings(str(model), model.read_text(), unchanged)
    assert "import BaseError" not in code and code.count("class BaseError(") == 1
    ast.parse(code)


def test_plain_modules_of_a_package_that_requires_torch_are_copied(tmp_path: Path, monkeypatch) -> None:
    """kornia's `models/kimi_vl/config.py` holds dataclasses and imports no torch, but importing
    it runs `kornia/__init__.py`, which does: a package whose distribution requires torch has
    what the output needs copied, however plain; another package's plain module stays imported."""
    from precision_transpiler.analysis import load_imports

    files = {
        "config.py": """
            from dataclasses import dataclass

            @dataclass
            class Cfg:
                width: int = 4
        """,
        "model.py": """
            import torch
            from torch import nn
            from {pkg}.config import Cfg

            class Net(nn.Module):
                def __init__(self, cfg: Cfg):
                    super().__init__()
                    self.lin = nn.Linear(cfg.width, cfg.width)
        """,
    }
    for pkg, requires in (("torchy", "Requires-Dist: torch\n"), ("plainy", "")):
        write_package(tmp_path, {f"{pkg}/{name}": text.replace("{pkg}", pkg) for name, text in files.items()})
        info = tmp_path / f"{pkg}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {pkg}\nVersion: 1.0\n{requires}")
        (info / "top_level.txt").write_text(f"{pkg}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    load_imports.torch_distribution.cache_clear()
    load_imports._distributions.cache_clear()
    try:
        torchy = tmp_path / "torchy/model.py"
        code, _ = inline_siblings(str(torchy), torchy.read_text(), unchanged)
        assert "class Cfg:" in code and "from torchy.config import" not in code
        plainy = tmp_path / "plainy/model.py"
        code, _ = inline_siblings(str(plainy), plainy.read_text(), unchanged)
        assert "from plainy.config import Cfg" in code and "class Cfg:" not in code
    finally:
        load_imports.torch_distribution.cache_clear()
        load_imports._distributions.cache_clear()


CLASH = {
    "pkg/rotary.py": """
        import torch

        def apply_rotary(q, freqs):
            return q * freqs.cos() + q.flip(-1) * freqs.sin()
    """,
    "pkg/local.py": """
        import torch
        from torch import nn

        from pkg.rotary import apply_rotary

        class Local(nn.Module):
            def __init__(self, d=4):
                super().__init__()
                self.fc = nn.Linear(d, d)

            def forward(self, x):
                return apply_rotary(self.fc(x), x)
    """,
    "pkg/model.py": """
        import torch
        from torch import nn

        from pkg.local import Local

        def apply_rotary(q, k):
            return q + k

        class Net(nn.Module):
            def __init__(self, d=4):
                super().__init__()
                self.local = Local(d)

            def forward(self, x):
                return apply_rotary(self.local(x), x)
    """,
}


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_a_copy_importing_a_name_the_file_defines_gets_its_own(tmp_path: Path, target: str) -> None:
    """performer-pytorch defines `apply_rotary_pos_emb` and imports LocalAttention, whose module
    imports another `apply_rotary_pos_emb` from local_attention.rotary: the copy takes that one
    under a name of its own, and the file's own function stays the file's."""
    from precision_transpiler.verify import VerifyOptions, verify_files

    write_package(tmp_path, CLASH)
    model = tmp_path / "pkg/model.py"
    result = transpile(model.read_text(), to=target, path=str(model))
    assert "def apply_rotary_pkg_rotary(q, freqs):" in result.code, result.code
    assert "return apply_rotary_pkg_rotary(self.fc(x), x)" in result.code
    assert "def apply_rotary(q, k):" in result.code
    converted = tmp_path / f"model_{target}.py"
    converted.write_text(result.code)
    options = VerifyOptions(entry="Net()", inputs=["float32[2,4]"], torch_free=True)
    assert verify_files(model, converted, options).passed


NAMESPACE = {
    "nspkg/__init__.py": "",
    "nspkg/models/utils/helpers.py": """
        import torch

        def act(x):
            return torch.tanh(x) * 2
    """,
    "nspkg/models/net.py": """
        import torch
        from torch import nn

        from .utils.helpers import act

        class Net(nn.Module):
            def __init__(self, d=4):
                super().__init__()
                self.fc = nn.Linear(d, d)

            def forward(self, x):
                return act(self.fc(x))
    """,
}


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_a_namespace_folder_inside_a_package_is_a_package(tmp_path: Path, target: str) -> None:
    """facenet-pytorch's `models/` has no `__init__.py`: Python imports it as
    `facenet_pytorch.models` all the same (PEP 420), so its relative imports are copied and the
    verifier imports the original as part of its package."""
    from precision_transpiler.verify import VerifyOptions, verify_files

    write_package(tmp_path, NAMESPACE)
    (tmp_path / "nspkg/models/__init__.py").unlink(missing_ok=True)  # a namespace portion
    (tmp_path / "nspkg/models/utils/__init__.py").unlink(missing_ok=True)
    model = tmp_path / "nspkg/models/net.py"
    result = transpile(model.read_text(), to=target, path=str(model))
    assert MARKER.format(module="nspkg.models.utils.helpers") in result.code, result.code
    converted = tmp_path / f"net_{target}.py"
    converted.write_text(result.code)
    options = VerifyOptions(entry="Net()", inputs=["float32[2,4]"], torch_free=True)
    assert verify_files(model, converted, options).passed


KERNELS = {
    "kpkg/kernels.py": """
        import torch

        try:
            import tritonish
        except ImportError:
            raise ImportError("the fused kernels need tritonish")

        def fused_scale(x):
            return x * 2
    """,
    "kpkg/ops.py": """
        import torch

        def scale(x, fused=False):
            if fused and x.is_cuda:
                from kpkg.kernels import fused_scale
                return fused_scale(x)
            return x * 2
    """,
    "kpkg/model.py": """
        import torch
        from torch import nn

        from kpkg.ops import scale

        class Net(nn.Module):
            def __init__(self, d=4):
                super().__init__()
                self.fc = nn.Linear(d, d)

            def forward(self, x):
                return scale(self.fc(x))
    """,
}


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_a_module_that_refuses_to_load_stays_imported_where_the_original_imports_it(
    tmp_path: Path, target: str
) -> None:
    """colt5-attention's `topk` imports its Triton kernels inside a CUDA-only branch; the kernel
    module raises at import without Triton. Copied in at module level, it made the converted
    file fail to load: the import stays in the function, run only on that branch."""
    from precision_transpiler.verify import VerifyOptions, verify_files

    write_package(tmp_path, KERNELS)
    model = tmp_path / "kpkg/model.py"
    result = transpile(model.read_text(), to=target, path=str(model))
    assert MARKER.format(module="kpkg.kernels") not in result.code
    assert "        from kpkg.kernels import fused_scale" in result.code
    converted = tmp_path / f"kmodel_{target}.py"
    converted.write_text(result.code)
    options = VerifyOptions(entry="Net()", inputs=["float32[2,4]"], torch_free=True)
    assert verify_files(model, converted, options).passed


#: a model over Local calling a `split` of its own module (defined there, or imported)
_NET_OVER_LOCAL = """
        class Net(nn.Module):
            def __init__(self, d=4):
                super().__init__()
                self.local = Local(d)

            def forward(self, x):
                y, n = split(self.local(x))
                return y * n
"""  # indented as the sources it ends (write_package dedents each)

CLASHING_HELPERS = {
    "clashhelperpkg/local.py": """
        import torch
        from torch import nn

        def exists(v):
            return v is not None

        def split(t):
            return t.shape[-1], t

        class Local(nn.Module):
            def __init__(self, d=4):
                super().__init__()
                self.fc = nn.Linear(d, d)

            def forward(self, x, mask=None):
                n, y = split(self.fc(x))
                return y * n if not exists(mask) else y
    """,
    "clashhelperpkg/outer.py": """
        import torch
        from torch import nn

        from clashhelperpkg.local import Local

        def split(t):
            return torch.tanh(t), 3

        class Outer(nn.Module):
            def __init__(self, d=4):
                super().__init__()
                self.local = Local(d)

            def forward(self, x):
                y, n = split(self.local(x))
                return y + n
    """,
    "clashhelperpkg/helpers.py": """
        import torch

        def split(t):
            return torch.sigmoid(t), 5
    """,
    # the file's own `split`, unlike the one the copied Local calls
    "clashhelperpkg/model.py": """
        import torch
        from torch import nn

        from clashhelperpkg.local import Local

        def split(t):
            return t - 1, t.shape[-1]
    """
    + _NET_OVER_LOCAL,
    # Outer (with outer's `split`) comes in first, Local (with local's) a round later
    "clashhelperpkg/chain.py": """
        from torch import nn

        from clashhelperpkg.outer import Outer

        class Net(nn.Module):
            def __init__(self, d=4):
                super().__init__()
                self.outer = Outer(d)

            def forward(self, x):
                return self.outer(x)
    """,
    # one round: Local with its helper `split` first, then the `split` the file imports itself
    "clashhelperpkg/both.py": """
        from torch import nn

        from clashhelperpkg.local import Local
        from clashhelperpkg.helpers import split
    """
    + _NET_OVER_LOCAL,
    # nothing clashes: its `exists` is the one Local uses, word for word
    "clashhelperpkg/plain.py": """
        from torch import nn

        from clashhelperpkg.local import Local

        def exists(v):
            return v is not None

        def halve(t):
            return t / 2

        class Net(nn.Module):
            def __init__(self, d=4):
                super().__init__()
                self.local = Local(d)

            def forward(self, x, mask=None):
                return halve(self.local(x)) if not exists(mask) else x
    """,
}


def _convert_and_verify(root: Path, name: str, target: str) -> str:
    """Convert clashhelperpkg/`name`.py to `target` and verify it against the original, torch-free:
    the converted code."""
    from precision_transpiler.verify import VerifyOptions, verify_files

    model = root / f"clashhelperpkg/{name}.py"
    result = transpile(model.read_text(), to=target, path=str(model))
    assert not result.errors, [d.format() for d in result.diagnostics]
    converted = root / f"clashhelper_{name}_{target}.py"
    converted.write_text(result.code)
    options = VerifyOptions(entry="Net()", inputs=["float32[2,4]"], torch_free=True)
    verdict = verify_files(model, converted, options)
    assert verdict.passed, verdict.failures
    return result.code


@on_both_targets
@pytest.mark.parametrize(
    "name",
    [
        "model",  # the file's own `split`
        "chain",  # an earlier copy's: Outer, with outer's `split`, a round before Local
        "both",  # the other order, in one round: Local first, then the `split` the file imports
    ],
)
def test_a_copied_helper_named_like_another_definition_gets_its_own(tmp_path: Path, target: str, name: str) -> None:
    """colt5-attention defines `pad_to_multiple` returning `(tensor, seq_len)` and copies
    local_attention's LocalAttention, whose module's `pad_to_multiple` returns `(padded,
    tensor)`: defined twice, the file's replaced the copy's, and LocalAttention unpacked an int.
    Local's helper `split` gets a name of its own beside any other `split` of the output, each
    caller calls its module's; `exists`, the same wherever it is, stays shared."""
    write_package(tmp_path, CLASHING_HELPERS)
    code = _convert_and_verify(tmp_path, name, target)
    assert "def split(t):" in code and "= split(self.local(x))" in code
    assert "def split_clashhelperpkg_local(t):" in code and "= split_clashhelperpkg_local(self.fc(x))" in code
    assert "exists_clashhelperpkg" not in code


@on_both_targets
def test_copies_that_clash_with_nothing_keep_their_names(tmp_path: Path, target: str) -> None:
    write_package(tmp_path, CLASHING_HELPERS)
    plain = tmp_path / "clashhelperpkg/plain.py"
    code, report = inline_siblings(str(plain), plain.read_text(), unchanged)
    assert not any(report.renamed.values()) and "_clashhelperpkg" not in code
    assert code.count("def exists(v):") == 2  # the copy's, the same as the file's: shared
    assert "_clashhelperpkg" not in _convert_and_verify(tmp_path, "plain", target)


TRITON_KERNELS = {
    "tkpkg/kernels.py": """
        import torch
        import triton

        @triton.jit
        def kernel(p):
            pass

        def fused_scale(x):
            kernel[(1,)](x)
            return x * 2
    """,
    "tkpkg/layers.py": """
        import torch
        from torch import nn

        class Layer(nn.Module):
            def __init__(self, d=4, use_kernel=False):
                super().__init__()
                self.fc = nn.Linear(d, d)
                self.use_kernel = use_kernel

            def forward(self, x):
                if self.use_kernel:
                    from tkpkg.kernels import fused_scale
                    return fused_scale(self.fc(x))
                return self.fc(x) * 2
    """,
    "tkpkg/model.py": """
        from torch import nn

        from tkpkg.layers import Layer

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.layer = Layer()

            def forward(self, x):
                return self.layer(x)
    """,
}


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_a_kernel_module_imported_under_a_flag_stays_in_the_method(tmp_path: Path, target: str) -> None:
    """native-sparse-attention's `SparseAttention.forward` imports its Triton kernels only `if
    self.use_triton_kernel`; the kernel module imports triton when it loads (a `kernel_packages:`
    library). Copied in, `import triton` reached the output's top and it failed to load without
    triton: the import stays in the method, reported as needing torch when that branch runs."""
    from precision_transpiler.verify import VerifyOptions, verify_files

    write_package(tmp_path, TRITON_KERNELS)
    model = tmp_path / "tkpkg/model.py"
    result = transpile(model.read_text(), to=target, path=str(model))
    assert "import triton" not in result.code and MARKER.format(module="tkpkg.kernels") not in result.code
    assert "from tkpkg.kernels import fused_scale" in result.code
    assert any(d.code == "torch-when-called" for d in result.diagnostics), [d.format() for d in result.diagnostics]
    converted = tmp_path / f"tkmodel_{target}.py"
    converted.write_text(result.code)
    options = VerifyOptions(entry="Net()", inputs=["float32[2,4]"], torch_free=True)
    assert verify_files(model, converted, options).passed

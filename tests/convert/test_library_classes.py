"""Library code copied in at the granularity the converted code reaches (convert/class_reach.py,
convert/siblings/), on a package built like diffusers' models: a model base class with hub
methods nothing reaches, a config mixin and its decorator, a library module named `logging`
beside the standard library's, a relative import inside a constructor, a tuple-assigned global,
postponed annotations naming a type bound under `if TYPE_CHECKING:`, and an output that is a
dict class of the library's. Each was a failure at import or first call of a converted
diffusers or kornia model; the test verifies against torch."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from precision_transpiler import transpile
from precision_transpiler.convert.class_reach import LEFT_OUT
from precision_transpiler.verify import VerifyOptions, verify_files

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax, pytest.mark.needs_tf]

#: a docstring long enough to make `register_to_config` a large helper (convert/siblings/rounds.py's
#: SMALL_HELPER), which stays imported when it uses no torch
_LONG_DOC = '    """Record the constructor arguments.\n' + "\n".join("    ..." for _ in range(220)) + '\n    """\n'

PACKAGE = {
    "__init__.py": "",
    "hub_logging.py": "import logging as _std\n\n\ndef get_logger(name):\n    return _std.getLogger(name)\n",
    "config.py": textwrap.dedent(
        """
        import functools
        from collections import OrderedDict

        import torch


        class FrozenDict(OrderedDict):
            def __getattr__(self, name):
                try:
                    return self[name]
                except KeyError:
                    raise AttributeError(name) from None


        class ConfigMixin:
            config_name = "config.json"

            def register_to_config(self, **kwargs):
                self._internal_dict = FrozenDict(kwargs)

            @property
            def config(self):
                return self._internal_dict

            def save_config(self, path):
                torch.save(dict(self._internal_dict), path)


        def register_to_config(init):
        """
    )
    + _LONG_DOC
    + textwrap.indent(
        textwrap.dedent(
            """
            @functools.wraps(init)
            def inner(self, *args, **kwargs):
                if not isinstance(self, ConfigMixin):
                    raise RuntimeError("register_to_config needs a ConfigMixin")
                init(self, *args, **kwargs)
                self.register_to_config(**kwargs)

            return inner
            """
        ),
        "    ",
    ),
    "modeling.py": textwrap.dedent(
        """
        from __future__ import annotations

        import torch

        from . import hub_logging as logging

        logger = logging.get_logger(__name__)


        class ModelMixin(torch.nn.Module):
            _keep_in_fp32_modules = None

            def __init__(self):
                super().__init__()
                logger.debug("init")

            @property
            def dtype(self) -> torch.dtype:
                return next(self.parameters()).dtype

            def save_pretrained(self, path: str | None = None) -> None:
                torch.save(self.state_dict(), path)

            @classmethod
            def from_pretrained(cls, path: "str" | None = None) -> "ModelMixin":
                model = cls()
                model.load_state_dict(torch.load(path))
                return model
        """
    ),
    "check.py": textwrap.dedent(
        """
        from __future__ import annotations

        from typing import TYPE_CHECKING, Callable, Union

        import torch

        if TYPE_CHECKING:
            Message = Union[str, Callable[[], str]]
        else:
            Message = str


        def check_is_tensor(x, msg: Message | None = None) -> None:
            if not isinstance(x, torch.Tensor):
                raise TypeError(msg or f"expected a tensor, got {type(x)}")
        """
    ),
    "norm.py": textwrap.dedent(
        """
        import torch.nn as nn


        class Norm(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.ln = nn.LayerNorm(d)

            def forward(self, x):
                return self.ln(x)
        """
    ),
    "blocks.py": textwrap.dedent(
        """
        from __future__ import annotations

        import logging

        import torch
        import torch.nn as nn

        from .check import check_is_tensor

        logger = logging.getLogger(__name__)
        _scale, _version = 2.0, "1"


        class Block(nn.Module):
            def __init__(self, d: int, processor: "Block" | None = None):
                super().__init__()
                from .norm import Norm

                self.norm = Norm(d)
                self.fc = nn.Linear(d, d)

            def forward(self, x):
                check_is_tensor(x)
                logger.debug("block")
                return self.fc(self.norm(x)) * _scale
        """
    ),
    "model.py": textwrap.dedent(
        """
        from collections import OrderedDict

        import torch
        import torch.nn as nn

        from .blocks import Block
        from .config import ConfigMixin, register_to_config
        from .modeling import ModelMixin


        class Output(OrderedDict):
            pass


        class Net(ModelMixin, ConfigMixin):
            @register_to_config
            def __init__(self, d=4, scale=3.0):
                super().__init__()
                self.block = Block(d)

            def forward(self, x):
                h = self.block(x.to(self.dtype)) * self.config.scale
                return Output(sample=h)
        """
    ),
}


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("site")
    package = root / "mixlib"
    package.mkdir()
    for name, text in PACKAGE.items():
        (package / name).write_text(text)
    return package


@pytest.fixture(autouse=True)
def _on_path(package: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(package.parent))


@pytest.mark.parametrize("to", ["jax", "tf"])
def test_a_library_model_base_converts_to_what_is_reached(package: Path, to: str) -> None:
    model = package / "model.py"
    result = transpile(model.read_text(), to=to, path=str(model))
    assert not result.errors, [d.format() for d in result.errors]
    code = result.code
    tree = ast.parse(code)
    # the base class is copied with its constructor and `dtype`; the hub methods are left out, named
    mixin = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelMixin")
    assert {m.name for m in mixin.body if isinstance(m, ast.FunctionDef)} == {"__init__", "dtype"}
    assert LEFT_OUT.format(names="save_pretrained, from_pretrained") in code
    # nothing reported from the methods left out (their torch.save/torch.load)
    assert not [d for d in result.diagnostics if "torch.save" in d.message or "torch.load" in d.message]
    # the large torch-free decorator stays imported, and the mixin it checks with it
    imported = {a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
    assert {"register_to_config", "ConfigMixin"} <= imported
    # the library's `logging` module and the standard library's live side by side
    assert "import logging\n" in code and "from mixlib import hub_logging as logging_mixlib" in code
    # kornia's checks name a type bound under `if TYPE_CHECKING:` in annotations only: copied,
    # so that they test for the target's arrays
    assert "def check_is_tensor(" in code
    # the constructor's relative import became a top-level one, converted and copied in
    assert "class Norm(" in code and "from .norm" not in code
    assert code.index("from __future__ import annotations") < code.index("import")  # `"Block" | None`
    converted = package / f"model_{to}.py"
    converted.write_text(code)
    # config.py, whose decorator stays imported, imports torch: verification says so, and passes
    options = VerifyOptions(entry="Net(d=4, scale=3.0)", inputs=["float32[2,4]"], torch_free=False)
    verdict = verify_files(model, converted, options)
    assert verdict.passed, verdict.failures
    assert any("config.py, left imported" in note for note in verdict.notes), verdict.notes


MODULE_IMPORTS = {
    "__init__.py": "",
    "nets/__init__.py": "from .mlp import MLP\n",
    "nets/mlp.py": textwrap.dedent(
        """
        import torch.nn as nn


        class MLP(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.fc = nn.Linear(d, d)

            def forward(self, x):
                return self.fc(x)
        """
    ),
    "nets/made.py": textwrap.dedent(
        """
        import torch
        import torch.nn as nn


        class MADE(nn.Linear):
            def __init__(self, d):
                super().__init__(d, d)
                self.register_buffer("mask", torch.tril(torch.ones(d, d)))

            def forward(self, x):
                return nn.functional.linear(x, self.weight * self.mask, self.bias)
        """
    ),
    "utils/__init__.py": "from . import splines\n",
    "utils/splines.py": "import torch\n\n\ndef squash(x):\n    return torch.tanh(x) * 2\n",
    "flow.py": textwrap.dedent(
        """
        import torch.nn as nn

        from . import nets, utils
        from .nets import made as made_module


        class Flow(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.made = made_module.MADE(d)
                self.mlp = nets.MLP(d)
                self.degrees = self.made.mask  # a child's buffer read into the parent: not registered

            def forward(self, x):
                return utils.splines.squash(self.mlp(self.made(x))) + (self.degrees >= 0.5).float().sum()
        """
    ),
}


@pytest.mark.parametrize("to", ["jax", "tf"])
def test_modules_imported_by_name_are_converted_like_their_names(tmp_path: Path, to: str) -> None:
    """normflows builds `made_module.MADE(...)` from `from ..nets import made as made_module`:
    the module object stayed imported, and torch layers were built inside the converted model.
    Each attribute read becomes a name imported from its module (through submodules and
    re-exports), which sibling conversion then copies in; MADE, a subclass of nn.Linear, reads
    its own `weight`; its buffer, read into the parent, is in the state dict once, as torch's."""
    package = tmp_path / "flowlib"
    for name, text in MODULE_IMPORTS.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    flow = package / "flow.py"
    result = transpile(flow.read_text(), to=to, path=str(flow))
    assert not result.errors and not result.unsupported, [d.format() for d in result.diagnostics]
    tree = ast.parse(result.code)
    read = {n.value.id for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}
    assert not read & {"made_module", "nets", "utils"}
    assert "class MADE(" in result.code and "class MLP(" in result.code and "def squash(" in result.code
    converted = package / f"flow_{to}.py"
    converted.write_text(result.code)
    verdict = verify_files(flow, converted, VerifyOptions(entry="Flow(4)", inputs=["float32[2,4]"]))
    assert verdict.passed, verdict.failures


def test_a_namespace_package_module_imported_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pytorch-tabnet is a namespace package (no `__init__.py`) whose model file says `from
    pytorch_tabnet import sparsemax`: the module was not found, stayed imported, and its torch
    layer ran inside the converted model."""
    package = tmp_path / "nslib"
    package.mkdir()
    (package / "acts.py").write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Square(nn.Module):\n"
        "    def forward(self, x):\n        return torch.square(x)\n"
    )
    source = (
        "import torch.nn as nn\n\nfrom nslib import acts\n\n\nclass Net(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(4, 4)\n"
        "        self.act = acts.Square()\n\n    def forward(self, x):\n        return self.act(self.fc(x))\n"
    )
    model = package / "net.py"
    model.write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    for to in ("jax", "tf"):
        result = transpile(source, to=to, path=str(model))
        assert "class Square(" in result.code and "from nslib import acts" not in result.code
        converted = package / f"net_{to}.py"
        converted.write_text(result.code)
        verdict = verify_files(model, converted, VerifyOptions(entry="Net()", inputs=["float32[2,4]"]))
        assert verdict.passed, verdict.failures


LOCAL_IMPORTS = {
    "actlib/__init__.py": "",
    "actlib/activation.py": textwrap.dedent(
        """
        import torch
        import torch.nn as nn


        class Swish(nn.Module):
            def forward(self, x):
                return x * torch.sigmoid(x)


        class Mish(nn.Module):
            def forward(self, x):
                return x * torch.tanh(nn.functional.softplus(x))
        """
    ),
    "actlib/factories.py": textwrap.dedent(
        """
        class Registry:
            def __init__(self):
                self.factories = {}

            def factory_function(self, name):
                def register(fn):
                    self.factories[name] = fn
                    return fn

                return register

            def __getitem__(self, name):
                return self.factories[name]()


        Act = Registry()


        @Act.factory_function("swish")
        def swish_factory():
            from actlib.activation import Swish

            return Swish


        def mish_layer():
            from actlib.activation import Mish

            return Mish()
        """
    ),
    "actlib/net.py": textwrap.dedent(
        """
        import torch.nn as nn

        from actlib.factories import Act, mish_layer


        class Net(nn.Module):
            def __init__(self, d=4):
                super().__init__()
                self.fc = nn.Linear(d, d)
                self.act = Act["swish"]()
                self.mish = mish_layer()

            def forward(self, x):
                return self.mish(self.act(self.fc(x)))
        """
    ),
}


@pytest.mark.parametrize("to", ["jax", "tf"])
def test_package_imports_inside_copied_functions_are_copied_too(tmp_path: Path, to: str) -> None:
    """monai's activation factories import the layer they return inside the function
    (`from monai.networks.blocks.activation import Swish`, absolute): the import stayed in the
    copied function, so the converted model built torch's Swish and failed at its first call. A
    package import inside a copied function (registered by a decorator, or plain) is hoisted and
    what it names copied and converted like any sibling import."""
    for name, text in LOCAL_IMPORTS.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    net = tmp_path / "actlib" / "net.py"
    result = transpile(net.read_text(), to=to, path=str(net))
    assert not result.errors and not result.unsupported, [d.format() for d in result.diagnostics]
    assert "from actlib.activation import" not in result.code
    assert "class Swish(" in result.code and "class Mish(" in result.code
    converted = net.with_name(f"net_{to}.py")
    converted.write_text(result.code)
    verdict = verify_files(net, converted, VerifyOptions(entry="Net()", inputs=["float32[2,4]"]))
    assert verdict.passed, verdict.failures


STAR_REEXPORTS = {
    "gnnlib/__init__.py": "import torch  # noqa\n\nfrom . import nn  # noqa\n",
    "gnnlib/nn/__init__.py": "from .conv import *  # noqa\nfrom .pool import *  # noqa\n",
    "gnnlib/nn/conv/__init__.py": "from .scale_conv import ScaleConv\n\n__all__ = ['ScaleConv']\n",
    "gnnlib/nn/conv/scale_conv.py": textwrap.dedent(
        """
        import torch
        import torch.nn as nn


        class ScaleConv(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.lin = nn.Linear(d, d)

            def forward(self, x):
                return self.lin(x) * 2
        """
    ),
    "gnnlib/nn/pool/__init__.py": "from .selects import *  # noqa\n",
    "gnnlib/nn/pool/selects.py": (
        "from .select import *  # noqa\nfrom .select import __all__ as select_all\n\n__all__ = select_all\n"
    ),
    "gnnlib/nn/pool/select.py": textwrap.dedent(
        """
        from dataclasses import dataclass

        import torch


        @dataclass
        class Output:
            index: torch.Tensor
            count: int


        Output = torch.jit.script(Output) if False else Output


        def pick(x):
            return Output(torch.argmax(x, dim=-1), x.shape[0])


        __all__ = ["Output", "pick"]
        """
    ),
    "gnnlib/nn/models/__init__.py": "",
    "gnnlib/nn/models/encoders.py": "import torch\n\nimport gnnlib\n\n\nclass Conv(gnnlib.nn.ScaleConv):\n    pass\n",
    "gnnlib/nn/models/unet.py": textwrap.dedent(
        """
        import torch.nn as nn

        from gnnlib.nn import pick
        from gnnlib.nn.models.encoders import Conv


        class UNet(nn.Module):
            def __init__(self, d=4):
                super().__init__()
                self.convs = nn.ModuleList()
                self.convs.append(Conv(d))

            def forward(self, x):
                for conv in self.convs:
                    x = conv(x)
                return x + pick(x).index[:, None].float()
        """
    ),
}


@pytest.mark.parametrize("to", ["jax", "tf"])
def test_names_a_package_reexports_through_star_imports(tmp_path: Path, to: str) -> None:
    """torch-geometric's GraphUNet imports `from torch_geometric.nn import GCNConv`, which
    `torch_geometric/nn/__init__.py` re-exports by `from .conv import *`: the import stayed, the
    converted model built torch's GCNConv and held no weights (silently: no warning). A name a
    star import re-exports is followed to its module; a class rebound to a wrapper of itself
    (`SelectOutput = torch.jit.script(SelectOutput)`) is copied with that statement."""
    for name, text in STAR_REEXPORTS.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    unet = tmp_path / "gnnlib" / "nn" / "models" / "unet.py"
    result = transpile(unet.read_text(), to=to, path=str(unet))
    assert not result.errors and not result.unsupported, [d.format() for d in result.diagnostics]
    imported = [n.module for n in ast.walk(ast.parse(result.code)) if isinstance(n, ast.ImportFrom)]
    assert not [m for m in imported if (m or "").startswith("gnnlib")], imported
    assert "class ScaleConv(" in result.code and "class Output" in result.code
    converted = unet.with_name(f"unet_{to}.py")
    converted.write_text(result.code)
    verdict = verify_files(unet, converted, VerifyOptions(entry="UNet()", inputs=["float32[2,4]"]))
    assert verdict.passed, verdict.failures


LAZY_RELATIVE = {
    "lazylib/__init__.py": '__version__ = "1.2.0"\n',
    "lazylib/utils/__init__.py": "",
    "lazylib/utils/deprecation.py": textwrap.dedent(
        """
        import torch  # noqa: F401


        def deprecate(name):
            from .. import __version__

            return f"{name} is deprecated since {__version__}"
        """
    ),
    "lazylib/models/__init__.py": "",
    "lazylib/models/unets/__init__.py": "",
    "lazylib/models/unets/net.py": textwrap.dedent(
        """
        import torch
        import torch.nn as nn

        from ...utils.deprecation import deprecate


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.note = deprecate("Net")
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                return self.fc(x)
        """
    ),
}


@pytest.mark.parametrize("to", ["jax", "tf"])
def test_a_relative_import_a_copied_function_makes_when_called_is_made_absolute(tmp_path: Path, to: str) -> None:
    """diffusers' `deprecate` imports `from .. import __version__` when called: copied into a file
    two packages further down, the dots named `lazylib.models` and the converted model failed at
    its first call. Left in place (imported when called, as written) but absolute."""
    for name, text in LAZY_RELATIVE.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    net = tmp_path / "lazylib" / "models" / "unets" / "net.py"
    result = transpile(net.read_text(), to=to, path=str(net))
    assert not result.errors and not result.unsupported, [d.format() for d in result.diagnostics]
    assert "    from lazylib import __version__\n" in result.code and "from .. import" not in result.code
    converted = net.with_name(f"net_{to}.py")
    converted.write_text(result.code)
    verdict = verify_files(net, converted, VerifyOptions(entry="Net()", inputs=["float32[2,4]"]))
    assert verdict.passed, verdict.failures


ONE_CLASS = {
    "cfglib/__init__.py": "",
    "cfglib/config.py": textwrap.dedent(
        """
        import torch  # noqa: F401


        class ConfigMixin:
            config_name = "config.json"


        class LegacyConfigMixin(ConfigMixin):
            pass


        def register(init):
            def inner(self, *args, **kwargs):
                if not isinstance(self, ConfigMixin):
                    raise RuntimeError(f"{type(self).__name__} does not inherit from ConfigMixin")
                return init(self, *args, **kwargs)

            return inner
        """
    ),
    "cfglib/block.py": textwrap.dedent(
        """
        import torch.nn as nn

        from .config import LegacyConfigMixin, register


        class Block(nn.Module, LegacyConfigMixin):
            @register
            def __init__(self, d):
                super().__init__()
                self.fc = nn.Linear(d, d)

            def forward(self, x):
                return self.fc(x)
        """
    ),
    "cfglib/net.py": textwrap.dedent(
        """
        import torch.nn as nn

        from .block import Block
        from .config import register


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.block = Block(4)

            def forward(self, x):
                return self.block(x)


        def unused():
            return register
        """
    ),
}


@pytest.mark.parametrize("to", ["jax", "tf"])
def test_a_class_an_earlier_copy_took_along_is_not_copied_again(tmp_path: Path, to: str) -> None:
    """diffusers: `register_to_config` copied first (with ConfigMixin, which it checks against),
    then LegacyConfigMixin in a later round took ConfigMixin along again; the second class failed
    the first's isinstance check when the model was built."""
    for name, text in ONE_CLASS.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    net = tmp_path / "cfglib" / "net.py"
    result = transpile(net.read_text(), to=to, path=str(net))
    assert not result.errors, [d.format() for d in result.diagnostics]
    assert result.code.count("class ConfigMixin") == 1, result.code
    converted = net.with_name(f"net_{to}.py")
    converted.write_text(result.code)
    verdict = verify_files(net, converted, VerifyOptions(entry="Net()", inputs=["float32[2,4]"]))
    assert verdict.passed, verdict.failures

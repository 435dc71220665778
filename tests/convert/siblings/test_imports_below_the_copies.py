"""An import the converted file makes only below where sibling copies go does not bind the name
for them (rectified-flow's `from PIL import Image` before its dataset class, torchvision's PIL
helpers copied in with `interpolation: int = Image.BILINEAR` defaults): the copies' own import is
put above them, so the output loads."""

from __future__ import annotations

from pathlib import Path

from precision_transpiler import transpile
from precision_transpiler.verify import VerifyOptions, verify_files
from tests.convert.siblings.packages import write_package
from tests.helpers import on_both_targets

HELPERS = """
    from PIL import Image
    import torch


    def scale(x, mode: int = Image.BILINEAR):
        return x * torch.tensor(float(mode))
"""

MODEL = """
    import torch
    from torch import nn

    from belowimp.helpers import scale


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            return scale(self.fc(x))


    from PIL import Image  # the file's own, for what follows


    def to_image(array):
        return Image.fromarray(array)
"""


@on_both_targets
def test_the_copies_import_what_the_file_imports_only_below_them(tmp_path: Path, target: str) -> None:
    write_package(tmp_path, {"belowimp/helpers.py": HELPERS, "belowimp/model.py": MODEL})
    model = tmp_path / "belowimp/model.py"
    code = transpile(model.read_text(), to=target, path=str(model)).code
    lines = code.splitlines()
    default = next(i for i, line in enumerate(lines) if "Image.BILINEAR" in line)
    assert any(line == "from PIL import Image" for line in lines[:default]), code
    converted = tmp_path / f"model_{target}.py"
    converted.write_text(code)
    verdict = verify_files(model, converted, VerifyOptions(entry="Net()", inputs=["float32[2,4]"], torch_free=True))
    assert verdict.passed, verdict

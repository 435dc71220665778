"""Bring in what a converted file needs from sibling modules of its package.

torchvision's vision_transformer.py builds `MLPBlock(MLP)` where `MLP` comes from
`..ops.misc`; a converted ViT that imported the original `MLP` would import torch. So each name
the converted file still imports from its own package (relative imports, or absolute ones into
the same top-level package) whose module uses torch is converted too: the sibling module is
converted in memory, and the definitions the file needs (with the helpers and imports they
use, in the sibling's order) are copied into the output in place of the import. Relative
imports inside copied code are made absolute, and the step repeats for what they bring in.

Model code also imports small torch libraries of other distributions (x-transformers builds
its layers with `torch_einops_utils.nn.Sequential`). Their names are treated the same way when
the module's file is found on the search path (`sys.path`, looked up as files: nothing is
imported) and its top-level package is not one the mapping tables know (torch, einops,
transformers, the targets: those are mapped, not converted), so the output does not hand
converted layers to torch code.

One phase per module, in the order they run (rounds.py drives them, round after round):

- resolve.py: which modules and names (sibling and installed module files, re-exports, star
  imports; one remembered `ast` tree per module text);
- extract.py: the definitions taken and what they depend on;
- splice.py: imports and renames (clashes, hoisted local imports, the inserted blocks);
- order.py: the order of what was copied (the only place that moves definitions);
- rngs.py: `rngs` threaded through calls of copied classes (torch -> Flax NNX), a stage of
  its own after copying.
"""

from precision_transpiler.convert.siblings.order import order_definitions
from precision_transpiler.convert.siblings.resolve import (
    absolute_module,
    dotted,
    framework_through_package,
    package_of,
    parsed_source,
    top_level_from_imports,
)
from precision_transpiler.convert.siblings.rngs import thread_sibling_rngs
from precision_transpiler.convert.siblings.rounds import (
    BUDGET,
    SMALL_HELPER,
    Diagnostics,
    SiblingReport,
    inline_siblings,
)
from precision_transpiler.convert.siblings.splice import MARKER

__all__ = [
    "BUDGET",
    "MARKER",
    "SMALL_HELPER",
    "Diagnostics",
    "SiblingReport",
    "absolute_module",
    "dotted",
    "framework_through_package",
    "inline_siblings",
    "order_definitions",
    "package_of",
    "parsed_source",
    "thread_sibling_rngs",
    "top_level_from_imports",
]

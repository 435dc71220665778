"""Which framework a file is written for, read from its imports (static: nothing is imported).

Apart from `api` so that the pipeline, the verifier and the library calls can all ask without
importing each other (`api` re-exports both functions).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import libcst as cst

from precision_transpiler.mappings import MappingSet, load_mappings


def detect_file_framework(
    path: str | os.PathLike[str], source: str, mappings: Sequence[str | os.PathLike[str]] | MappingSet = ()
) -> tuple[str | None, Path | None]:
    """(framework, module it was read from) for a file: its own imports (`detect_framework`,
    module None), or, when it imports no framework, the first module of its package that its
    package imports reach and that uses one (a model file that imports only `..base` and
    `.decoder`: convert/siblings/resolve.py `framework_through_package`). Static: files are read."""
    from precision_transpiler.convert.siblings import framework_through_package

    table = mappings if isinstance(mappings, MappingSet) else load_mappings(mappings)
    own = detect_framework(source, table)
    if own is not None:
        return own, None
    found = framework_through_package(Path(path), source, lambda text: detect_framework(text, table))
    return (found[0], found[1]) if found is not None else (None, None)


def detect_framework(source: str, mappings: Sequence[str | os.PathLike[str]] | MappingSet = ()) -> str | None:
    """The framework a module is written for ("torch", "jax", "tf", "numpy"), from its imports;
    None when it uses none (or does not parse). Static, like everything in transpiling."""
    from precision_transpiler.rewrite.depth import TooDeep, check_depth
    from precision_transpiler.rewrite.engine import detect_source
    from precision_transpiler.rewrite.names import NameResolver

    try:
        check_depth(source)  # LibCST's parser would crash the process
        module = cst.parse_module(source)
    except (cst.ParserSyntaxError, TooDeep):
        return None
    table = mappings if isinstance(mappings, MappingSet) else load_mappings(mappings)
    found = detect_source(NameResolver(module, source), table)
    if found is None:  # a converted file that takes everything from the runtime module beside it
        from precision_transpiler.convert.runtime_module import runtime_module_target

        found = runtime_module_target(source)
    return found

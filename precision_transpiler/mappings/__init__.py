"""Mapping tables: loading, validation and lookup.

The YAML files in `mappings/` are the single source of truth for what maps to what. This
package turns them into a `MappingSet` with the indexes the rewriter needs. Tables come from
three places, merged in this order (later wins per key): the built-in tables, directories
registered by installed packages under the entry-point group `precision_transpiler.mappings`,
and directories given with `--mappings DIR` (or `mappings=` in the library API).
"""

from __future__ import annotations

from precision_transpiler.mappings.model import FrameworkInfo, MappingSet, OpSpec
from precision_transpiler.mappings.registry import builtin_mappings_dir, load_mappings

__all__ = ["FrameworkInfo", "MappingSet", "OpSpec", "builtin_mappings_dir", "load_mappings"]

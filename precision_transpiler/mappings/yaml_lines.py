"""A YAML loader that remembers the line each key and item came from.

Mapping tables are written by people; when one is wrong the error must point at the line,
so plain `yaml.safe_load` (which forgets positions) is not enough.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml  # this module is imported only when tables are parsed

from precision_transpiler.mappings.linetypes import LineDict, LineList

try:  # the C loader is 5-10x faster; fall back when PyYAML was built without libyaml
    _Base: type[yaml.SafeLoader] = yaml.CSafeLoader  # type: ignore[attr-defined]
except AttributeError:  # pragma: no cover
    _Base = yaml.SafeLoader


class _Loader(_Base):  # type: ignore[misc, valid-type]
    pass


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> LineDict:
    result = LineDict()
    result.line = node.start_mark.line + 1
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str | int | float | bool) and key is not None:
            raise yaml.constructor.ConstructorError(None, None, "mapping keys must be scalars", key_node.start_mark)
        skey = str(key)
        if skey in result:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {skey!r}", key_node.start_mark)
        result[skey] = loader.construct_object(value_node, deep=True)
        result.lines[skey] = key_node.start_mark.line + 1
    return result


def _construct_sequence(loader: yaml.SafeLoader, node: yaml.SequenceNode) -> LineList:
    result = LineList(loader.construct_object(child, deep=True) for child in node.value)
    result.lines = [child.start_mark.line + 1 for child in node.value]
    result.line = node.start_mark.line + 1
    return result


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


def load_yaml_with_lines(path: Path) -> Any:
    """Load one YAML file; raises yaml.YAMLError (with a mark) or OSError."""
    with path.open("rb") as fh:
        return yaml.load(fh, Loader=_Loader)

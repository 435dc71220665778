"""Static analysis of torch model code, apart from the engine that converts it.

- `torch_models`: which classes are modules and which functions build layers (who needs
  `rngs`), buffers, parameters, random draws: whole-file facts, on Python's `ast`;
- `tensors`: whether an expression holds a tensor, what `self.<name>` is, where a call stands;
- `masks`: boolean tensors, masks and dtype names;
- `inplace`: what an in-place call touches (parameters being initialised, views sharing memory);
- `view`: what these ask of the file being converted (the engine's `RuleContext` provides it).

The package depends on the tables (`mappings`), `syntax` and `diagnostics` only: the rules, the
engine and model conversion use it, never the other way round.
"""

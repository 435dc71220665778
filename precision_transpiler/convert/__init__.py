"""Whole-model conversion between frameworks (torch -> Flax NNX today).

The dtype-level rules in `rules/` convert expressions; this package holds what model
conversion needs beyond them: the layer table (`mappings/layers/*.yaml`), the analysis of
which functions build layers (so `rngs` can be threaded through them), and the step that
copies the torch-semantics shims a converted file uses into that file (`vendor.py`).
"""

"""Runtime shims that converted code carries with it.

`flax_nn` holds Flax NNX classes and functions with torch's signatures and torch's exact semantics
(NCHW layouts, pooling defaults, BatchNorm momentum, mask polarity, ...). The converter copies the
definitions a converted file needs, plus the top-level helpers they reference, into that file, so
the module is self-contained source: see its docstring for the rules it keeps.
"""

"""Tests of precision_transpiler/runtime/flax, module by module."""

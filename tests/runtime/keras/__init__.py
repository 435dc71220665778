"""Tests of precision_transpiler/runtime/keras, module by module."""

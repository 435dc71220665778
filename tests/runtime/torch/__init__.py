"""Tests of precision_transpiler/runtime/torch, module by module."""

"""Shared helpers for tests that compare a converted or shimmed computation with real torch.

Two kinds of comparison live here:

- the runtime tests (runtime/test_flax_runtime.py, runtime/test_keras_runtime.py): random
  float32 inputs (`rand`), torch modules with every weight randomised (`perturb`), and the
  relative L2 error of whole arrays (`relative_l2`, `assert_within`), each test file converting
  its framework's arrays to NumPy;
- the converted-code tests (runtime/test_tensor_ops_execute.py, rules/test_torch_inplace_ops.py):
  run `f` from a torch source and from its conversion on the same NumPy inputs (`run_both`), then
  compare the results structurally (`assert_same`: shapes, dtypes, exact integers, float32 to a
  relative error of max|got - ref| / max|ref|).

torch and jax are imported inside the functions that need them, so importing this module needs
neither (runtime/test_keras_runtime.py runs without jax).
"""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

TOL = 1e-5  # the shim tests' relative L2 error in float32


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def perturb(module: Any, seed: int = 0) -> Any:
    """Randomise every floating parameter and buffer, constant-initialised ones included."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, tensor in module.state_dict().items():
            if tensor.is_floating_point():
                noise = torch.randn(tensor.shape, generator=gen, dtype=tensor.dtype)
                tensor.copy_(noise.abs() + 0.5 if name.endswith("running_var") else noise)
    return module


def relative_l2(got: np.ndarray, want: np.ndarray) -> float:
    """||got - want|| / ||want|| (the plain error where `want` is all zeros); shapes must agree."""
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = np.linalg.norm(want)
    return float(np.linalg.norm(got - want) / (scale if scale > 0 else 1.0))


def assert_within(err: float, tol: float = TOL) -> None:
    assert err <= tol, f"relative L2 error {err:.3g} > {tol}"


def top_level_definitions(tree: ast.Module) -> dict[str, ast.stmt]:
    """A module's top-level functions, classes and assigned names, in source order."""
    defs: dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            defs[node.name] = node
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    defs[target.id] = node
    return defs


# ------------------------------------------------------------------------------------------------
# converted code against torch


def run_both(case_id: str, source: str, converted_code: str, inputs: tuple[Any, ...]) -> tuple[Any, Any]:
    """Run `f` of the torch `source` and of `converted_code` on the same inputs: an input with a
    `make(rng)` method is drawn from a generator seeded by `case_id`, NumPy arrays are handed to
    torch as tensors and to JAX as arrays. Returns (converted result, torch result)."""
    import jax.numpy as jnp
    import torch

    rng = np.random.default_rng(sum(map(ord, case_id)))
    values = [v.make(rng) if hasattr(v, "make") else v for v in inputs]
    reference: dict[str, Any] = {}
    exec(compile(source, "torch_case.py", "exec"), reference)
    converted: dict[str, Any] = {}
    exec(compile(converted_code, "converted.py", "exec"), converted)
    with torch.no_grad():
        expected = reference["f"](*[torch.from_numpy(v.copy()) if isinstance(v, np.ndarray) else v for v in values])
    got = converted["f"](*[jnp.asarray(v) if isinstance(v, np.ndarray) else v for v in values])
    return got, expected


def assert_max_relative(got: np.ndarray, ref: np.ndarray, path: str, rtol: float) -> None:
    """Float arrays: inf, -inf and nan where `ref` has them, elsewhere max|got - ref| / max|ref|
    at most `rtol` (exact equality where `ref` is all zeros)."""
    finite = np.isfinite(ref)
    np.testing.assert_array_equal(got[~finite], ref[~finite], err_msg=path)  # inf, -inf, nan alike
    got, ref = got[finite], ref[finite]
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    err = float(np.max(np.abs(got.astype(np.float64) - ref.astype(np.float64)))) if ref.size else 0.0
    assert (err == 0.0) if scale == 0.0 else err / scale <= rtol, f"{path}: relative error {err / (scale or 1):.3g}"

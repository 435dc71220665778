"""Run a converted model against its original and judge the difference.

The steps, in order (docs/verification.md): import both files; build both models with the entry
expression; put the original in inference mode, perturb its weights (seeded) and optionally
recalibrate BatchNorm; copy the weights into the converted model; run both on the same seeded
inputs, capturing every named submodule's output; for a low-precision policy, also run the
source framework's own mixed precision on the original (the yardstick); then compare outputs
against the tolerance and pair the layers by module path.

This is the one part of ptranspile that imports frameworks and runs user code.
"""

from __future__ import annotations

import contextlib
import random
import re
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from precision_transpiler.errors import UsageError, VerifyError
from precision_transpiler.precision.policy import Policy, resolve_policy
from precision_transpiler.verify.adapters import Adapter, Capture, adapter_for
from precision_transpiler.verify.build_draws import copy_build_draws
from precision_transpiler.verify.build_draws import note as build_draws_note
from precision_transpiler.verify.judge import judge
from precision_transpiler.verify.loading import build_model, import_converted, import_original
from precision_transpiler.verify.metrics import compare
from precision_transpiler.verify.result import LayerRecord, VerificationResult
from precision_transpiler.verify.spec import (
    DEFAULT_MAX_INPUT_MB,
    InputSpec,
    check_input_budget,
    make_inputs,
    parse_input_spec,
)

_POLICY_MARKER = re.compile(r'^# ptranspile: begin precision policy "([^"]+)"', re.MULTILINE)
DEFAULT_FP32_TOLERANCE = 1e-5
DEFAULT_MIXED_FACTOR = 2.0


@dataclass
class VerifyOptions:
    """Everything `verify_files` needs besides the two files. See docs/verification.md."""

    entry: str
    inputs: Sequence[str | InputSpec]
    policy: str | None = None  # None: the policy named in the converted file's marker, else fp32
    device: str = "auto"
    seed: int = 0
    perturb: bool = True
    calibrate_bn: bool = False
    tolerance: float | None = None  # replaces the derived output threshold
    fp32_tolerance: float = DEFAULT_FP32_TOLERANCE
    mixed_factor: float = DEFAULT_MIXED_FACTOR
    layers: bool = True
    timing: int = 0  # > 0: time one forward of each model (medians of this many runs after warm-up)
    max_input_mb: float = DEFAULT_MAX_INPUT_MB  # inputs larger than this (alone or together) are refused
    progress: Any = None  # called with each step's name ("running the original"); verify/progress.py
    source: str | None = None  # frameworks; None: detected from the files' imports
    target: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # modules beside the converted file that are not written yet, by name: their text (the
    # runtime module of `--runtime module`, when verification runs before anything is written)
    modules: dict[str, str] = field(default_factory=dict)
    # fail a conversion from torch whose output imports torch when loaded (analysis/load_imports.py),
    # as `ptranspile verify` does; off (`--allow-torch`): such imports are said in the notes
    torch_free: bool = True


def policy_of(converted_code: str, requested: str | None, device: str = "auto") -> Policy:
    """The policy the converted file was made with: `requested`, else the name in its
    `# ptranspile: begin precision policy "NAME"` marker, else fp32."""
    if requested is not None:
        return resolve_policy(requested, device=device)
    match = _POLICY_MARKER.search(converted_code)
    if match is None:
        return resolve_policy("fp32", device=device)
    try:
        return resolve_policy(match.group(1), device=device)
    except Exception:
        raise UsageError(
            f"the converted file was made with policy {match.group(1)!r}, which is not a built-in: "
            "pass the same --policy (a YAML file) to verify"
        ) from None


def _converted_entries(
    options: VerifyOptions, original_code: str, code: str, source: str, target: str, policy: Policy
) -> tuple[Any, Any]:
    """The entry expression converted for the converted module (under its policy) and for its fp32
    reference (verify/entry_conversion.py); Nones when source and target are one framework or the
    entry names no framework import."""
    if source == target:
        return None, None
    from precision_transpiler.verify.entry_conversion import convert_entry

    match = _POLICY_MARKER.search(code)
    spec = options.policy or (match.group(1) if match else "fp32")
    main = convert_entry(options.entry, original_code, target=target, policy=spec, source=source)
    if main is None or policy.is_full_precision:
        return main, main
    return main, convert_entry(options.entry, original_code, target=target, policy="fp32", source=source)


def weight_transfer(source: str, target: str) -> Any:
    """The function that copies weights from a `source` model into its `target` conversion."""
    if (source, target) == ("torch", "jax"):

        def torch_to_flax(original: Any, converted: Any) -> None:
            from precision_transpiler.weights.torch_to_flax import load_torch_state_dict

            state = {k: v.detach().cpu().numpy() for k, v in structural_state_dict(original).items()}
            try:
                load_torch_state_dict(converted, state)
            except ValueError as exc:
                raise VerifyError(f"the converted model does not take the original's weights: {exc}") from None

        return torch_to_flax
    if (source, target) == ("torch", "tf"):

        def torch_to_keras(original: Any, converted: Any) -> None:
            from precision_transpiler.weights.torch_to_keras import load_torch_state_dict_keras

            try:
                load_torch_state_dict_keras(converted, structural_state_dict(original))
            except ValueError as exc:
                raise VerifyError(f"the converted model does not take the original's weights: {exc}") from None

        return torch_to_keras
    raise VerifyError(
        f"verifying {source} -> {target} needs a weight transfer between those frameworks, which ptranspile "
        "does not have yet (torch -> jax, torch -> tf and conversions within one framework are verified)"
    )


def structural_state_dict(model: Any) -> dict[str, Any]:
    """`model.state_dict()`, or, when a module of it overrides `state_dict` (torchsr's
    `WrappedModel` returns its inner model's, without the `model.` prefix), the state dict
    torch's own `Module.state_dict` gives by the module tree: the converted model is loaded by
    that tree, whatever the original hands out when saved."""
    import torch

    base = torch.nn.Module.state_dict
    if all(type(module).state_dict is base for module in model.modules()):
        return model.state_dict()
    state: dict[str, Any] = {}
    for name, module in model.named_modules(remove_duplicate=False):
        module._save_to_state_dict(state, f"{name}." if name else "", False)
    return state


def _seed_everything(seed: int) -> None:
    import sys

    random.seed(seed)
    np.random.seed(seed)
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(seed)
    if "keras" in sys.modules:
        with contextlib.suppress(Exception):  # seeding is best effort; weights are copied anyway
            sys.modules["keras"].utils.set_random_seed(seed)


def verify_files(
    original: str | Path,
    converted: str | Path,
    options: VerifyOptions,
    *,
    converted_code: str | None = None,
) -> VerificationResult:
    """Verify `converted` (or `converted_code`, the text that would be written there) against
    `original`. Raises VerifyError/UsageError when verification cannot run at all; a numeric
    disagreement is a *failed result*, not an exception."""
    from precision_transpiler.detection import detect_file_framework, detect_framework

    started = time.perf_counter()
    original, converted = Path(original), Path(converted)
    for path in (original, converted):
        if converted_code is not None and path == converted:
            continue
        if not path.is_file():
            raise UsageError(f"{path}: no such file")
    specs = [s if isinstance(s, InputSpec) else parse_input_spec(s) for s in options.inputs]
    if not specs:
        raise UsageError("verification needs at least one --input SPEC (e.g. float32[1,3,224,224])")
    check_input_budget(specs, options.max_input_mb)
    original_code = original.read_text(encoding="utf-8")
    code = converted_code if converted_code is not None else converted.read_text(encoding="utf-8")
    from precision_transpiler.rewrite.depth import TooDeep, check_depth

    for path, text in ((original, original_code), (converted, code)):
        try:
            check_depth(text)  # before anything parses it: LibCST's parser would crash the process
        except TooDeep as exc:
            raise VerifyError(f"{path}:{exc.line}: {exc.message}") from None
    source = options.source or detect_file_framework(original, original_code)[0]
    target = options.target or detect_framework(code)
    if source is None or target is None:
        which = original if source is None else converted
        raise VerifyError(f"{which}: cannot tell which framework it uses (pass --from/--to)")
    transfer = weight_transfer(source, target) if source != target else None
    policy = policy_of(code, options.policy, options.device)
    adapter = adapter_for(target)
    source_adapter = adapter_for(source) if source != target else adapter

    _step(options, "importing the frameworks and both files")
    _seed_everything(options.seed)
    original_module = import_original(original)
    converted_module = import_converted(converted, original, code, modules=options.modules)
    _step(options, "building the models")
    entries = _converted_entries(options, original_code, code, source, target, policy)
    _seed_everything(options.seed)
    reference_model = build_model(original_module, options.entry, "original")
    _seed_everything(options.seed + 1)
    converted_model = build_model(converted_module, options.entry, "converted", entries[0])
    for model, side, kind in ((reference_model, "original", source_adapter), (converted_model, "converted", adapter)):
        if not kind.is_model(model):
            raise VerifyError(
                f"--entry {options.entry!r} returned {type(model).__name__} in the {side} module, "
                f"not a {kind.name} model"
            )
    inputs = make_inputs(specs, options.seed)
    # a torch original with autocast regions has their low-precision error by design (static and
    # cheap: the conversion notes each region as `autocast-region`)
    regions = source == "torch" and "autocast(" in original_code
    try:
        return _compare_models(
            options, specs, policy, source, target, original, converted, original_module, reference_model,
            converted_model, inputs, adapter, source_adapter, transfer, started, autocast_regions=regions,
            converted_code=code, fp32_entry=entries[1],
        )  # fmt: skip
    except VerifyError:
        raise
    except BaseException as exc:  # the user's model code (or a conversion gap) failed while running
        if isinstance(exc, KeyboardInterrupt):  # an abort: exit 130, one line (cli.main)
            raise
        # SystemExit too: a model's `sys.exit(0)` must not end verification without a verdict
        from precision_transpiler.verify.loading import short_error

        raise VerifyError(f"running the models failed: {short_error(exc, str(converted))}") from None


def _compare_models(
    options: VerifyOptions,
    specs: list[InputSpec],
    policy: Policy,
    source: str,
    target: str,
    original: Path,
    converted: Path,
    original_module: Any,
    reference_model: Any,
    converted_model: Any,
    inputs: list[np.ndarray],
    adapter: Adapter,
    source_adapter: Adapter,
    transfer: Any,
    started: float,
    *,
    autocast_regions: bool = False,
    converted_code: str = "",
    fp32_entry: Any = None,
) -> VerificationResult:
    source_adapter.prepare(
        reference_model, inputs, seed=options.seed, perturb=options.perturb, calibrate_bn=options.calibrate_bn
    )
    if transfer is None:
        adapter.copy_weights(reference_model, converted_model)
    else:
        transfer(reference_model, converted_model)
        adapter.prepare(converted_model, inputs, seed=options.seed, perturb=False, calibrate_bn=False)
    low = not policy.is_full_precision
    # full precision only: compiled low-precision code may keep intermediates in float32 (XLA's
    # excess precision), which would hide what an eager run of the same code rounds
    compiled = not low
    _step(options, "running the original")
    base = source_adapter.run(reference_model, inputs, capture=options.layers, compiled=compiled)
    _step(options, "running the converted model")
    result = adapter.run(converted_model, inputs, capture=options.layers, compiled=compiled)
    reference: Capture | None = None
    if low:
        compute = policy.compute if policy.compute != "float32" else "bfloat16"

        def rebuild() -> Any:
            return build_model(original_module, options.entry, "original")

        _step(options, "running the reference (the source framework's own mixed precision)")
        reference = source_adapter.run_reference(
            reference_model, rebuild, inputs, compute=compute, param=policy.param, capture=options.layers
        )
    target_reference: Capture | None = None
    target_note = ""
    if low and transfer is not None:
        _step(options, "running the target framework's reference")
        target_reference, target_note = _target_reference(
            options, converted_code, converted, original, reference_model, inputs, adapter, transfer, compute, policy,
            fp32_entry,
        )  # fmt: skip
    regions: Capture | None = None
    target_regions: Capture | None = None
    if autocast_regions:  # the yardstick of the regions' own error: the original without them
        _step(options, "running both models with their autocast regions disabled")
        with _torch_autocast_disabled():
            regions = source_adapter.run(reference_model, inputs, capture=options.layers)
        if transfer is not None:  # and the target's own: the converted model without them
            with _converted_regions_disabled(_module_of(converted_model)):
                target_regions = adapter.run(converted_model, inputs, capture=options.layers)
    verdict = judge(base, result, reference, policy, options, target, source, regions, target_reference, target_regions)
    if not verdict.passed and not low:  # values the original draws when built, outside its state dict
        rest = (base, reference, policy, options, target, source, regions, target_reference, target_regions)
        models = (original_module, reference_model, converted_model, source_adapter, adapter)
        verdict, result = _with_build_draws(options, models, (inputs, compiled), rest) or (verdict, result)
    if not verdict.passed:  # only then: a passing run costs nothing more
        _step(options, "running the original again under another seed")
        _note_random_forward(verdict, options, source_adapter, reference_model, inputs, base, target)
    if not verdict.passed and not verdict.random_forward and not low and regions is None:
        verdict = _against_float64(
            verdict, options, source_adapter, reference_model, inputs, (base, result), policy, (source, target)
        )
    if target_note:
        verdict.notes.append(target_note)
    _note_device_decision(verdict, converted_model)
    verdict.source, verdict.target = source, target
    verdict.original, verdict.converted = str(original), str(converted)
    verdict.entry, verdict.inputs, verdict.seed = options.entry, [str(s) for s in specs], options.seed
    if options.layers:
        _step(options, "comparing layer by layer")
        _judge_layers(
            verdict, base, result, reference or regions, options, low or regions is not None, adapter,
            converted_model, reference_model, source_adapter, target_reference, target_regions,
        )  # fmt: skip
    _note_param_bytes(verdict, (source_adapter, reference_model), (adapter, converted_model))
    if options.timing > 0:
        _step(options, f"timing both models ({options.timing} runs each)")
        verdict.timing = _time_models(
            options.timing, inputs, source_adapter, reference_model, adapter, converted_model, compute if low else None
        )
    verdict.notes.append(_how_it_ran(options, source, target))
    if source == "torch" and target != "torch":
        _torch_at_load(verdict, converted_code, original, converted, fail=options.torch_free)
    verdict.seconds = round(time.perf_counter() - started, 3)
    return verdict


def _note_param_bytes(
    verdict: VerificationResult, original: tuple[Adapter, Any], converted: tuple[Adapter, Any]
) -> None:
    """The bytes each model's parameters and buffers take, where both adapters can tell."""
    measure_source = getattr(original[0], "param_bytes", None)
    measure = getattr(converted[0], "param_bytes", None)
    if measure is not None and measure_source is not None:
        verdict.param_bytes = {"original": measure_source(original[1]), "converted": measure(converted[1])}


def _with_build_draws(
    options: VerifyOptions,
    models: tuple[Any, Any, Any, Adapter, Adapter],
    run: tuple[list[np.ndarray], bool],
    judging: tuple[Any, ...],
) -> tuple[VerificationResult, Capture] | None:
    """After a failed comparison: the original built again under another seed tells the tensors
    it draws when built and keeps outside its state dict (verify/build_draws.py); given to the
    converted model, the comparison runs again (`models`: the original's module, both models and
    both adapters; `run`: the inputs and whether compiled; `judging`: `judge`'s arguments but the
    converted run). None where there are none."""
    original_module, reference_model, converted_model, source_adapter, adapter = models

    def rebuild() -> Any:
        _seed_everything(options.seed + RANDOM_FORWARD_RESEED)
        return build_model(original_module, options.entry, "original")

    _step(options, "building the original again under another seed")
    copied = copy_build_draws(rebuild, reference_model, converted_model, source_adapter, adapter)
    if not copied:
        return None
    _step(options, "running the converted model with the original's draws")
    result = adapter.run(converted_model, run[0], capture=options.layers, compiled=run[1])
    verdict = judge(judging[0], result, *judging[1:])
    verdict.notes.append(build_draws_note(copied))
    return verdict, result


#: added to the run's seed for the original's second run (after a failed comparison only)
RANDOM_FORWARD_RESEED = 7919
_GENERATORS = {"jax": "JAX's", "tf": "TensorFlow's", "torch": "torch's own"}


def _note_random_forward(
    verdict: VerificationResult,
    options: VerifyOptions,
    source_adapter: Adapter,
    model: Any,
    inputs: list[np.ndarray],
    base: Capture,
    target: str,
) -> None:
    """After a failed comparison: run the original again on the same inputs and weights under
    another seed. When its own outputs move by more than the tolerance, its forward draws random
    numbers (`torch.randn` in `forward`, dropout that eval mode does not switch off): no
    conversion can give its values, since the converted model draws its own. Still a failure,
    never a pass; `random_forward` and the first failure line say why, so callers can count it
    apart. A second run that raises adds nothing (the first verdict stands)."""
    _seed_everything(options.seed + RANDOM_FORWARD_RESEED)
    try:
        again = source_adapter.run(model, inputs, capture=False)
    except Exception:
        return
    first = {name: array for name, array, _ in base.outputs}
    second = {name: array for name, array, _ in again.outputs}
    if not first:
        return
    spread = 0.0
    for name, array in first.items():
        other = second.get(name)
        if other is None or other.shape != array.shape:
            spread = float("inf")  # its very structure changed from one run to the next
            break
        rel = compare(array, other).rel_err
        spread = max(spread, rel if rel is not None else 0.0)
    if spread <= float(verdict.tolerance["max_rel_err"]):
        return
    verdict.random_forward = True
    generator = _GENERATORS.get(target, f"{target}'s")
    verdict.failures.insert(
        0,
        f"the original's forward draws random numbers (its outputs under two seeds differ by a relative error "
        f"of {spread:.3g}): its values cannot be compared with the converted model's, which draws from "
        f"{generator} generator",
    )


def _against_float64(
    verdict: VerificationResult,
    options: VerifyOptions,
    source_adapter: Adapter,
    model: Any,
    inputs: list[np.ndarray],
    runs: tuple[Capture, Capture],
    policy: Policy,
    frameworks: tuple[str, str],
) -> VerificationResult:
    """After a failed full-precision comparison: an output whose values cancel down to rounding
    noise (an FFT convolution of a near-constant sequence) differs between any two float32
    implementations, torch's own included. The original run in float64 measures what float32
    costs on each output; judged again with twice that as the yardstick (as mixed precision is
    judged against its own), the verdict stands when the converted model is no further off.
    Returned only when it passes; otherwise the first verdict stands."""
    run = getattr(source_adapter, "run_float64", None)
    if run is None or options.tolerance is not None:
        return verdict
    _step(options, "running the original in float64")
    _seed_everything(options.seed)
    try:
        exact = run(model, inputs)
    except Exception:  # a model that cannot run in float64 (explicit float32 casts): no yardstick
        return verdict
    (base, result), (source, target) = runs, frameworks
    again = judge(base, result, None, policy, options, target, source, float64=exact)
    if not again.passed:
        return verdict
    again.notes = [*verdict.notes, _float64_note(again)]
    return again


def _float64_note(verdict: VerificationResult) -> str:
    worst = max((r for r in verdict.outputs if r.reference_err is not None), key=lambda r: r.reference_err or 0.0)
    return (
        f"{worst.name}: at the limit of float32 -- the original's own float32 result is off by a relative error "
        f"of {worst.reference_err:.3g} against float64, so the converted model is judged against that"
    )


def _torch_at_load(verdict: VerificationResult, code: str, original: Path, converted: Path, fail: bool) -> None:
    """A conversion from torch that imports torch (or a package built on it) when loaded runs
    only where torch is installed (analysis/load_imports.py): said in the notes, and with
    `VerifyOptions.torch_free` it does not pass, however well it agrees."""
    from precision_transpiler.analysis.load_imports import torch_imports_at_load

    for line, module, why in torch_imports_at_load(code, original):
        message = (
            f"{converted}:{line}: the converted module imports {module} when loaded ({why}): "
            "it runs only where torch is installed"
        )
        if fail:
            verdict.failures.append(message)
            verdict.passed = False
        else:
            verdict.notes.append(message)


def _note_device_decision(verdict: VerificationResult, converted_model: Any) -> None:
    """--device auto: what the generated code decided where it ran."""
    decisions = getattr(_module_of(converted_model), "_PTRANSPILE_DECISION", None)
    if isinstance(decisions, dict) and decisions:
        verdict.device = dict(next(iter(decisions.values())))
        verdict.notes.append(
            "the converted code decided its compute dtype where it ran (--device auto): {compute} on {device}, "
            "where the policy asks for {requested} ({reason})".format(**verdict.device)
        )


def _how_it_ran(options: VerifyOptions, source: str, target: str) -> str:
    where = (
        f"ran both models on {target}"
        if source == target
        else f"ran the original on {source}, the converted model on {target}"
    )
    return (
        where
        + f" (CPU, inference mode), seed {options.seed}"
        + ("; weights perturbed" if options.perturb else "")
        + ("; BatchNorm statistics recalibrated" if options.calibrate_bn else "")
    )


def _step(options: VerifyOptions, name: str) -> None:
    if options.progress is not None:
        options.progress(name)


def _module_of(model: Any) -> Any:
    """The module that defines the model's class (where the policy's helpers live)."""
    import sys

    return sys.modules.get(type(model).__module__)


def _target_reference(
    options: VerifyOptions,
    code: str,
    converted: Path,
    original: Path,
    reference_model: Any,
    inputs: list[np.ndarray],
    adapter: Adapter,
    transfer: Any,
    compute: str,
    policy: Policy,
    fp32_entry: Any = None,
) -> tuple[Capture | None, str]:
    """The target framework's own mixed precision on an equivalent model, for conversions between
    frameworks: their kernels differ (a CPU without native bf16 kernels rounds differently in
    TensorFlow than in torch), so the source framework's error alone is no yardstick for the
    target's. The equivalent model is the converted file without what the policy inserted
    (`precision.strip`: exactly the fp32 conversion), given the original's weights and run under
    the target's own low precision (`adapter.run_reference`). Returns the capture (None when it
    cannot run, with a note saying why)."""
    import libcst as cst

    from precision_transpiler.precision.strip import strip_inserted

    try:
        stripped, removed = strip_inserted(cst.parse_module(code))
        if not removed:
            return None, ""
        module = import_converted(converted, original, stripped.code, variant="fp32 reference", modules=options.modules)

        def rebuild() -> Any:
            return build_model(module, options.entry, "converted (fp32 reference)", fp32_entry)

        model = rebuild()
        transfer(reference_model, model)
        adapter.prepare(model, inputs, seed=options.seed, perturb=False, calibrate_bn=False)
        capture = adapter.run_reference(
            model, rebuild, inputs, compute=compute, param=policy.param, capture=options.layers
        )
    except Exception as exc:  # the yardstick is extra evidence; without it the source's own stands
        from precision_transpiler.verify.loading import short_error

        return None, f"the target's own mixed precision could not run ({short_error(exc, str(converted))})"
    return capture, ""


class _Disabled:
    """An autocast region that does nothing: a context manager, and a decorator that returns the
    function as it is (the stand-in for torch's autocast and for the converted `torch_autocast`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> bool:
        return False

    def __call__(self, func: Any) -> Any:
        return func


@contextlib.contextmanager
def _torch_autocast_disabled() -> Any:
    """torch's autocast regions switched off while the block runs: `torch.autocast`,
    `torch.amp.autocast`, `torch.cpu.amp.autocast` and `torch.cuda.amp.autocast` replaced by a
    context manager (and decorator) that does nothing, and the autocast class's own
    `__enter__`/`__exit__` too, which covers what was bound before the run: `@torch.autocast(...)`
    decorators (made when the model's file was imported) and `from torch import autocast`."""
    import torch

    base = torch.amp.autocast_mode.autocast
    owners = [(torch, "autocast"), (torch.amp, "autocast"), (torch.cpu.amp, "autocast"), (torch.cuda.amp, "autocast")]
    saved = [(owner, name, getattr(owner, name)) for owner, name in owners if hasattr(owner, name)]
    methods = {name: base.__dict__[name] for name in ("__enter__", "__exit__")}
    try:
        for owner, name, _ in saved:
            setattr(owner, name, _Disabled)
        base.__enter__ = lambda self: self  # type: ignore[method-assign]
        base.__exit__ = lambda self, *exc: False  # type: ignore[method-assign]
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)
        for name, method in methods.items():
            setattr(base, name, method)


@contextlib.contextmanager
def _converted_regions_disabled(module: Any) -> Any:
    """The converted module's `torch_autocast` regions (the shims copied into it, under any alias)
    switched off while the block runs: the context manager does nothing, `torch_autocast_call`
    calls its op as written. Only the module's own names change, and they are restored."""

    def _call(op: Any, *args: Any, **kwargs: Any) -> Any:
        return op(*args, **kwargs)

    replacements = {"torch_autocast": _Disabled, "torch_autocast_call": _call}
    namespace = vars(module) if module is not None else {}
    saved = {
        name: value
        for name, value in namespace.items()
        if getattr(value, "__name__", None) in replacements and getattr(value, "__module__", None) == module.__name__
    }
    try:
        for name, value in saved.items():
            namespace[name] = replacements[value.__name__]
        yield
    finally:
        namespace.update(saved)


def _median_seconds(forward: Any, repeat: int) -> float:
    """Median wall time of `forward()` over `repeat` runs, after two warm-up runs (compilation,
    caches). Medians, because these machines are shared and single runs swing."""
    for _ in range(2):
        forward()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        forward()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _time_models(
    repeat: int,
    inputs: list[np.ndarray],
    source_adapter: Adapter,
    reference_model: Any,
    adapter: Adapter,
    converted_model: Any,
    compute: str | None,
) -> dict[str, float]:
    """Forward times of the original, the converted model and (for a low-precision policy) the
    original under its framework's own mixed precision, measured side by side in this process."""
    timing: dict[str, float] = {"repeat": repeat}
    timing["original"] = _median_seconds(source_adapter.timed_forward(reference_model, inputs), repeat)
    timing["converted"] = _median_seconds(adapter.timed_forward(converted_model, inputs), repeat)
    if compute is not None and source_adapter.name == "torch":
        forward = source_adapter.timed_forward(reference_model, inputs, compute=compute)
        timing["reference"] = _median_seconds(forward, repeat)
    return timing


def _judge_layers(
    verdict: VerificationResult,
    base: Capture,
    result: Capture,
    reference: Capture | None,
    options: VerifyOptions,
    low: bool,
    adapter: Adapter,
    converted_model: Any,
    original_model: Any,
    source_adapter: Adapter | None = None,
    target_reference: Capture | None = None,
    target_regions: Capture | None = None,
) -> None:
    """Pair layers by module path; each gets a share: for low-precision policies, the mixed
    factor times the framework's own error at that layer plus the fp32 tolerance; for
    full-precision policies, the output tolerance."""
    threshold = float(verdict.tolerance["max_rel_err"])
    for order, path in enumerate(base.order):
        calls_a = base.layers.get(path, [])
        calls_b = result.layers.get(path)
        kind = base.kinds.get(path, "?")
        record = LayerRecord(path, kind, order, len(calls_a), None, None, None, None, None, False, False, None)
        verdict.layers.append(record)
        if calls_a:
            record.shape = list(calls_a[0].shape)
        if calls_b is None:
            record.note = "not called in the converted model"
            continue
        if len(calls_b) != len(calls_a):
            record.note = f"called {len(calls_b)} times in the converted model, {len(calls_a)} in the original"
        rels, abss = [], []
        bad = False
        for a, b in zip(calls_a, calls_b, strict=False):
            if a.shape != b.shape:
                record.note = f"shape {tuple(b.shape)} vs original {tuple(a.shape)}"
                bad = True
                continue
            errors = compare(a, b)
            if errors.new_nonfinite:
                record.nonfinite = True
            if errors.rel_err is not None:
                rels.append(errors.rel_err)
            if errors.max_abs_err is not None:
                abss.append(errors.max_abs_err)
        record.rel_err = max(rels) if rels else None
        record.max_abs_err = max(abss) if abss else None
        ref_rels = [
            e
            for yardstick in (reference, target_reference)
            if yardstick is not None and path in yardstick.layers
            for a, r in zip(calls_a, yardstick.layers[path], strict=False)
            if a.shape == r.shape and (e := compare(a, r).rel_err) is not None
        ]
        if target_regions is not None and path in target_regions.layers:
            ref_rels += [
                e
                for b, r in zip(calls_b, target_regions.layers[path], strict=False)
                if b.shape == r.shape and (e := compare(r, b).rel_err) is not None
            ]
        record.reference_err = max(ref_rels) if ref_rels else None
        if low:
            record.share = options.mixed_factor * (record.reference_err or 0.0) + options.fp32_tolerance
            if options.tolerance is not None:
                record.share = max(record.share, options.tolerance) if record.reference_err is None else record.share
        else:
            record.share = threshold
        record.exceeded = bad or record.nonfinite or (record.rel_err is not None and record.rel_err > record.share)
    first = next((r for r in verdict.layers if r.exceeded), None)
    for record in verdict.layers:
        if record.exceeded or len(verdict.layers) <= 400:
            # the user's own line (where the original model creates the layer), the converted file's beside it
            record.source = (source_adapter or adapter).layer_source(original_model, record.path)
            record.converted_source = adapter.layer_source(converted_model, record.path)
    if first is not None:
        verdict.first_bad_layer = first.path
        verdict.first_bad_source, verdict.first_bad_converted_source = first.source, first.converted_source

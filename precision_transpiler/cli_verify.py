"""The verification side of the command line: `ptranspile verify ORIGINAL CONVERTED ...` and the
`--verify` / `--policy auto` / `--emit-test` options of the main command.

Verification runs models (it imports the frameworks and the user's code) and says so on stderr;
plain transpiling never does. Exit codes: 0 passed, 1 verification failed, 2 usage errors or
verification could not run.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from precision_transpiler.version import __version__

if TYPE_CHECKING:
    from precision_transpiler.verify.result import VerificationResult
    from precision_transpiler.verify.runner import VerifyOptions


#: Terminal report rows shown without --max-layers.
DEFAULT_MAX_LAYERS = 40


def verification_defaults() -> dict[str, Any]:
    """What each verification option means when neither the command line nor [tool.ptranspile]
    sets it, by option name (argparse's default is None for these)."""
    from precision_transpiler.verify.runner import DEFAULT_FP32_TOLERANCE, DEFAULT_MIXED_FACTOR
    from precision_transpiler.verify.spec import DEFAULT_MAX_INPUT_MB

    return {
        "device": "auto",
        "seed": 0,
        "fp32-tolerance": DEFAULT_FP32_TOLERANCE,
        "mixed-factor": DEFAULT_MIXED_FACTOR,
        "max-input-mb": DEFAULT_MAX_INPUT_MB,
        "max-layers": DEFAULT_MAX_LAYERS,
    }


def add_verification_arguments(parser: argparse.ArgumentParser, *, converting: bool = False) -> None:
    """The options verification shares; `converting`: the main command's, which also prunes to the entry."""
    group = parser.add_argument_group("verification (runs both models; imports the frameworks)")
    entry_help = "expression that builds the model for verification, e.g. 'resnet18()'"
    if converting:
        entry_help += (
            " (with --prune-to-entry, a bare NAME also works: only the top-level definitions it reaches are converted)"
        )
    group.add_argument("--entry", metavar="EXPR", help=entry_help)
    group.add_argument(
        "--input",
        dest="inputs",
        action="append",
        metavar="SPEC",
        help="model input as dtype[shape], '<N' for integers in [0,N): float32[1,3,224,224], int64[1,16]<100 "
        "(repeatable, in argument order)",
    )
    group.add_argument("--tolerance", type=float, metavar="X", help="maximum relative L2 error (overrides the rule)")
    group.add_argument(
        "--fp32-tolerance", type=float, metavar="X", help="tolerance of full-precision conversions (default 1e-5)"
    )
    group.add_argument(
        "--mixed-factor",
        type=float,
        metavar="F",
        help="low-precision policies may err F x the framework's own mixed precision (default 2)",
    )
    group.add_argument(
        "--calibrate-bn",
        action="store_true",
        default=None,
        help="recompute BatchNorm running statistics on a random batch first (random-init CNNs)",
    )
    group.add_argument("--seed", type=int, help="seed for weights noise and inputs (default 0)")
    group.add_argument(
        "--max-input-mb",
        type=float,
        metavar="MB",
        help="refuse --input specs larger than this many MB, alone or together, before allocating them (default 1024)",
    )
    group.add_argument(
        "--no-perturb", action="store_true", help="do not perturb the random weights (may hide branches)"
    )
    group.add_argument("--no-layers", action="store_true", help="compare outputs only (no per-layer report)")
    group.add_argument(
        "--allow-torch",
        action="store_true",
        help="pass a conversion from torch that still imports torch (or a package built on it) when loaded, "
        "with a note; by default it fails, however well it agrees",
    )
    group.add_argument(
        "--time",
        type=int,
        metavar="N",
        default=0,
        help="also time one forward of each model (torch under no_grad, jax.jit, tf.function; with a "
        "low-precision policy also torch autocast): medians of N runs after warm-up, in the report",
    )
    group.add_argument(
        "--max-layers", type=int, metavar="N", help=f"layers shown in the terminal tree (default {DEFAULT_MAX_LAYERS})"
    )
    group.add_argument("--report-html", metavar="FILE", help="write the verification report as a web page")
    group.add_argument("--emit-test", metavar="FILE", help="write a pytest file that repeats this verification")


def build_verify_parser() -> argparse.ArgumentParser:
    from precision_transpiler.cli_parser import FRAMEWORK_CHOICES, Parser

    parser = Parser(
        prog="ptranspile verify",
        description="Run a converted model file against its original on identical weights and inputs, "
        "with a tolerance derived from the precision policy, and report per layer where they disagree.",
        epilog="Exit codes: 0 verification passed, 1 it failed, 2 errors.",
    )
    parser.add_argument("original", metavar="ORIGINAL", help="the file that was converted")
    parser.add_argument("converted", metavar="CONVERTED", help="the converted file")
    parser.add_argument(
        "--policy", help="policy the file was converted with (default: the one named in the file's marker, or fp32)"
    )
    parser.add_argument("--from", dest="from_", choices=FRAMEWORK_CHOICES, help="framework of ORIGINAL")
    parser.add_argument("--to", choices=FRAMEWORK_CHOICES, help="framework of CONVERTED")
    parser.add_argument(
        "--device",
        choices=("auto", "cpu", "gpu", "tpu"),
        help="where the generated code runs: auto (default) decides the compute dtype at run time (CUDA float16, "
        "TPU bfloat16, a CPU bfloat16 only with native bf16 kernels, else float32); cpu, gpu or tpu pin it",
    )
    parser.add_argument("--report-json", metavar="FILE", help="write the verification report as JSON")
    parser.add_argument("-q", "--quiet", action="store_true", help="print the verdict line only")
    add_verification_arguments(parser)
    return parser


def verify_options(args: argparse.Namespace, config: dict[str, Any], policy: str | None) -> VerifyOptions:
    """VerifyOptions from flags, then [tool.ptranspile], then defaults."""
    from precision_transpiler.errors import UsageError
    from precision_transpiler.verify.runner import VerifyOptions

    if not args.entry:
        raise UsageError("verification needs --entry EXPR (the expression that builds the model)")
    if not args.inputs:
        raise UsageError("verification needs at least one --input SPEC, e.g. --input 'float32[1,3,224,224]'")

    defaults = verification_defaults()

    def pick(flag: Any, key: str) -> Any:
        return flag if flag is not None else config.get(key, defaults.get(key))

    options = VerifyOptions(
        entry=args.entry,
        inputs=list(args.inputs),
        policy=policy,
        device=getattr(args, "device", None) or config.get("device", defaults["device"]),
        seed=pick(args.seed, "seed"),
        perturb=not args.no_perturb,
        calibrate_bn=bool(pick(args.calibrate_bn, "calibrate-bn")),
        tolerance=pick(args.tolerance, "tolerance"),
        fp32_tolerance=float(pick(args.fp32_tolerance, "fp32-tolerance")),
        mixed_factor=float(pick(args.mixed_factor, "mixed-factor")),
        layers=not args.no_layers,
        timing=max(0, getattr(args, "time", 0) or 0),
        max_input_mb=float(pick(args.max_input_mb, "max-input-mb")),
        torch_free=not (getattr(args, "allow_torch", False) or config.get("allow-torch", False)),
        # the conversion's target: an output that imports only its runtime module beside it
        # names no framework the verifier could detect it by
        target=getattr(args, "to", None) or None,
    )
    for name, value in (("--tolerance", options.tolerance), ("--fp32-tolerance", options.fp32_tolerance)):
        if value is not None and value < 0:
            raise UsageError(f"{name} must not be negative")
    if options.mixed_factor < 1:
        raise UsageError("--mixed-factor must be at least 1")
    from precision_transpiler.verify.spec import check_input_budget, parse_input_spec

    specs = [parse_input_spec(str(spec)) for spec in options.inputs]  # a bad spec: a usage error before anything runs
    if options.max_input_mb <= 0:
        raise UsageError("--max-input-mb must be positive")
    check_input_budget(specs, options.max_input_mb)
    return options


def run_verification(
    original: str | Path, converted: str | Path, options: VerifyOptions, quiet: bool, **kwargs: Any
) -> VerificationResult:
    """`verify_files`, with progress lines on stderr unless `quiet` (verify/progress.py)."""
    from precision_transpiler.verify.progress import Progress
    from precision_transpiler.verify.runner import verify_files

    progress = None if quiet else Progress()
    options.progress = progress.step if progress is not None else None
    try:
        return verify_files(original, converted, options, **kwargs)
    finally:
        if progress is not None:
            progress.close()
        options.progress = None


def announce(what: str, quiet: bool) -> None:
    if not quiet:
        print(f"ptranspile: verify: {what}", file=sys.stderr)


def publish(
    result: VerificationResult,
    args: argparse.Namespace,
    *,
    report_json: str | None,
    extra_json: dict[str, Any] | None = None,
    policy_spec: str,
    calibrate_bn: bool,
    emit: bool = True,
) -> None:
    """Print the terminal report and write the JSON, HTML and generated test the flags ask for
    (the test only when `emit`: `--verify` does not write one for a conversion that failed)."""
    from precision_transpiler.files import write_report
    from precision_transpiler.verify.render import render_html, render_text

    report = result.to_json()
    if args.quiet:
        verdict = "PASSED" if result.passed else "FAILED"
        why = " (the original's forward draws random numbers: not comparable)" if result.random_forward else ""
        if result.original_nonfinite:
            why = " (the original's outputs are all NaN/inf: not comparable)"
        print(f"ptranspile: verify: {verdict}: max relative error {result.max_rel_err}{why}", file=sys.stderr)
    else:
        color = sys.stderr.isatty()
        print(render_text(report, color=color, max_layers=args.max_layers or DEFAULT_MAX_LAYERS), file=sys.stderr)
    if report_json:
        data = dict(extra_json or {})
        data.update({"tool": "ptranspile", "version": __version__, **report})
        write_report(report_json, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    if args.report_html:
        write_report(args.report_html, render_html(report))
    if args.emit_test and emit:
        from precision_transpiler.verify.emit import emit_test

        target = Path(args.emit_test)
        text = emit_test(
            result, target, policy_spec=policy_spec, calibrate_bn=calibrate_bn, converted=Path(result.converted)
        )
        write_report(target, text)


def warn_unmatched_path_overrides(
    result: VerificationResult, policy_spec: str | None, device: str, quiet: bool = False
) -> None:
    """A `path:` override of the policy that matches none of the module paths verification
    recorded: a warning line on stderr (unless `quiet`), and a note of the report
    (precision/overrides.py)."""
    from precision_transpiler.errors import PtranspileError
    from precision_transpiler.precision.overrides import unmatched_path_overrides
    from precision_transpiler.precision.policy import resolve_policy

    paths = [layer.path for layer in result.layers]
    if not policy_spec or not paths:
        return
    try:
        policy = resolve_policy(policy_spec, device=device)
    except PtranspileError:
        return  # a policy named only in the converted file's marker, not a file here
    for message in unmatched_path_overrides(policy, paths):
        if not quiet:
            print(f"ptranspile: warning: {message}", file=sys.stderr)
        result.notes.append(message)


def refuse_reports_over_inputs(args: argparse.Namespace, inputs: Sequence[str | Path]) -> None:
    """A UsageError, before anything runs, when `--report-json`, `--report-html`, `--emit-test` or
    (`--policy auto`) `--policy-out` names one of the model files: verifying must never cost the
    user a source file."""
    from precision_transpiler.files import refuse_overwriting_inputs

    for option, output in (
        ("--report-json", getattr(args, "report_json", None)),
        ("--report-html", args.report_html),
        ("--emit-test", args.emit_test),
        ("--policy-out", getattr(args, "policy_out", None)),
    ):
        refuse_overwriting_inputs(option, output, inputs)


def verify_main(argv: Sequence[str]) -> int:
    """`ptranspile verify ORIGINAL CONVERTED --entry EXPR --input SPEC ...`."""
    from precision_transpiler.config import load_config
    from precision_transpiler.errors import UsageError

    args = build_verify_parser().parse_args(argv)
    config = load_config(Path.cwd()).values
    options = verify_options(args, config, args.policy)
    options.source, options.target = args.from_, args.to
    for path in (args.original, args.converted):
        if not Path(path).is_file():
            raise UsageError(f"{path}: no such file")
    refuse_reports_over_inputs(args, (args.original, args.converted))
    announce(f"running {args.original} and {args.converted} (imports the frameworks and both files)", args.quiet)
    result = run_verification(args.original, args.converted, options, args.quiet)
    warn_unmatched_path_overrides(result, args.policy or result.policy, options.device, args.quiet)
    publish(
        result,
        args,
        report_json=args.report_json,
        policy_spec=args.policy or result.policy,
        calibrate_bn=options.calibrate_bn,
    )
    return 0 if result.passed else 1

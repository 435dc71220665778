"""`ptranspile`: the command line, a thin layer over `precision_transpiler.api`.

Exit codes: 0 success or nothing to change; 1 `--check` found changes, or unsupported
constructs were reported (or became errors under `--strict`); 2 usage, parse or I/O errors.
Every problem is one compiler-style line on stderr (`model.py:12:5: error: ...`), never a
traceback.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from precision_transpiler.cli_parser import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, FRAMEWORK_CHOICES, Parser
from precision_transpiler.cli_runtime import add_runtime_argument, as_written, runtime_mode
from precision_transpiler.version import __version__

if TYPE_CHECKING:
    from precision_transpiler.api import TranspileResult
    from precision_transpiler.options import Options

# What is converted without --from: model code. NumPy code (data loaders, utilities) only when
# --from names numpy, so that a hook run over a whole repository leaves NumPy code alone.
DEFAULT_SOURCES = ("torch", "jax", "tf")
#: Files larger than this (MB) are skipped with an error: see `--max-file-mb` in docs/cli.md.
DEFAULT_MAX_FILE_MB = 5.0
#: What an option means when neither the command line nor [tool.ptranspile] sets it, by option name
#: (argparse's default is None for these, so that a pyproject.toml value is not overridden).
OPTION_DEFAULTS: dict[str, Any] = {
    "from": ",".join(DEFAULT_SOURCES),
    "policy": "fp32",
    "device": "auto",
    "jobs": 1,
    "max-file-mb": DEFAULT_MAX_FILE_MB,
}


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="ptranspile",
        description="Convert model source between PyTorch, JAX (Flax NNX), TensorFlow (Keras 3) and NumPy, "
        "applying precision policies. Transpiling is static: nothing is imported or executed.",
        epilog="Subcommands: 'ptranspile verify ORIGINAL CONVERTED --entry EXPR --input SPEC' runs a converted "
        "model against its original; 'ptranspile weights CKPT --to jax -o OUT.safetensors' converts a torch "
        "checkpoint (each has --help). "
        "Exit codes: 0 ok, 1 changes found by --check or unsupported constructs (or a failed verification), "
        "2 errors. Defaults can be set in [tool.ptranspile] of pyproject.toml.",
    )
    _add_conversion_arguments(parser)
    _add_output_arguments(parser)
    from precision_transpiler.cli_verify import add_verification_arguments

    add_verification_arguments(parser, converting=True)
    return parser


def _add_conversion_arguments(parser: argparse.ArgumentParser) -> None:
    """What is converted, from and to what, under which policy."""
    parser.add_argument("paths", nargs="+", metavar="PATH", help="files, directories (recursive) or - for stdin")
    parser.add_argument("--to", choices=FRAMEWORK_CHOICES, help="target framework")
    parser.add_argument(
        "--from",
        dest="from_",
        type=_framework_list,
        metavar="{torch,jax,tf,numpy}[,...]",
        help="source framework(s), comma-separated; a file is converted only from these "
        "(default: torch,jax,tf, detected per file; NumPy code is converted only when named)",
    )
    parser.add_argument(
        "--policy",
        help="precision policy: fp32 (default), mixed, mixed-bf16, mixed-fp16, bf16, "
        "fp16, a jmp string (params=float32,compute=bfloat16,output=float32), a .yaml file, or auto "
        "(searches, by verification runs, which layers need float32: needs --entry and --input)",
    )
    parser.add_argument(
        "--device",
        choices=("auto", "cpu", "gpu", "tpu"),
        help="where the generated code runs: auto (default) decides the compute dtype at run time (CUDA float16, "
        "TPU bfloat16, a CPU bfloat16 only with native bf16 kernels, else float32); cpu, gpu or tpu pin it",
    )


def _add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the result goes, what is reported, and the options around the conversion."""
    out = parser.add_mutually_exclusive_group()
    out.add_argument("-o", "--output", metavar="OUT", help="write to OUT (a file, or a directory for many inputs)")
    out.add_argument("--in-place", action="store_true", help="rewrite the input files")
    out.add_argument("--check", action="store_true", help="write nothing; exit 1 if any file would change")
    parser.add_argument(
        "--diff", action="store_true", help="write nothing; print a unified diff (with --check: also exit 1 on changes)"
    )
    add_runtime_argument(parser)
    parser.add_argument(
        "--nan-fallback",
        action="store_true",
        default=None,
        help="generated code recomputes the forward in float32 when the low-precision output "
        "is not finite, and logs that it did",
    )
    parser.add_argument(
        "--report",
        action="store_true",
        help="print, for every layer and op the policy touched, its precision and the deciding rule",
    )
    parser.add_argument("-j", "--jobs", type=int, metavar="N", help="files converted in parallel (default 1)")
    parser.add_argument(
        "--strict",
        action="store_true",
        default=None,
        help="unsupported constructs are errors and nothing is written",
    )
    parser.add_argument(
        "--mappings",
        action="append",
        metavar="DIR",
        default=None,
        help="extra mapping-table directory (repeatable)",
    )
    parser.add_argument("--report-json", metavar="FILE", help="write every diagnostic and rewrite as JSON")
    parser.add_argument(
        "--skip-empty",
        action="store_true",
        default=None,
        help="skip empty files instead of reporting them (used by the pre-commit hooks)",
    )
    parser.add_argument("--exclude", action="append", metavar="GLOB", default=None, help="skip matching paths")
    parser.add_argument("-q", "--quiet", action="store_true", help="print errors only")
    parser.add_argument(
        "--max-file-mb",
        type=float,
        metavar="MB",
        default=None,
        help=f"skip files larger than MB megabytes, with an error (default {DEFAULT_MAX_FILE_MB:g}; "
        "conversion takes about 5-8 s and 100 MB of memory per 100 KB)",
    )
    parser.add_argument(
        "--output-format",
        choices=("text", "github"),
        default="text",
        help="how problems in files are printed: text (default; PATH:LINE:COL: SEVERITY: MESSAGE on stderr) or "
        "github (GitHub Actions annotations, ::error file=...::..., on stdout)",
    )
    parser.add_argument("--version", action="version", version=f"ptranspile {__version__}")
    parser.add_argument(
        "--verify",
        action="store_true",
        help="after converting one file, run it against the original (needs --entry and --input; "
        "see also `ptranspile verify --help`); the output is written only when verification passes",
    )
    parser.add_argument(
        "--prune-to-entry",
        action="store_true",
        help="convert only the top-level definitions that --entry EXPR reaches (the rest is left out, with a note)",
    )
    parser.add_argument(
        "--policy-out",
        metavar="FILE",
        help="with --policy auto: where to write the policy found (default: beside -o OUT, or ./NAME.auto-policy.yaml)",
    )


def _framework_list(value: str) -> str:
    """`--from torch,jax`: known names, comma-separated (argparse reports an error as usual)."""
    names = [n.strip() for n in value.split(",") if n.strip()]
    for name in names or [value]:
        if name not in FRAMEWORK_CHOICES:
            choices = ", ".join(repr(c) for c in FRAMEWORK_CHOICES)
            raise argparse.ArgumentTypeError(f"invalid choice: {name!r} (choose from {choices})")
    return ",".join(dict.fromkeys(names))


def _err(message: str) -> None:
    print(f"ptranspile: error: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["verify"]:
            from precision_transpiler.cli_verify import verify_main

            return verify_main(argv[1:])
        elif argv[:1] == ["weights"]:
            from precision_transpiler.cli_weights import weights_main

            return weights_main(argv[1:])
        args = build_parser().parse_args(argv)
        return _run(args)
    except KeyboardInterrupt:
        _err("interrupted")
        return 130
    except BrokenPipeError:  # `ptranspile ... | head`: the reader went away, nothing to report
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception as exc:  # our own errors and any bug: one line, never a traceback
        from precision_transpiler.errors import PtranspileError

        if isinstance(exc, PtranspileError):
            _err(str(exc))
        elif isinstance(exc, OSError) and exc.filename is not None:  # a report that cannot be written
            _err(f"{exc.filename}: {exc.strerror or exc}")
        elif isinstance(exc, UnicodeEncodeError):  # a terminal whose encoding lacks a character
            _err(f"cannot print {exc.object[exc.start : exc.end]!r}: the output encoding is {exc.encoding}")
        else:
            _err(f"internal error: {type(exc).__name__}: {exc} (please report this)")
            if os.environ.get("PTRANSPILE_DEBUG"):
                raise
        return EXIT_ERROR


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    from precision_transpiler.config import load_config

    config = load_config(Path.cwd()).values
    settings = {
        "to": args.to or config.get("to"),
        "from_": args.from_ or config.get("from"),
        "sources": tuple((args.from_ or config.get("from") or OPTION_DEFAULTS["from"]).split(",")),
        "policy": args.policy or config.get("policy", OPTION_DEFAULTS["policy"]),
        "device": args.device or config.get("device", OPTION_DEFAULTS["device"]),
        "mappings": (args.mappings or []) + list(config.get("mappings", [])),
        "strict": bool(args.strict if args.strict is not None else config.get("strict", False)),
        "jobs": args.jobs if args.jobs is not None else int(config.get("jobs", OPTION_DEFAULTS["jobs"])),
        "exclude": (args.exclude or []) + list(config.get("exclude", [])),
        "skip_empty": bool(args.skip_empty if args.skip_empty is not None else config.get("skip-empty", False)),
        "nan_fallback": bool(args.nan_fallback if args.nan_fallback is not None else config.get("nan-fallback", False)),
        "max_file_mb": float(
            args.max_file_mb
            if args.max_file_mb is not None
            else config.get("max-file-mb", OPTION_DEFAULTS["max-file-mb"])
        ),
    }
    if settings["max_file_mb"] <= 0:
        raise _usage("--max-file-mb must be positive")
    if settings["to"] is None:
        raise _usage("the target framework is required: pass --to {torch,jax,tf,numpy}")
    if settings["jobs"] < 1:
        raise _usage("--jobs must be at least 1")
    return settings


def _options(
    args: argparse.Namespace | None, settings: dict[str, Any], prune: dict[str, Any], *, from_: Any
) -> Options:
    """The conversion's options, built (and validated) once as the library's calls build theirs;
    `args` None: standard input (converted to stdout, its runtime inline)."""
    from precision_transpiler.options import Options

    return Options.build(
        to=settings["to"],
        from_=from_,
        policy=settings["policy"],
        mappings=settings["mappings"],
        device=settings["device"],
        nan_fallback=settings["nan_fallback"],
        skip_empty=settings["skip_empty"],
        max_file_mb=settings["max_file_mb"],
        runtime="inline" if args is None else runtime_mode(args),
        **prune,
    )


def _usage(message: str) -> Exception:
    from precision_transpiler.errors import UsageError

    return UsageError(message)


def _run(args: argparse.Namespace) -> int:
    settings = _settings(args)
    from precision_transpiler import api

    if args.output_format == "github" and not (args.output or args.in_place or args.check or args.diff):
        raise _usage(
            "--output-format github prints annotations on stdout, where the converted code would go: "
            "add -o OUT, --in-place, --check or --diff"
        )
    verifying = args.verify or settings["policy"] == "auto" or args.emit_test or args.report_html
    if args.prune_to_entry and not args.entry:
        raise _usage("--prune-to-entry needs --entry EXPR (the model whose reach is kept)")
    if args.entry and not (verifying or args.prune_to_entry):
        raise _usage(
            "--entry alone changes nothing in a conversion: add --prune-to-entry to convert only what it reaches, "
            "or --verify --input SPEC to run the model"
        )
    prune = {"entry": args.entry, "prune_to_entry": True} if args.prune_to_entry else {}
    if verifying:
        return _run_verified(args, settings, prune)

    stdin = [p for p in args.paths if p == "-"]
    if stdin and len(args.paths) > 1:
        raise _usage("'-' (stdin) cannot be combined with other paths")
    if args.diff and (args.in_place or args.output):
        raise _usage("--diff writes nothing; it cannot be combined with --in-place or -o")
    if stdin and (args.in_place or args.output):
        raise _usage("stdin input is written to stdout; --in-place and -o do not apply")
    if stdin:
        results = [_transpile_stdin(api, settings, prune)]
    else:
        many = len(args.paths) > 1 or any(Path(p).is_dir() for p in args.paths)
        if many and not (args.output or args.in_place or args.check or args.diff):
            raise _usage("several files or a directory need -o DIR, --in-place, --check or --diff")
        results = api.convert_paths(
            args.paths,
            _options(args, settings, prune, from_=settings["sources"]),
            jobs=settings["jobs"],
            exclude=settings["exclude"],
            progress=None if args.quiet else _terminal_progress(),
        )
    return _finish(args, settings, results, from_stdin=bool(stdin))


def _terminal_progress() -> Any:
    """A progress display when stderr is a terminal (precision_transpiler/progress.py), else None."""
    try:
        if not sys.stderr.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    from precision_transpiler.progress import ConversionProgress

    return ConversionProgress(sys.stderr)


def _transpile_stdin(api: Any, settings: dict[str, Any], prune: dict[str, Any]) -> TranspileResult:
    """Standard input as bytes, decoded like a file (a BOM, a coding comment); the result is
    written back to stdout in the same encoding."""
    import dataclasses

    from precision_transpiler.diagnostics import Diagnostic
    from precision_transpiler.files import ReadError, decode_source

    buffer = getattr(sys.stdin, "buffer", None)
    raw = buffer.read() if buffer is not None else sys.stdin.read().encode("utf-8", "surrogateescape")
    try:
        text, encoding = decode_source(raw)
    except ReadError as exc:
        diag = Diagnostic("<stdin>", exc.line, 1, "error", exc.code, exc.message)
        return api.TranspileResult(
            "<stdin>", "", "", None, settings["to"], settings["policy"], diagnostics=(diag,), skipped=exc.message
        )
    result = api.convert_source(text, _options(None, settings, prune, from_=settings["sources"]), "<stdin>")
    return dataclasses.replace(result, encoding=encoding)


def _run_verified(args: argparse.Namespace, settings: dict[str, Any], prune: dict[str, Any]) -> int:
    """Convert one file, then verify it (`--verify`, `--policy auto`, `--emit-test`, `--report-html`).

    Verification observes the conversion and never changes it: the code verified (in memory, as
    if at `-o OUT`, so its imports resolve from there) is exactly what is then written, and it is
    written (or printed) only when verification passes."""
    from precision_transpiler.cli_verify import (
        publish,
        refuse_reports_over_inputs,
        run_verification,
        verify_options,
        warn_unmatched_path_overrides,
    )
    from precision_transpiler.config import load_config

    original = _verified_file(args)
    refuse_reports_over_inputs(args, [original])
    options = verify_options(args, load_config(Path.cwd()).values, None)
    options.device = settings["device"]
    target = _output_target(args, original)
    converted = target or original.with_name(f"{original.stem}_ptranspile.py")
    found = (
        _search_policy(args, settings, options, original, converted, prune) if settings["policy"] == "auto" else None
    )
    options.policy = settings["policy"]
    report_json, args.report_json = args.report_json, None
    results = _convert_to_verify(args, settings, prune)
    result = results[0]
    if target is not None and not result.errors:  # where the code goes; checked before anything runs
        _refuse_overwriting_input(target, result)
    if report_json:
        _refuse_output_over_inputs("--report-json", report_json, results)
    exit_code = _finish(args, settings, results, from_stdin=False, write=False)
    result, needs = as_written(args, result, target, options, _split_runtime)
    if result.errors or exit_code == EXIT_ERROR:
        return exit_code
    if found is not None and found.code == result.code:  # the search's final run verified this very code
        verification = found.result
    else:
        verification = run_verification(original, converted, options, args.quiet, converted_code=result.code)
    if not args.output:
        verification.notes.append("the converted code was verified in memory (no -o given)")
    warn_unmatched_path_overrides(verification, settings["policy"], settings["device"], args.quiet)
    publish(
        verification,
        args,
        report_json=report_json,
        extra_json=_report(settings, results),
        policy_spec=settings["policy"],
        calibrate_bn=options.calibrate_bn,
        emit=verification.passed,
    )
    if verification.passed:
        if not (settings["strict"] and result.unsupported) and _write_outputs(
            args, [result], from_stdin=False, total=1, needs=needs
        ):
            return EXIT_ERROR
        return exit_code
    _say_not_written(args, settings, target, searched=found is not None)
    return EXIT_FINDINGS


def _verified_file(args: argparse.Namespace) -> Path:
    """The one model file verification takes (a usage error otherwise)."""
    if len(args.paths) != 1 or args.paths[0] == "-" or Path(args.paths[0]).is_dir():
        raise _usage("verification takes exactly one model file (not stdin or a directory)")
    if args.in_place or args.check:
        raise _usage("verification compares the converted file with the original: use -o OUT, not --in-place/--check")
    original = Path(args.paths[0])
    if not original.is_file():
        raise _usage(f"{original}: no such file")
    return original


def _output_target(args: argparse.Namespace, original: Path) -> Path | None:
    """Where `-o OUT` puts the converted file (OUT, or OUT/NAME for a directory); None without -o."""
    if not args.output:
        return None
    target = Path(args.output)
    return target / original.name if _names_directory(args.output) else target


def _search_policy(
    args: argparse.Namespace,
    settings: dict[str, Any],
    options: Any,
    original: Path,
    converted: Path,
    prune: dict[str, Any],
) -> Any:
    """`--policy auto`: search the layer precisions (verify/search.py), write the policy found
    and make it the conversion's policy."""
    from precision_transpiler.cli_verify import announce
    from precision_transpiler.verify.search import search_policy

    announce(f"--policy auto: searching layer precisions for {original} (runs the model many times)", args.quiet)
    policy_out = Path(args.policy_out) if args.policy_out else _default_policy_out(args, original)
    found = search_policy(
        original,
        options,
        to=settings["to"],
        device=settings["device"],
        log=None if args.quiet else lambda m: print(f"ptranspile: {m}", file=sys.stderr),
        prune_to_entry=bool(prune),
        converted=converted,
        policy_out=policy_out,
    )
    print(
        f"ptranspile: --policy auto: {len(found.fp32_paths)} layer(s) kept in float32, "
        f"{len(found.low_paths)} in low precision, {found.runs} verification runs; policy written to {policy_out}",
        file=sys.stderr,
    )
    settings["policy"] = str(policy_out)
    return found


def _say_not_written(args: argparse.Namespace, settings: dict[str, Any], target: Path | None, searched: bool) -> None:
    """Verification failed: say what was held back and how to get it anyway."""
    held = [str(target) if target else "the converted code"] + ([args.emit_test] if args.emit_test else [])
    asked = [("--verify", args.verify), ("--emit-test", args.emit_test), ("--report-html", args.report_html)]
    flags = [flag for flag, given in asked if given]
    how = [f"without {' and '.join(flags)}"] if flags else []
    if searched:
        how.append(f"with --policy {settings['policy']} instead of auto")
    done, verb = ("written", "write") if target else ("printed", "print")
    print(
        f"ptranspile: verification failed: {' and '.join(held)} not {done} "
        f"(run {' and '.join(how)} to {verb} it anyway)",
        file=sys.stderr,
    )


def _convert_to_verify(args: argparse.Namespace, settings: dict[str, Any], prune: dict[str, Any]) -> Any:
    """The one file's conversion that verification then runs, as it will be written."""
    from precision_transpiler import api

    return api.convert_paths(args.paths, _options(args, settings, prune, from_=settings["from_"]))


def _default_policy_out(args: argparse.Namespace, original: Path) -> Path:
    if args.output:
        out = Path(args.output)
        return out.with_name(f"{out.stem}.policy.yaml")
    return Path(f"{original.stem}.auto-policy.yaml")


def _finish(
    args: argparse.Namespace,
    settings: dict[str, Any],
    results: list[TranspileResult],
    from_stdin: bool,
    write: bool = True,
) -> int:
    """Print the diagnostics, write the outputs (unless `write` is False: the caller writes them
    once verification passed) and the reports; the exit code of the conversion."""
    strict = settings["strict"]
    exit_code = EXIT_OK
    github = args.output_format == "github"
    many = len(results) > 1 or any(p != "-" and Path(p).is_dir() for p in args.paths)
    for result in results:
        for diag in result.diagnostics:
            if args.quiet and diag.severity not in ("error", "unsupported"):
                continue
            if many and diag.code == "source-not-selected":
                continue  # a hook or a directory: other frameworks' files are left alone quietly
            if github:  # workflow commands are read from stdout
                print(diag.format_github(), file=sys.stdout)
                continue
            line = f"{diag.path}: skipped: {diag.message}" if diag.code == "file-too-large" else diag.format()
            if strict and diag.severity == "unsupported":
                line = line.replace(": unsupported: ", ": error: unsupported: ", 1)
            print(line, file=sys.stderr)
        if result.errors:
            exit_code = EXIT_ERROR
        elif result.unsupported and exit_code == EXIT_OK:
            exit_code = EXIT_FINDINGS
    from precision_transpiler.rewrite.engine import SKIPPED_BY_COMMENT

    writable = [
        r
        for r in results
        if not r.errors and (r.skipped in (None, SKIPPED_BY_COMMENT) or (r.skipped == "empty file" and args.output))
    ]
    split, needs = _split_runtime(args, writable, from_stdin, len(results))
    as_written = {id(before): after for before, after in zip(writable, split, strict=True)}
    results, writable = [as_written.get(id(r), r) for r in results], split
    blocked = strict and any(r.unsupported for r in results)
    writing = write and not (args.check or args.diff or blocked)
    # Refused before anything is written: an output over an input, two files on one output.
    if args.report_json:
        _refuse_output_over_inputs("--report-json", args.report_json, results)
    if writing:
        for _, target in _plan_outputs(args, writable, from_stdin, len(results)):
            if args.report_json and target is not None and _same_file(target, Path(args.report_json)):
                raise _usage(f"--report-json {args.report_json} is also where -o writes {target}")
    unwritten: list[str] = []
    if args.report_json:
        unwritten += _write_report(Path(args.report_json), settings, results)
    changed = [r for r in writable if r.changed]
    if args.check or args.diff:
        for result in changed:
            if args.diff:
                sys.stdout.writelines(_diff(result))
            elif github:
                print(_github_would_change(result), file=sys.stdout)
            elif not args.quiet:
                print(f"would change: {result.path}", file=sys.stderr)
        from precision_transpiler.cli_runtime import report_runtime_changes

        modules = report_runtime_changes(needs, diff=args.diff, quiet=args.quiet or github)
        if args.check and (changed or modules) and exit_code == EXIT_OK:
            exit_code = EXIT_FINDINGS
    elif blocked:
        print("ptranspile: --strict: unsupported constructs found, nothing written", file=sys.stderr)
    elif write:
        unwritten += _write_outputs(args, writable, from_stdin, len(results), needs)
    if unwritten:
        exit_code = EXIT_ERROR
    if args.report:
        print(_precision_report(results), file=sys.stderr)
    if not args.quiet and len(results) > 1:
        print(_summary(results, unwritten), file=sys.stderr)
    return exit_code


def _github_would_change(result: TranspileResult) -> str:
    from precision_transpiler.diagnostics import github_annotation

    return github_annotation("error", "would change", path=result.path, title="ptranspile check")


def _diff(result: TranspileResult) -> list[str]:
    return list(
        difflib.unified_diff(
            result.original.splitlines(keepends=True),
            result.code.splitlines(keepends=True),
            fromfile=f"a/{result.path}",
            tofile=f"b/{result.path}",
        )
    )


def _names_directory(output: str) -> bool:
    """`-o OUT` is a directory: an existing one, or a name ending in a slash (created)."""
    return output.endswith(("/", os.sep)) or Path(output).is_dir()


def _plan_outputs(
    args: argparse.Namespace, results: list[TranspileResult], from_stdin: bool, total: int
) -> list[tuple[TranspileResult, Path | None]]:
    """Where each result goes (None: stdout); UsageError, before anything is written, for an
    output that would overwrite an input or two files written to one path."""
    if from_stdin or (not args.output and not args.in_place):
        return [(result, None) for result in results]
    if args.in_place:
        return [(result, Path(result.path)) for result in results if result.changed]
    out = Path(args.output)
    single = total == 1 and len(args.paths) == 1 and not Path(args.paths[0]).is_dir()
    if single and not _names_directory(args.output):
        for result in results:
            _refuse_overwriting_input(out, result)
        return [(result, out) for result in results]
    if out.exists() and not out.is_dir():
        for result in results:
            _refuse_overwriting_input(out, result)
        raise _usage(f"-o {args.output} is a file: several files are written to a directory (-o DIR)")
    targets: dict[Path, str] = {}
    plan: list[tuple[TranspileResult, Path | None]] = []
    for result in results:
        target = out / _relative_output(Path(result.path), [Path(p) for p in args.paths])
        if target in targets:
            raise _usage(f"-o {out}: {result.path} and {targets[target]} would both be written to {target}")
        targets[target] = result.path
        _refuse_overwriting_input(target, result)
        plan.append((result, target))
    return plan


def _write_outputs(
    args: argparse.Namespace, results: list[TranspileResult], from_stdin: bool, total: int, needs: Any = None
) -> list[str]:
    """Write every result where it goes, then the runtime modules beside them (`needs`,
    cli_runtime.py); a file that cannot be written is one line and the others are still
    written. Returns the outputs not written."""
    unwritten = []
    for result, target in _plan_outputs(args, results, from_stdin, total):
        if not _write_one(result.code, result.encoding, target):
            unwritten.append(str(target) if target is not None else "<stdout>")
    if needs is not None:
        from precision_transpiler.cli_runtime import write_runtime_modules

        unwritten += write_runtime_modules(needs, _write_one, _err)
    return unwritten


def _split_runtime(
    args: argparse.Namespace, results: list[TranspileResult], from_stdin: bool, total: int
) -> tuple[list[TranspileResult], Any]:
    """`results` as `--runtime` writes them (cli_runtime.py), and the runtime modules they need."""
    from precision_transpiler.cli_runtime import split_for

    return split_for(args, results, from_stdin, lambda: _plan_outputs(args, results, from_stdin, total))


def _write_one(code: str, encoding: str, target: Path | None) -> bool:
    from precision_transpiler import files

    try:
        if target is None:
            buffer = getattr(sys.stdout, "buffer", None)
            if buffer is None:  # a text stream put in place of stdout
                sys.stdout.write(code)
            else:  # the input's encoding, BOM included
                data = code.encode(encoding)
                sys.stdout.flush()
                buffer.write(data)
                buffer.flush()
        else:
            files.write_atomic(target, code, encoding)
    except UnicodeEncodeError as exc:
        line = code[: exc.start].count("\n") + 1
        _err(f"{target or '<stdout>'}: cannot write: line {line} has characters that {encoding} cannot encode")
        return False
    except BrokenPipeError:
        raise
    except OSError as exc:
        _err(f"{target or '<stdout>'}: cannot write: {exc.strerror or exc}")
        return False
    return True


def _refuse_overwriting_input(target: Path, result: TranspileResult) -> None:
    if target.exists() and target.resolve() == Path(result.path).resolve():
        raise _usage(f"-o would overwrite the input {result.path}; use --in-place for that")


def _same_file(a: Path, b: Path) -> bool:
    """Two outputs that would replace each other (a device such as /dev/null takes both)."""
    return a.resolve() == b.resolve() and (a.is_file() or not a.exists())


def _refuse_output_over_inputs(option: str, output: str, results: list[TranspileResult]) -> None:
    from precision_transpiler.files import refuse_overwriting_inputs

    refuse_overwriting_inputs(option, output, [r.path for r in results if r.path != "<stdin>"])


def _relative_output(path: Path, roots: list[Path]) -> Path:
    for root in roots:
        if root.is_dir():
            try:
                return path.resolve().relative_to(root.resolve())
            except ValueError:
                continue
    return Path(path.name)


def _precision_report(results: list[TranspileResult]) -> str:
    """A readable table of what the policy decided, per file."""
    out: list[str] = []
    for result in results:
        info = result.policy_info or {}
        out.append(
            f"== {result.path}: policy {info.get('name', result.policy)} "
            f"(param {info.get('param')}, compute {info.get('compute')}, output {info.get('output')})"
        )
        if not result.precision:
            out.append("   (nothing touched)")
        # a model converted to another framework: the policy was applied to the converted code
        where = result.path if result.source_framework in (None, result.target_framework) else "converted"
        if where == "converted" and result.precision:
            out.append("   (positions are lines of the converted code)")
        for d in sorted(result.precision, key=lambda d: (d.line, d.col)):
            out.append(
                f"   {where}:{d.line}:{d.col}  {d.where:32s} {d.op:38s} {d.op_class:16s} "
                f"param={d.param} compute={d.compute} output={d.output}  [{d.action}; {d.rule}]"
            )
        param = info.get("param", "float32")
        factor = {"float32": 1.0, "bfloat16": 0.5, "float16": 0.5, "float64": 2.0}.get(str(param), 1.0)
        out.append(
            f"   parameter bytes: float32 -> {param} (x{factor:.2f}; norms and other keep-fp32 layers stay "
            "float32; exact byte counts come from `ptranspile verify`)"
        )
    return "\n".join(out)


def _summary(results: list[TranspileResult], unwritten: Sequence[str] = ()) -> str:
    changed = sum(r.changed for r in results)
    errors = sum(bool(r.errors) for r in results)
    unsupported = sum(len(r.unsupported) for r in results)
    skipped = sum(r.skipped is not None and not r.errors for r in results)
    failed = f"; {len(unwritten)} not written ({', '.join(unwritten)})" if unwritten else ""
    return (
        f"ptranspile: {len(results)} files: {changed} changed, {len(results) - changed - errors - skipped} "
        f"unchanged, {skipped} skipped, {errors} with errors; {unsupported} unsupported constructs{failed}"
    )


def _write_report(path: Path, settings: dict[str, Any], results: list[TranspileResult]) -> list[str]:
    """Write `--report-json`; the path in a list when it could not be written (said on one line)."""
    text = json.dumps(_report(settings, results), indent=2, sort_keys=True) + "\n"
    return [] if _write_one(text, "utf-8", path) else [str(path)]


def _report(settings: dict[str, Any], results: list[TranspileResult]) -> dict[str, Any]:
    return {
        "tool": "ptranspile",
        "version": __version__,
        "target": settings["to"],
        "source": settings["from_"],
        "policy": settings["policy"],
        "files": [r.to_json() for r in results],
        "summary": {
            "files": len(results),
            "changed": sum(r.changed for r in results),
            "errors": sum(len(r.errors) for r in results),
            "unsupported": sum(len(r.unsupported) for r in results),
            "rewrites": sum(len(r.rewrites) for r in results),
        },
    }


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

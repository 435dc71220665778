"""`ptranspile weights CKPT --to jax|tf -o OUT`: a torch checkpoint as weights for the converted model.

Two outputs, because a checkpoint is wanted at two moments:

- Without `--model`, OUT holds the state_dict as NumPy arrays under torch's names, so it fits the
  converted model whatever precision policy it was converted with; `load_checkpoint` transposes
  and casts at load time. Needs torch (to read CKPT) but neither the model nor JAX.
- With `--model CONVERTED.py --entry EXPR`, the converted model is built, the weights are loaded
  into it (strict: every name must match, so a wrong checkpoint fails here rather than at serving
  time) and OUT holds the model's own variables: for Flax under nnx paths in a `.safetensors` file,
  restored by `load_flax_safetensors`; for Keras (`--to tf`) a Keras `.weights.h5` file, restored by
  `load_keras_weights` (weights/keras_files.py). This runs the converted file, and says so.

Only this subcommand imports torch, and only to read a `torch.save` file (with `weights_only=True`:
nothing but tensors and containers is unpickled). Errors are one line, exit 2, and nothing is
written: OUT is written last, atomically.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from precision_transpiler.version import __version__


def build_weights_parser() -> argparse.ArgumentParser:
    from precision_transpiler.cli_parser import Parser

    parser = Parser(
        prog="ptranspile weights",
        description="Convert a torch checkpoint into weights for the converted model: a .safetensors file "
        "keyed by torch names (loaded with precision_transpiler.weights.load_checkpoint, or load_checkpoint_keras "
        "for Keras), or, with --model, the model's own variables: keyed by Flax nnx paths (--to jax, loaded with "
        "load_flax_safetensors) or a Keras .weights.h5 file (--to tf, loaded with load_keras_weights).",
        epilog="Exit codes: 0 written, 2 errors (nothing written).",
    )
    parser.add_argument(
        "checkpoint",
        metavar="CKPT",
        help="torch.save file of a state_dict (or of a dict holding one), or a .safetensors file",
    )
    parser.add_argument(
        "--to", required=True, choices=("jax", "tf"), help="target framework: jax (Flax NNX) or tf (Keras 3)"
    )
    parser.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="OUT",
        help="the file to write: OUT.safetensors (OUT.weights.h5 with --to tf --model)",
    )
    parser.add_argument(
        "--key",
        metavar="KEY",
        help="the checkpoint entry holding the state_dict (default: the file itself, else "
        "'state_dict', 'model_state_dict' or 'model')",
    )
    parser.add_argument(
        "--model",
        metavar="CONVERTED",
        help="the converted model file: load the weights into it and write its own variables (runs the file)",
    )
    parser.add_argument("--entry", metavar="EXPR", help="with --model: expression that builds the model, e.g. 'Net()'")
    parser.add_argument(
        "--original",
        metavar="ORIGINAL",
        help="with --model: the file CONVERTED was converted from, for relative imports (default: CONVERTED)",
    )
    parser.add_argument(
        "--strict",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="with --model: every checkpoint name must match a model variable and the reverse (default: --strict)",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="print errors only")
    return parser


def _note(message: str, quiet: bool) -> None:
    if not quiet:
        print(f"ptranspile: weights: {message}", file=sys.stderr)


def _check_arguments(args: argparse.Namespace) -> None:
    """Everything that needs no file read: the target, flag combinations, OUT's name."""
    from precision_transpiler.errors import UsageError
    from precision_transpiler.files import refuse_overwriting_inputs

    if args.model is None and (args.entry is not None or args.original is not None):
        raise UsageError("--entry and --original apply with --model CONVERTED.py")
    if args.model is not None and not args.entry:
        raise UsageError("--model needs --entry EXPR (the expression that builds the model, e.g. 'Net()')")
    out = Path(args.output)
    keras_file = args.to == "tf" and args.model is not None
    if keras_file and not out.name.endswith(".weights.h5") and not (out.exists() and not out.is_file()):
        raise UsageError(f"-o {args.output}: --to tf --model writes a Keras weights file; name it OUT.weights.h5")
    if not keras_file and out.suffix != ".safetensors" and not (out.exists() and not out.is_file()):
        raise UsageError(f"-o {args.output}: the output is a .safetensors file; name it OUT.safetensors")
    inputs = [p for p in (args.checkpoint, args.model, args.original) if p is not None]
    refuse_overwriting_inputs("-o", args.output, inputs)
    for flag, path in (("--model", args.model), ("--original", args.original)):
        if path is not None and not Path(path).is_file():
            raise UsageError(f"{flag} {path}: no such file")


def _load_into_model(args: argparse.Namespace, arrays: dict[str, Any]) -> Any:
    """Import CONVERTED, build `--entry` and load the torch-named arrays into it (strict by default).

    The model is first built abstractly (`nnx.eval_shape`): when the checkpoint fills every
    variable that is saved, random initialisation (seconds on CPU, one compiled kernel per
    parameter shape) would only be thrown away. A model that cannot be built under tracing, or
    that keeps a variable the checkpoint did not fill (`--no-strict` with missing keys), is built
    again for real, so those variables keep their initial values.
    """
    from flax import nnx

    from precision_transpiler.errors import VerifyError
    from precision_transpiler.verify.loading import build_model, import_converted
    from precision_transpiler.weights.files import CheckpointError, flax_state_arrays
    from precision_transpiler.weights.torch_to_flax import load_torch_state_dict

    converted = Path(args.model)
    original = Path(args.original) if args.original else converted
    module = import_converted(converted, original)

    def build() -> Any:
        model = build_model(module, args.entry, "converted")
        if not isinstance(model, nnx.Module):
            raise VerifyError(f"--entry {args.entry!r} returned {type(model).__name__}, not a Flax NNX model")
        return model

    def load(model: Any) -> Any:
        try:
            load_torch_state_dict(model, arrays, strict=args.strict)
        except ValueError as exc:
            raise CheckpointError(f"{args.checkpoint} does not fit {converted}: {exc}") from None
        return model

    try:
        abstract = nnx.eval_shape(build)
    except Exception:  # built for real below; a genuine failure repeats there, and is reported
        abstract = None
    if abstract is not None:
        load(abstract)  # a mismatch is the same on a real model: report it now
        try:
            flax_state_arrays(abstract)  # raises while a saved variable is still abstract
            return abstract
        except CheckpointError:
            pass
    return load(build())


def _write_keras(args: argparse.Namespace, arrays: dict[str, Any]) -> int:
    """`--to tf --model CONVERTED.py --entry EXPR`: build the Keras model, load the torch-named
    arrays into it (strict by default) and write its variables as OUT.weights.h5.

    Keras imports TensorFlow, whose start-up notices say nothing about the weights: it is
    imported first the way verification imports it, without them (verify/quiet.py)."""
    from precision_transpiler.verify.quiet import import_tensorflow_quietly

    import_tensorflow_quietly()
    import keras

    from precision_transpiler.errors import VerifyError
    from precision_transpiler.files import cannot_write_as_error
    from precision_transpiler.verify.loading import build_model, import_converted
    from precision_transpiler.weights.files import CheckpointError
    from precision_transpiler.weights.keras_files import save_keras_weights
    from precision_transpiler.weights.torch_to_keras import load_torch_state_dict_keras

    converted = Path(args.model)
    module = import_converted(converted, Path(args.original) if args.original else converted)
    model = build_model(module, args.entry, "converted")
    if not isinstance(model, keras.layers.Layer):
        raise VerifyError(f"--entry {args.entry!r} returned {type(model).__name__}, not a Keras layer or model")
    try:
        missing = load_torch_state_dict_keras(model, arrays, strict=args.strict)
    except ValueError as exc:
        raise CheckpointError(f"{args.checkpoint} does not fit {converted}: {' '.join(str(exc).split())}") from None
    if missing:
        _note(f"--no-strict: {len(missing)} Keras weight(s) left at their initial values", args.quiet)
    with cannot_write_as_error(args.output):
        size = save_keras_weights(model, args.output)
    _note(
        f"wrote {args.output}: {type(model).__name__} Keras weights, {size:,} bytes "
        "(load with precision_transpiler.weights.load_keras_weights)",
        args.quiet,
    )
    return 0


def weights_main(argv: Sequence[str]) -> int:
    """`ptranspile weights CKPT --to jax -o OUT [--model CONVERTED.py --entry EXPR]`.

    OUT is written last and atomically; one that cannot be written is one line naming it."""
    from precision_transpiler.files import cannot_write_as_error
    from precision_transpiler.weights.files import (
        LAYOUT_KEY,
        TORCH_LAYOUT,
        read_torch_checkpoint,
        save_flax_safetensors,
        write_safetensors,
    )

    args = build_weights_parser().parse_args(argv)
    _check_arguments(args)
    arrays, used, notes = read_torch_checkpoint(args.checkpoint, key=args.key)
    if used is not None and args.key is None:
        _note(f"using the state_dict under {used!r} of {args.checkpoint}", args.quiet)
    for note in notes:
        _note(note, args.quiet)
    source = {"ptranspile.version": __version__, "ptranspile.source": Path(args.checkpoint).name}
    if args.model is None:
        with cannot_write_as_error(args.output):
            size = write_safetensors(args.output, arrays, {LAYOUT_KEY: TORCH_LAYOUT, **source})
        loader = "load_checkpoint_keras" if args.to == "tf" else "load_checkpoint"
        _note(
            f"wrote {args.output}: {len(arrays)} tensors, torch names and layouts, {size:,} bytes "
            f"(load with precision_transpiler.weights.{loader})",
            args.quiet,
        )
        return 0
    _note(f"importing {args.model} and running {args.entry!r} (runs that file)", args.quiet)
    if args.to == "tf":
        return _write_keras(args, arrays)
    model = _load_into_model(args, arrays)
    if not args.strict:
        from precision_transpiler.weights.torch_to_flax import preview, state_dict_mismatch

        missing, unexpected = state_dict_mismatch(model, arrays)
        if missing:
            kept = f"{len(missing)} missing key(s), left at their initial values"
            _note(f"--no-strict: {kept}: {preview(missing)}", args.quiet)
        if unexpected:
            _note(f"--no-strict: {len(unexpected)} unexpected key(s), skipped: {preview(unexpected)}", args.quiet)
    with cannot_write_as_error(args.output):
        size = save_flax_safetensors(model, args.output, {**source, "ptranspile.entry": args.entry})
    _note(
        f"wrote {args.output}: {type(model).__name__} nnx state, Flax layouts, {size:,} bytes "
        "(load with precision_transpiler.weights.load_flax_safetensors)",
        args.quiet,
    )
    return 0

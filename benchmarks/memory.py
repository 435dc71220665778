"""Parameter bytes and peak memory of one inference forward: torch vs converted JAX and Keras, fp32 vs mixed.

For each model (torchvision ResNet-50 and a 4-layer ViT, transformers BERT
with 4 layers of width 256: the entries of torch_to_jax_speed.py) and each of

    torch fp32          eager, eval mode, under torch.no_grad()
    torch autocast      the same under torch.autocast("cpu", torch.bfloat16)
    JAX fp32 / mixed    `ptranspile --to jax [--policy mixed]`, torch weights loaded, under jax.jit
    Keras fp32 / mixed  `ptranspile --to tf [--policy mixed]`, torch weights loaded, in tf.function

one fresh Python process (so that nothing another combination allocated, imported or compiled
is counted) builds the model and runs two forwards on the same batch: the first traces and
compiles, the second is the one measured. It reports, in bytes:

- param_bytes: the model's variables as it holds them after the forwards (torch: parameters and
  buffers; JAX: every array of `nnx.state(model)`; Keras: `model.weights`), so a policy's
  variable dtypes show, shared tensors counted once.
- rss_before: the resident set (VmRSS) just before the measured forward: interpreter, imported
  libraries (torch is imported in every process: the converted files live beside the original
  package files), the model, the compiled program, the input.
- forward_rise: how far the resident set rose above rss_before during the measured forward
  (VmHWM after resetting it to the current RSS by writing "5" to /proc/self/clear_refs, minus
  rss_before): activations, workspace and the output, as pages actually touched.
- allocator_rise (Keras only): the rise of TensorFlow's allocator's bytes in use during the
  measured forward (`tf.config.experimental.get_memory_info("CPU:0")` peak after
  `reset_memory_stats`, minus the bytes in use before). TF allocates from a pool that keeps what
  the first forward freed, resident, so its forward_rise is near zero and this is the number that
  compares with the others' forward_rise.
- first_forward_rise: the same RSS rise for the first forward (tracing, compiling, filling pools).
- process_peak: the highest resident set of the whole process (VmHWM before the resets, or
  during the forwards): imports, conversion, building, weight loading and compilation.

CPU torch and JAX keep no allocator statistics, hence resident-set measurements. To make the RSS
follow what is live, each child runs with MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ set to
128 KiB, so glibc returns freed blocks to the system instead of keeping the first forward's
memory for the measured one to reuse unseen (with it, torch ResNet-50's forward_rise repeated
within 0.1 MiB; without, it swung 96-125 MiB), and with USE_TF=0 / USE_FLAX=0, so that
transformers does not import TensorFlow and JAX beside torch.
Where /proc/self/clear_refs cannot be written, the fallback (`method: ru_maxrss`) only sees a
forward that rises above the process's earlier peak.

    python benchmarks/memory.py [--quick] [--cases resnet50,vit,bert] [--frameworks torch,jax,keras]
                                [--batch 8] [--json OUT.json] [--markdown OUT.md]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

MiB = 1 << 20

# (framework, precision): the precision names the torch side's mode or the ptranspile policy
COMBINATIONS: list[tuple[str, str]] = [
    ("torch", "fp32"),
    ("torch", "autocast bf16"),
    ("jax", "fp32"),
    ("jax", "mixed"),
    ("keras", "fp32"),
    ("keras", "mixed"),
]

# glibc: serve blocks over 128 KiB with mmap and give freed memory back (see the module docstring)
CHILD_ENV = {
    "MALLOC_MMAP_THRESHOLD_": "131072",
    "MALLOC_TRIM_THRESHOLD_": "131072",
    "KERAS_BACKEND": "tensorflow",
    "TF_CPP_MIN_LOG_LEVEL": "2",
    # transformers 4.x imports TensorFlow and JAX when installed (+600 MiB resident); the originals are torch
    "USE_TF": "0",
    "USE_FLAX": "0",
}


@dataclass(frozen=True)
class Case:
    """One model: the package file, the entry expression, and the input (image side for a
    3-channel image batch, or (vocabulary, sequence length) for token ids)."""

    name: str
    package: str
    file: str
    entry: str
    size: int | tuple[int, int]


def default_cases() -> list[Case]:
    """The ResNet-50, ViT and BERT entries of torch_to_jax_speed.py, so both benchmarks measure
    the same models."""
    from benchmarks.torch_to_jax_speed import CASES

    wanted = ("resnet50", "vit", "BertModel")
    return [
        Case(name, package, rel, entry, tuple(size) if isinstance(size, list | tuple) else size)
        for name, package, rel, entry, size in CASES
        if any(w in name for w in wanted)
    ]


@dataclass
class Measurement:
    """One combination's readings in bytes (see the module docstring); `error` instead when the
    model did not convert, build or run."""

    model: str
    framework: str
    precision: str
    batch: int
    param_bytes: int | None = None
    rss_before: int | None = None  # resident set before the measured (second) forward
    forward_rise: int | None = None  # its peak RSS above rss_before
    allocator_rise: int | None = None  # its peak of TF allocator bytes in use above the start (Keras)
    first_forward_rise: int | None = None  # the first forward's (tracing, compiling) peak RSS rise
    process_peak: int | None = None
    method: str = ""
    seconds: float = 0.0
    error: str = ""


# ---------------------------------------------------------------------------- measuring


def _status_bytes(field: str) -> int | None:
    """A `VmRSS`/`VmHWM` line of /proc/self/status in bytes (None off Linux)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _maxrss_bytes() -> int:
    scale = 1 if sys.platform == "darwin" else 1024  # Linux reports KiB, macOS bytes
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def _reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False where that is not permitted."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
            refs.write("5")
        return True
    except OSError:
        return False


class TfAllocator:
    """TensorFlow's own CPU allocator statistics (`tf.config.experimental.get_memory_info`).

    TF on x86 Linux allocates through a pooling (BFC) allocator: memory the warm-up forward freed
    stays in the pool, resident, and the measured forward reuses it without raising the RSS. The
    pool's peak of bytes in use is what that forward needed.

    Some TF builds keep no statistics for the CPU (`reset_memory_stats` raises "Cannot reset
    memory stats for device 'CPU:0'"); `reset()` then returns False and the forward is measured
    by its resident-set rise alone (`RSS_ONLY`). `experimental` stands in for
    `tf.config.experimental` (the tests pass one without statistics)."""

    def __init__(self, experimental: Any = None) -> None:
        if experimental is None:
            import tensorflow as tf

            experimental = tf.config.experimental
        self._experimental = experimental
        self._current = 0

    def reset(self) -> bool:
        """Start a measurement; False where this build keeps no CPU allocator statistics."""
        try:
            self._experimental.reset_memory_stats("CPU:0")
            self._current = int(self._experimental.get_memory_info("CPU:0")["current"])
        except Exception:  # ValueError "Cannot reset memory stats for device 'CPU:0'", or the like
            return False
        return True

    def peak_rise(self) -> int:
        return int(self._experimental.get_memory_info("CPU:0")["peak"]) - self._current


# how a row says that TF's allocator statistics were unavailable (the method column and caption)
RSS_ONLY = "TF allocator statistics unavailable on this build: Keras forward measured by its RSS rise"


def measure_forward(forward: Callable[[], Any], allocator: TfAllocator | None = None) -> dict[str, Any]:
    """Peak resident memory of one call of `forward`, in this process.

    Returns rss_before, rise (how far the resident set rose above rss_before during the call),
    peak (the process's highest resident set so far, this call included), allocator_rise (the
    rise of the allocator's bytes in use, where `allocator` is given and keeps statistics; else
    None, and the method says so) and the method used.
    `forward` must finish its work before returning (block_until_ready, .numpy()): asynchronous
    dispatch would move the peak past the reading."""
    gc.collect()
    lifetime = _status_bytes("VmHWM") or _maxrss_bytes()
    rss_before = _status_bytes("VmRSS") or _maxrss_bytes()
    fallback = allocator is not None and not allocator.reset()
    if fallback:
        allocator = None
    if _reset_peak() and _status_bytes("VmHWM") is not None:
        method = "VmHWM after clear_refs"
        out = forward()
        peak = _status_bytes("VmHWM") or 0
        rise = max(0, peak - rss_before)
    else:
        method = "ru_maxrss"
        before = _maxrss_bytes()
        out = forward()
        peak = _maxrss_bytes()
        rise = max(0, peak - max(before, rss_before))  # only what rises above the earlier peak
    allocator_rise = allocator.peak_rise() if allocator is not None else None
    if fallback:
        method = f"{method}; {RSS_ONLY}"
    del out
    return {
        "rss_before": rss_before,
        "rise": rise,
        "peak": max(lifetime, peak),
        "allocator_rise": allocator_rise,
        "method": method,
    }


def _input(case: Case, batch: int) -> Any:
    import numpy as np

    rng = np.random.default_rng(0)
    if isinstance(case.size, tuple):
        return rng.integers(0, case.size[0], (batch, case.size[1])).astype("int64")
    return rng.standard_normal((batch, 3, case.size, case.size)).astype("float32")


def _first(out: Any) -> Any:
    """The first tensor of a model output (ModelOutput, dict, tuple, or the tensor itself)."""
    if hasattr(out, "to_tuple"):
        return out.to_tuple()[0]
    if isinstance(out, dict):
        return next(iter(out.values()))
    if isinstance(out, tuple | list):
        return out[0]
    return out


def _original(case: Case) -> tuple[Path, Any]:
    from tests.real_models import import_torchvision, package_file

    import_torchvision()  # before transformers: the register_fake work-around
    from precision_transpiler.verify.loading import build_model, import_original

    path = package_file(case.package, case.file)
    return path, build_model(import_original(path), case.entry, "original").eval()


def _converted(case: Case, path: Path, target: str, policy: str) -> Any:
    from precision_transpiler import transpile
    from precision_transpiler.verify.loading import build_model, import_converted

    source = path.read_text(encoding="utf-8")
    code = transpile(source, to=target, policy=policy, path=str(path), entry=case.entry, prune_to_entry=True).code
    module = import_converted(path.with_name(f"{path.stem}_memory_{target}_{policy}.py"), path, code)
    return build_model(module, case.entry, "converted")


Built = tuple[Callable[[], Any], Callable[[], int], TfAllocator | None]


def _build(case: Case, framework: str, precision: str, batch: int) -> Built:
    """The forward (finishing its work before it returns), the parameter-bytes reading and, for
    TensorFlow, its allocator statistics, of one combination. The torch original is built in
    every case: the converted models take its weights, and it is dropped before measuring."""
    import torch

    path, original = _original(case)
    x = _input(case, batch)
    if framework == "torch":
        xt = torch.from_numpy(x)
        autocast = precision != "fp32"

        def torch_forward() -> Any:
            with torch.no_grad(), torch.autocast("cpu", torch.bfloat16, enabled=autocast):
                return _first(original(xt))

        def torch_bytes() -> int:
            tensors = {id(t): t for t in [*original.parameters(), *original.buffers()]}
            return sum(t.numel() * t.element_size() for t in tensors.values())

        return torch_forward, torch_bytes, None

    state = {k: v.detach().numpy() for k, v in original.state_dict().items()}
    if framework == "jax":
        import jax
        from flax import nnx

        from precision_transpiler.weights.torch_to_flax import load_torch_state_dict

        model = _converted(case, path, "jax", precision)
        load_torch_state_dict(model, state)
        del original, state
        model.eval()
        graphdef, params = nnx.split(model)
        del model

        @jax.jit
        def apply(params: Any, x: Any) -> Any:
            return _first(nnx.merge(graphdef, params)(x))

        xj = jax.numpy.asarray(x)

        def jax_forward() -> Any:
            return apply(params, xj).block_until_ready()

        def jax_bytes() -> int:
            leaves = {id(a): a for a in jax.tree.leaves(params) if hasattr(a, "nbytes")}
            return sum(int(a.nbytes) for a in leaves.values())

        return jax_forward, jax_bytes, None

    if framework == "keras":
        import tensorflow as tf

        from precision_transpiler.weights.torch_to_keras import load_torch_state_dict_keras

        model = _converted(case, path, "tf", precision)
        load_torch_state_dict_keras(model, state)
        del original, state
        if hasattr(model, "eval"):
            model.eval()
        call = tf.function(lambda x: _first(model(x)))
        xk = tf.convert_to_tensor(x)

        def keras_forward() -> Any:
            return call(xk).numpy()

        def keras_bytes() -> int:
            weights = {id(w): w for w in model.weights}
            return sum(_count(w.shape) * tf.as_dtype(w.dtype).size for w in weights.values())

        return keras_forward, keras_bytes, TfAllocator()
    raise ValueError(f"unknown framework {framework!r}")


def _count(shape: Any) -> int:
    count = 1
    for dim in shape:
        count *= int(dim)
    return count


def measure(case: Case, framework: str, precision: str, batch: int) -> Measurement:
    """Build, then measure the first forward (which traces and compiles) and a second one, in
    this process (meant to be a fresh one)."""
    started = time.perf_counter()
    forward, param_bytes, allocator = _build(case, framework, precision, batch)
    first = measure_forward(forward)
    second = measure_forward(forward, allocator)
    return Measurement(
        case.name,
        framework,
        precision,
        batch,
        param_bytes=param_bytes(),
        rss_before=second["rss_before"],
        forward_rise=second["rise"],
        allocator_rise=second["allocator_rise"],
        first_forward_rise=first["rise"],
        process_peak=max(first["peak"], second["peak"]),
        method=second["method"],
        seconds=time.perf_counter() - started,
    )


def run_combination(case: Case, framework: str, precision: str, batch: int, timeout: float = 600) -> Measurement:
    """`measure` in a fresh subprocess (with CHILD_ENV); failures come back as `error`, never raised."""
    request = json.dumps({"case": asdict(case), "framework": framework, "precision": precision, "batch": batch})
    env = {**os.environ, **CHILD_ENV}
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--child", request],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=REPO,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Measurement(case.name, framework, precision, batch, error=f"timed out after {timeout:.0f} s")
    lines = done.stdout.strip().splitlines()
    if done.returncode == 0 and lines:
        return Measurement(**json.loads(lines[-1]))
    tail = [line for line in done.stderr.strip().splitlines() if line.strip()]
    message = tail[-1] if tail else f"exit code {done.returncode}"
    return Measurement(
        case.name,
        framework,
        precision,
        batch,
        seconds=time.perf_counter() - started,
        error=" ".join(message.split())[:200],
    )


def _child(request: str) -> int:
    """The subprocess side: one measurement as one JSON line; a failure is data, exit code 0."""
    data = json.loads(request)
    case_data = data["case"]
    if isinstance(case_data["size"], list):
        case_data["size"] = tuple(case_data["size"])
    case = Case(**case_data)
    try:
        result = measure(case, data["framework"], data["precision"], data["batch"])
    except Exception as exc:  # reported in the table, never dropped
        traceback.print_exc()
        message = " ".join(str(exc).split())[:200]
        result = Measurement(case.name, data["framework"], data["precision"], data["batch"])
        result.error = f"{type(exc).__name__}: {message}"
    print(json.dumps(asdict(result)), flush=True)
    return 0


# ---------------------------------------------------------------------------- reporting


def _mib(value: int | None) -> str:
    return "-" if value is None else f"{value / MiB:,.1f}"


def markdown(results: list[Measurement], header: str) -> str:
    rows = [
        header,
        "",
        "| model | framework | precision | params (MiB) | RSS before forward (MiB) | forward RSS rise (MiB) "
        "| TF allocator rise (MiB) | first forward RSS rise (MiB) | process peak RSS (MiB) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if r.error:
            rows.append(f"| {r.model} | {r.framework} | {r.precision} | failed: {r.error.replace('|', '/')} ||||||")
            continue
        allocator = "n/a (RSS only)" if RSS_ONLY in r.method else _mib(r.allocator_rise)
        rows.append(
            f"| {r.model} | {r.framework} | {r.precision} | {_mib(r.param_bytes)} | {_mib(r.rss_before)} "
            f"| {_mib(r.forward_rise)} | {allocator} | {_mib(r.first_forward_rise)} "
            f"| {_mib(r.process_peak)} |"
        )
    methods = sorted({r.method for r in results if r.method})
    batch = results[0].batch if results else "-"
    rows += ["", CAPTION.format(batch=batch, method=", ".join(methods) or "-")]
    return "\n".join(rows) + "\n"


CAPTION = (
    "One fresh process per row, batch {batch}: build, a first forward (traces, compiles), then the measured "
    "forward. params: the variables as held (torch parameters and buffers, `nnx.state`, Keras "
    "`model.weights`). RSS before forward: resident set just before the measured forward (libraries, torch "
    "in every process, model, compiled program, input). forward RSS rise: how far the resident set rose above "
    "that during the measured forward ({method}; glibc made to return freed blocks over 128 KiB). TF "
    "allocator rise: the same forward's peak of TensorFlow's allocator bytes in use above the start; TF keeps "
    "freed memory in a pool, so for Keras this, not the RSS rise, is the forward's working memory. first "
    "forward RSS rise: the same for the first forward. process peak RSS: the whole process's highest "
    "resident set, conversion and compilation included."
)


def versions() -> dict[str, str]:
    import importlib.metadata as md

    found = {"python": platform.python_version()}
    for name in ("torch", "torchvision", "transformers", "jax", "flax", "tensorflow-cpu", "keras"):
        try:
            found[name] = md.version(name)
        except md.PackageNotFoundError:
            continue
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="only the first model (ResNet-50)")
    parser.add_argument("--cases", default="", help="only models whose name contains one of these (comma-separated)")
    parser.add_argument("--frameworks", default="torch,jax,keras")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=300, help="seconds for one combination's process")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args(argv)
    if args.child:
        return _child(args.child)

    wanted = [w.strip().lower() for w in args.cases.split(",") if w.strip()]
    cases = [c for c in default_cases() if not wanted or any(w in c.name.lower() for w in wanted)]
    if args.quick:
        cases = cases[:1]
    frameworks = [f.strip() for f in args.frameworks.split(",") if f.strip()]
    started = time.perf_counter()
    results: list[Measurement] = []
    for case in cases:
        for framework, precision in COMBINATIONS:
            if framework not in frameworks:
                continue
            result = run_combination(case, framework, precision, args.batch, args.timeout)
            results.append(result)
            status = result.error or f"forward RSS rise {_mib(result.forward_rise)} MiB"
            print(f"{case.name} / {framework} {precision}: {status} ({result.seconds:.0f} s)", file=sys.stderr)
    elapsed = time.perf_counter() - started
    stamp = time.strftime("%Y-%m-%d")
    header = f"Memory run {stamp}, batch {args.batch}, {elapsed:.0f} s; " + ", ".join(
        f"{k} {v}" for k, v in versions().items()
    )
    table = markdown(results, header)
    print(table)
    if args.markdown:
        args.markdown.write_text(table, encoding="utf-8")
    if args.json:
        payload = {
            "date": stamp,
            "seconds": elapsed,
            "batch": args.batch,
            "versions": versions(),
            "measurements": [asdict(r) for r in results],
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

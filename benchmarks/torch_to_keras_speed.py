"""Forward speed of converted Keras 3 models beside their torch originals.

The cases of torch_to_jax_speed.py (torchvision ResNet-18/50 and ViT, transformers BERT and
GPT-2) are converted with `ptranspile --to tf --entry ... --prune-to-entry` (fp32, and `--policy mixed`), the
torch weights are copied in (`load_torch_state_dict_keras`), and in one process, on the same
inputs, medians after warm-up are taken of: the torch original in eval mode under
`torch.no_grad()` (fp32, and under `torch.autocast("cpu", torch.bfloat16)`, the reference the
mixed policy follows), and the converted Keras model called through `tf.function` (a graph, as
`model.predict` runs it). Ratios are to the torch fp32 forward; the error columns are the
relative L2 error of each converted model's output against the torch fp32 output. A case that
does not convert or run is reported with its first error, not left out.

    python benchmarks/torch_to_keras_speed.py [--repeat N] [--batch N] [--cases resnet18,bert]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.torch_to_jax_speed import CASES, _outputs, median
from precision_transpiler import transpile
from precision_transpiler.verify.adapters.torch_adapter import TorchAdapter
from precision_transpiler.verify.loading import build_model, import_converted, import_original
from tests.real_models import import_torchvision, package_file


def _first(out):
    """The first tensor of a Keras model output (ModelOutput, dict, tuple or the tensor)."""
    if hasattr(out, "to_tuple"):
        return out.to_tuple()[0]
    return _outputs(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--cases", default="", help="only cases whose name contains one of these (comma-separated)")
    parser.add_argument("--threads", type=int, default=0, help="threads per framework (0: their defaults)")
    args = parser.parse_args()
    from benchmarks.threads import limit_threads

    limit_threads(args.threads)  # before TensorFlow starts

    import_torchvision()
    import keras
    import numpy as np
    import tensorflow as tf
    import torch

    from precision_transpiler.weights.torch_to_keras import load_torch_state_dict_keras

    wanted = [w.strip().lower() for w in args.cases.split(",") if w.strip()]
    rows = [
        "| model | torch fp32 (s) | torch autocast bf16 (ratio) | Keras fp32 (ratio) | Keras mixed (ratio) "
        "| rel err fp32 | rel err mixed |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, package, rel, entry, size in CASES:
        if wanted and not any(w in name.lower() for w in wanted):
            continue
        path = package_file(package, rel)
        original = build_model(import_original(path), entry, "original").eval()
        rng = np.random.default_rng(0)
        if isinstance(size, tuple):
            x = rng.integers(0, size[0], (args.batch, size[1])).astype("int64")
        else:
            x = rng.standard_normal((args.batch, 3, size, size)).astype("float32")
        TorchAdapter().prepare(original, [x], seed=0, perturb=True, calibrate_bn=False)
        xt = torch.from_numpy(x)
        with torch.no_grad():
            t_torch = median(lambda original=original, xt=xt: original(xt), args.repeat)
            reference = _outputs(original(xt)).float().numpy()
            with torch.autocast("cpu", torch.bfloat16):
                t_autocast = median(lambda original=original, xt=xt: original(xt), args.repeat)
        state = {k: v.numpy() for k, v in original.state_dict().items()}
        cells, errors = [], []
        for policy in ("fp32", "mixed"):
            try:
                prune = {"entry": entry, "prune_to_entry": True}
                code = transpile(path.read_text(), to="tf", policy=policy, path=str(path), **prune).code
                module = import_converted(path.with_name(f"bench_tf_{policy}.py"), path, code)
                model = build_model(module, entry, "converted")
                load_torch_state_dict_keras(model, state)
                if hasattr(model, "eval"):
                    model.eval()
                forward = tf.function(lambda x, model=model: _first(model(x)))
                xk = tf.convert_to_tensor(x)
                t = median(lambda forward=forward, xk=xk: forward(xk).numpy(), args.repeat)
                out = np.asarray(keras.ops.convert_to_numpy(forward(xk)), dtype=np.float32)
                cells.append(f"{t:.3f} ({t / t_torch:.2f})")
                errors.append(f"{float(np.linalg.norm(out - reference) / np.linalg.norm(reference)):.1e}")
            except Exception as error:  # reported in the table, never dropped
                first = str(error).strip().splitlines()[0][:80] if str(error).strip() else ""
                cells.append(f"failed: {type(error).__name__}: {first}")
                errors.append("-")
        rows.append(
            f"| {name} | {t_torch:.3f} | {t_autocast:.3f} ({t_autocast / t_torch:.2f}) | {cells[0]} | {cells[1]} "
            f"| {errors[0]} | {errors[1]} |"
        )
        print(rows[-1], file=sys.stderr, flush=True)
    print(
        f"## torch original vs converted Keras, batch {args.batch}, "
        f"{args.threads or 'default'} thread(s) per framework, torch {torch.__version__}, "
        f"tensorflow {tf.__version__}, keras {keras.__version__}\n"
    )
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

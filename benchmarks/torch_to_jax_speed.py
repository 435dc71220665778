"""Forward speed of converted JAX (Flax NNX) models beside their torch originals.

Converts torchvision's resnet.py and vision_transformer.py and transformers' BERT and GPT-2 with
`ptranspile --to jax --entry ... --prune-to-entry`, copies
the torch weights into the converted models, and times in one process (medians after warm-up,
same inputs): the torch original in eval mode under `torch.no_grad()`, and the converted model
under `jax.jit` (fp32, and with `--policy mixed`). Ratios are to the torch fp32 forward.

    python benchmarks/torch_to_jax_speed.py [--repeat N] [--batch N] [--size N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from precision_transpiler import transpile
from precision_transpiler.verify.adapters.torch_adapter import TorchAdapter
from precision_transpiler.verify.loading import build_model, import_converted, import_original
from tests.real_models import import_torchvision, package_file

# (name, package, file, entry expression, input: image size, or (vocabulary, sequence length))
CASES = [
    ("resnet18", "torchvision", "models/resnet.py", "resnet18()", 224),
    ("resnet50", "torchvision", "models/resnet.py", "resnet50()", 224),
    (
        "vit (4 layers, dim 256)",
        "torchvision",
        "models/vision_transformer.py",
        "VisionTransformer(image_size=224, patch_size=16, num_layers=4, num_heads=8, hidden_dim=256, mlp_dim=1024)",
        224,
    ),
    (
        "transformers BertModel (4 layers, dim 256)",
        "transformers",
        "models/bert/modeling_bert.py",
        "BertModel(BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=8, intermediate_size=1024))",
        (30522, 128),
    ),
    (
        "transformers GPT2LMHeadModel (4 layers, dim 256, tied head)",
        "transformers",
        "models/gpt2/modeling_gpt2.py",
        "GPT2LMHeadModel(GPT2Config(n_embd=256, n_layer=4, n_head=8, use_cache=False))",
        (50257, 128),
    ),
]


def _outputs(out):
    """The first tensor of a model output (logits, last_hidden_state or the tensor itself)."""
    if isinstance(out, dict):
        return next(iter(out.values()))
    if isinstance(out, tuple | list):
        return out[0]
    return out


def median(fn, repeat: int) -> float:
    for _ in range(2):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()

    import_torchvision()
    import jax
    import numpy as np
    import torch
    from flax import nnx

    from precision_transpiler.weights.torch_to_flax import load_torch_state_dict

    rows = [
        "| model | torch fp32 (s) | JAX fp32 jit (ratio) | JAX mixed jit (ratio) | max rel err fp32 |",
        "|---|---|---|---|---|",
    ]
    for name, package, rel, entry, size in CASES:
        path = package_file(package, rel)
        original = build_model(import_original(path), entry, "original").eval()
        rng = np.random.default_rng(0)
        if isinstance(size, tuple):
            x = rng.integers(0, size[0], (args.batch, size[1])).astype("int64")
        else:
            x = rng.standard_normal((args.batch, 3, size, size)).astype("float32")
        # zero-initialised heads (torchvision's ViT) would make the output exactly 0
        TorchAdapter().prepare(original, [x], seed=0, perturb=True, calibrate_bn=False)
        xt = torch.from_numpy(x)
        with torch.no_grad():
            t_torch = median(lambda original=original, xt=xt: original(xt), args.repeat)
            reference = _outputs(original(xt)).numpy()
        state = {k: v.numpy() for k, v in original.state_dict().items()}
        cells = []
        error = None
        for policy in ("fp32", "mixed"):
            prune = {"entry": entry, "prune_to_entry": True}
            code = transpile(path.read_text(), to="jax", policy=policy, path=str(path), **prune).code
            module = import_converted(path.with_name(f"bench_{policy}.py"), path, code)
            model = build_model(module, entry, "converted")
            load_torch_state_dict(model, state)
            model.eval()
            graphdef, params = nnx.split(model)

            @jax.jit
            def forward(params, x, graphdef=graphdef):
                return _outputs(nnx.merge(graphdef, params)(x))

            xj = jax.numpy.asarray(x)
            t = median(
                lambda forward=forward, params=params, xj=xj: forward(params, xj).block_until_ready(), args.repeat
            )
            cells.append(f"{t:.3f} ({t / t_torch:.2f})")
            if policy == "fp32":
                out = np.asarray(forward(params, xj))
                error = float(np.linalg.norm(out - reference) / np.linalg.norm(reference))
        rows.append(f"| {name} | {t_torch:.3f} | {cells[0]} | {cells[1]} | {error:.1e} |")
    print(f"## torch original vs converted JAX, batch {args.batch}, torch {torch.__version__}, jax {jax.__version__}\n")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Speed of precision policies: forward time of the converted model / the fp32 original.

Measured side by side in one process (medians after warm-up), because absolute times on these
shared machines swing 2-4x. Target on the project's CPU: ResNet-18 batch 8 under
`--policy mixed` <= 0.5 of fp32.

    python benchmarks/policy_speed.py [--repeat N] [--batch N] [--size N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from precision_transpiler import transpile
from tests.real_models import import_torchvision, load_beside, package_file


def median_forward(model, batch, repeat: int) -> float:
    import torch

    with torch.no_grad():
        for _ in range(2):
            model(batch)
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            model(batch)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--size", type=int, default=224)
    args = parser.parse_args()

    import torch

    import_torchvision()
    import torchvision.models.resnet as original

    path = package_file("torchvision", "models/resnet.py")
    rows = ["| model | variant | median s | ratio to fp32 |", "|---|---|---|---|"]
    converted = {
        policy: load_beside(
            transpile(path.read_text(), to="torch", policy=policy).code,
            "torchvision.models",
            f"_ptx_resnet_{policy.replace('-', '_')}",
        )
        for policy in ("mixed", "bf16")
    }
    batch = torch.randn(args.batch, 3, args.size, args.size)
    for arch in ("resnet18",):
        reference = getattr(original, arch)().eval()
        fp32 = median_forward(reference, batch, args.repeat)
        rows.append(f"| {arch} | fp32 original | {fp32:.3f} | 1.00 |")

        class Autocast(torch.nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, x):
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    return self.inner(x)

        t = median_forward(Autocast(reference), batch, args.repeat)
        rows.append(f"| {arch} | plain torch.autocast(cpu, bf16) | {t:.3f} | {t / fp32:.2f} |")
        for policy, module in converted.items():
            model = getattr(module, arch)().eval()
            model.load_state_dict(reference.state_dict())
            t = median_forward(model, batch, args.repeat)
            rows.append(f"| {arch} | ptranspile --policy {policy} | {t:.3f} | {t / fp32:.2f} |")
            cl = model.to(memory_format=torch.channels_last)
            t = median_forward(cl, batch.contiguous(memory_format=torch.channels_last), args.repeat)
            rows.append(f"| {arch} | ptranspile --policy {policy}, channels_last | {t:.3f} | {t / fp32:.2f} |")
    rows += keras_rows(args)
    rows += flax_rows(args)
    print(f"## Policy speed, batch {args.batch}x3x{args.size}x{args.size}, torch {torch.__version__}\n")
    print("\n".join(rows))
    return 0


KERAS_CNN = """
import keras
from keras import layers


def build(size):
    inputs = keras.Input(shape=(size, size, 3))
    x = inputs
    for filters in (32, 64, 128, 256):
        x = layers.Conv2D(filters, 3, padding="same", use_bias=False)(x)
        x = layers.BatchNormalization()(x)
        x = layers.Activation("relu")(x)
        x = layers.MaxPooling2D(2)(x)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(10)(x)
    return keras.Model(inputs, outputs)
"""

FLAX_CNN = """
import jax
import jax.numpy as jnp
from flax import nnx


class CNN(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.convs = nnx.List([nnx.Conv(i, o, kernel_size=(3, 3), rngs=rngs)
                               for i, o in ((3, 32), (32, 64), (64, 128), (128, 256))])
        self.head = nnx.Linear(256, 10, rngs=rngs)

    def __call__(self, x):
        for conv in self.convs:
            x = nnx.max_pool(nnx.relu(conv(x)), (2, 2), (2, 2))
        return self.head(x.mean(axis=(1, 2)))
"""


FLAX_MLP = """
from flax import nnx


class MLP(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.layers = nnx.List([nnx.Linear(2048, 2048, rngs=rngs) for _ in range(4)])

    def __call__(self, x):
        for layer in self.layers:
            x = nnx.relu(layer(x))
        return x
"""


def _exec(code: str) -> dict:
    namespace: dict = {}
    exec(compile(code, "<bench>", "exec"), namespace)
    return namespace


def keras_rows(args: argparse.Namespace) -> list[str]:
    """A Keras CNN (conv/BN/relu/pool x4): fp32 vs ptranspile --policy mixed, same weights."""
    import numpy as np

    x = np.random.default_rng(0).normal(size=(args.batch, args.size, args.size, 3)).astype("float32")
    fp32_model = _exec(KERAS_CNN)["build"](args.size)
    mixed_model = _exec(transpile(KERAS_CNN, to="tf", policy="mixed").code)["build"](args.size)
    mixed_model.set_weights(fp32_model.get_weights())

    def timed(model) -> float:
        run = model.predict_on_batch
        for _ in range(2):
            run(x)
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            run(x)
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    import keras

    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        own_model = _exec(KERAS_CNN)["build"](args.size)
    finally:
        keras.config.set_dtype_policy("float32")
    own_model.set_weights(fp32_model.get_weights())
    fp32, mixed, own = timed(fp32_model), timed(mixed_model), timed(own_model)
    return [
        f"| keras CNN | fp32 | {fp32:.3f} | 1.00 |",
        f"| keras CNN | Keras' own global mixed_bfloat16 | {own:.3f} | {own / fp32:.2f} |",
        f"| keras CNN | ptranspile --policy mixed | {mixed:.3f} | {mixed / fp32:.2f} |",
    ]


def flax_rows(args: argparse.Namespace) -> list[str]:
    """A Flax NNX CNN under jax.jit: fp32 vs ptranspile --policy mixed, same weights."""
    import jax
    from flax import nnx

    x = jax.random.normal(jax.random.key(0), (args.batch, args.size, args.size, 3))
    reference = _exec(FLAX_CNN)["CNN"](nnx.Rngs(0))
    mixed = _exec(transpile(FLAX_CNN, to="jax", policy="mixed").code)["CNN"](nnx.Rngs(0))
    nnx.update(mixed, nnx.state(reference))

    def timed(model) -> float:
        graphdef, state = nnx.split(model)

        @jax.jit
        def forward(state, x):
            return nnx.merge(graphdef, state)(x)

        for _ in range(2):
            forward(state, x).block_until_ready()
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            forward(state, x).block_until_ready()
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    fp32, low = timed(reference), timed(mixed)
    rows = [
        f"| flax CNN (jit) | fp32 | {fp32:.3f} | 1.00 |",
        f"| flax CNN (jit) | ptranspile --policy mixed | {low:.3f} | {low / fp32:.2f} |",
    ]
    # Matmul-bound model: here fp32 accumulation (preferred_element_type) is what pays off on CPU.
    xm = jax.random.normal(jax.random.key(0), (256, 2048))
    reference = _exec(FLAX_MLP)["MLP"](nnx.Rngs(0))
    mixed = _exec(transpile(FLAX_MLP, to="jax", policy="mixed").code)["MLP"](nnx.Rngs(0))
    nnx.update(mixed, nnx.state(reference))
    x = xm
    fp32, low = timed(reference), timed(mixed)
    rows += [
        f"| flax MLP 4x2048 (jit), batch 256 | fp32 | {fp32:.3f} | 1.00 |",
        f"| flax MLP 4x2048 (jit), batch 256 | ptranspile --policy mixed | {low:.3f} | {low / fp32:.2f} |",
    ]
    return rows


if __name__ == "__main__":
    sys.exit(main())

"""torch.autograd.Function for converted Keras code: `Function`, `FunctionCtx`
(torch's `once_differentiable` is runtime/common.py's).

torch model code defines its own gradients with `class F(torch.autograd.Function)`: a static
`forward(ctx, *args)` that may `ctx.save_for_backward(...)` and set attributes on `ctx` (or, from
torch 2.0, a static `forward(*args)` plus `setup_context(ctx, inputs, output)` doing that), a static
`backward(ctx, *grads)` returning one gradient per input (None where there is none), used as
`F.apply(*args)`. Converted, the class derives from this `Function`, whose `apply` runs the
converted `forward` under `tf.custom_gradient` with the converted `backward` as its gradient: the
forward values are torch's, and a GradientTape through the model uses the class's own gradient.
The Flax counterpart is runtime/flax/autograd.py (`jax.custom_vjp`).
"""

import numpy as np
import tensorflow as tf

from precision_transpiler.runtime.common import TorchFunctionBase, TorchFunctionCtx


def _autograd_is_tensor(value):
    return isinstance(value, tf.Tensor | tf.Variable | np.ndarray) or tf.is_tensor(value)


class FunctionCtx(TorchFunctionCtx):
    """torch's `ctx` of an autograd.Function (runtime/common.py's): what `forward` saves for
    `backward`, held by the gradient function's closure."""


class Function(TorchFunctionBase):
    """torch.autograd.Function: subclasses define static `forward(ctx, ...)` (or `forward(...)` and
    `setup_context(ctx, inputs, output)`) and `backward(ctx, *grads)`; `apply(*args)` runs them
    under `tf.custom_gradient` over the tensor arguments (other arguments are constants of the
    call, as torch gives them no gradient)."""

    @classmethod
    def apply(cls, *args):
        positions = [i for i, a in enumerate(args) if _autograd_is_tensor(a)]
        ctx = FunctionCtx()

        @tf.custom_gradient
        def function(*tensors):
            values = list(args)
            for i, tensor in zip(positions, tensors, strict=True):
                values[i] = tensor
            ctx.needs_input_grad = tuple(
                i in positions and tf.as_dtype(values[i].dtype).is_floating for i in range(len(args))
            )
            out = cls._pt_forward(ctx, values)

            def gradient(*upstream, variables=None):
                given = cls.backward(ctx, *ctx._pt_upstream(upstream, lambda _, g: tf.zeros_like(g)))
                given = given if isinstance(given, tuple) else (given,)
                by_arg = dict(enumerate(given))
                grads = [
                    tf.zeros_like(t) if by_arg.get(i) is None else tf.cast(by_arg[i], t.dtype)
                    for i, t in zip(positions, tensors, strict=True)
                ]
                return (grads, [None] * len(variables)) if variables else grads

            return out, gradient

        return function(*[tf.convert_to_tensor(args[i]) for i in positions])

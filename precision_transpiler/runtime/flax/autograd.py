"""torch.autograd.Function for converted Flax NNX code: `Function`, `FunctionCtx`
(torch's `once_differentiable` is runtime/common.py's).

torch model code defines its own gradients with `class F(torch.autograd.Function)`: a static
`forward(ctx, *args)` that may `ctx.save_for_backward(...)` and set attributes on `ctx` (or, from
torch 2.0, a static `forward(*args)` plus `setup_context(ctx, inputs, output)` doing that), a static
`backward(ctx, *grads)` returning one gradient per input (None where there is none), used as
`F.apply(*args)`. Converted, the class derives from this `Function`, whose `apply` runs the
converted `forward` as a `jax.custom_vjp` function and the converted `backward` as its rule: the
forward values are torch's, and `jax.grad` through the model uses the class's own gradient
(a straight-through estimator stays one). The Keras counterpart is runtime/keras/autograd.py
(`tf.custom_gradient`).

`ctx` keeps torch's surface: `save_for_backward`, `saved_tensors`, `needs_input_grad`,
`mark_non_differentiable`, `mark_dirty`, `set_materialize_grads`, and any attribute the forward
sets. Array attributes travel as residuals; other attributes (ints, flags, shapes) as static data.
"""

import jax
import jax.numpy as jnp
import numpy as np

from precision_transpiler.runtime.common import TorchFunctionBase, TorchFunctionCtx


def _is_array(value):
    return isinstance(value, jax.Array | np.ndarray)


def _arrays_only(value):
    """Whether a ctx attribute is arrays all the way down (a residual rather than static data)."""
    leaves = jax.tree_util.tree_leaves(value)
    return bool(leaves) and all(_is_array(leaf) for leaf in leaves)


@jax.tree_util.register_pytree_node_class
class FunctionCtx(TorchFunctionCtx):
    """torch's `ctx` of an autograd.Function as a pytree: its array attributes are the residuals
    of the custom_vjp, the others static data."""

    def tree_flatten(self):
        items = sorted(vars(self).items())
        arrays = [(k, v) for k, v in items if _arrays_only(v)]
        static = tuple((k, v) for k, v in items if not _arrays_only(v))
        return [v for _, v in arrays], (tuple(k for k, _ in arrays), static)

    @classmethod
    def tree_unflatten(cls, aux, children):
        ctx = cls.__new__(cls)
        names, static = aux
        for name, value in static:
            setattr(ctx, name, value)
        for name, value in zip(names, children, strict=True):
            setattr(ctx, name, value)
        return ctx


class Function(TorchFunctionBase):
    """torch.autograd.Function: subclasses define static `forward(ctx, ...)` (or `forward(...)` and
    `setup_context(ctx, inputs, output)`) and `backward(ctx, *grads)`; `apply(*args)` runs them as
    a `jax.custom_vjp` function of the array arguments (other arguments are constants of the
    call, as torch gives them no gradient)."""

    @classmethod
    def apply(cls, *args):
        positions = [i for i, a in enumerate(args) if _is_array(a)]

        def full(arrays):
            values = list(args)
            for i, array in zip(positions, arrays, strict=True):
                values[i] = array
            return values

        inexact = {i for i in positions if jnp.issubdtype(args[i].dtype, jnp.inexact)}

        def run(ctx, arrays):
            ctx.needs_input_grad = tuple(i in inexact for i in range(len(args)))
            return cls._pt_forward(ctx, full(arrays))

        @jax.custom_vjp
        def function(*arrays):
            return run(FunctionCtx(), arrays)

        def forward(*arrays):
            ctx = FunctionCtx()
            ctx._pt_inputs = tuple((a.shape, a.dtype) for a in arrays)
            output = run(ctx, arrays)
            outputs = output if isinstance(output, tuple | list) else (output,)
            ctx._pt_outputs = tuple((o.shape, o.dtype) for o in outputs)
            return output, ctx

        def backward(ctx, grads):
            shapes = ctx._pt_inputs
            grads = ctx._pt_upstream(
                grads if isinstance(grads, tuple | list) else (grads,),
                lambda i, _: jnp.zeros(*ctx._pt_outputs[i]),
            )
            given = cls.backward(ctx, *grads)
            given = given if isinstance(given, tuple) else (given,)
            by_arg = dict(enumerate(given))
            out = []
            for position, (shape, dtype) in zip(positions, shapes, strict=True):
                grad = by_arg.get(position)
                if not jnp.issubdtype(dtype, jnp.inexact):
                    out.append(np.zeros(shape, jax.dtypes.float0))  # an integer input has no gradient
                elif grad is None:
                    out.append(jnp.zeros(shape, dtype))
                else:
                    out.append(jnp.asarray(grad, dtype).reshape(shape))
            return tuple(out)

        function.defvjp(forward, backward)
        return function(*[args[i] for i in positions])

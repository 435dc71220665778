"""Framework-free parts of torch's factories and of checkpoint_sequential, shared by the Flax
and Keras runtimes: the size torch's factories take (several ints or one sequence), what torch
reads as one entry of a size (`torch.Size(sizes)`), and the forward of
`torch.utils.checkpoint.checkpoint_sequential` (functions applied one after the other) and of
`checkpoint` handed around as a value (the function called).
"""

import numpy as np


def _size_entry(value):
    """One entry of a size as torch reads it, through `__index__`: a tensor of one element, of any
    rank, is its integer (`torch.Size([dim, n, 2])` with `n = torch.randint(2, 20, size=(1,))`,
    torchdyn's systems), where JAX and NumPy turn only 0-d arrays into numbers. A tensor of one
    floating element is refused, as torch refuses it; anything else (an int, a 0-d array, an
    unknown `None` of a symbolic shape) is kept as it is."""
    shape = getattr(value, "shape", None)
    if not shape or any(n != 1 for n in shape):
        return value  # a number, a 0-d array, or not one element: left to the caller, as before
    entry = np.asarray(value).reshape(())
    if entry.dtype.kind not in "iub":
        raise TypeError("only integer tensors of a single element can be converted to an index")
    return int(entry)


def torch_size(sizes=()):
    """`torch.Size(sizes)`: a tuple of the sizes, each read as torch reads it (`_size_entry`)."""
    return tuple(_size_entry(n) for n in sizes)


def _factory_size(size):
    """torch's factories take a size as several ints or as one sequence (`torch.ones(2, 3)`,
    `torch.ones((2, 3))`)."""
    return torch_size(size[0] if len(size) == 1 and isinstance(size[0], list | tuple) else size)


def torch_run_sequential(functions, input):
    """torch.utils.checkpoint.checkpoint_sequential's forward (En-transformer's layers): each
    function (a Sequential's children, or a list) applied to the previous one's output."""
    for function in list(functions):
        input = function(input)
    return input


def torch_checkpoint(function, *args, use_reentrant=None, preserve_rng_state=True, context_fn=None,
                     determinism_check="default", debug=False, **kwargs):  # fmt: skip
    """torch.utils.checkpoint.checkpoint handed around as a value (memory-efficient-attention's
    `partial(checkpoint, summarize_qkv_chunk)`): its forward is the function's, the rest only
    trades memory for recomputation in torch's backward. Its calls convert to the call itself."""
    return function(*args, **kwargs)

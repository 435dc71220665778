"""Framework-free parts of torch's factories and of checkpoint_sequential, shared by the Flax
and Keras runtimes: the size torch's factories take (several ints or one sequence), and the
forward of `torch.utils.checkpoint.checkpoint_sequential` (functions applied one after the other)
and of `checkpoint` handed around as a value (the function called).
"""


def _factory_size(size):
    """torch's factories take a size as several ints or as one sequence (`torch.ones(2, 3)`,
    `torch.ones((2, 3))`)."""
    return tuple(size[0]) if len(size) == 1 and isinstance(size[0], list | tuple) else tuple(size)


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

"""The framework-free half of the precision policies' run time (`flax/policy.py`,
`keras/policy.py`, `torch/policy.py`): calls nested under the outermost one, which outputs are a
model's output classes, which module paths an override names, and the NaN fallback's warning.

Like the rest of the runtime these definitions reach a converted file as copies or through the
runtime module beside it. They import what they use inside the functions, so copying them adds
no import line to the file (the line would stay behind when `--policy fp32` strips the policy).
"""


def call_nested(policy, call, *args, **kwargs):
    """`call(*args, **kwargs)` with `policy.depth` one higher while it runs: a decorated module
    called inside it knows it is not the outermost one."""
    policy.depth += 1
    try:
        return call(*args, **kwargs)
    finally:
        policy.depth -= 1


def is_output_class(value):
    """A dict subclass the frameworks' tree utilities do not know: a model's output class
    (diffusers' `BaseOutput`, transformers' `ModelOutput`), to be walked item by item instead of
    passed whole as one leaf."""
    from collections import OrderedDict, defaultdict

    return isinstance(value, dict) and type(value) not in (dict, OrderedDict, defaultdict)


def map_output_class(walk, f, value):
    """A copy of the output class `value` with `walk(f, item)` for every item."""
    import copy

    new = copy.copy(value)
    for key, item in value.items():
        new[key] = walk(f, item)
    return new


def path_matches(path, patterns):
    """Whether a module path (`layer1.0.conv1`) matches one of the override globs."""
    import fnmatch

    return any(fnmatch.fnmatchcase(path, pattern) for pattern in patterns)


def warn_recompute(policy_name, model):
    """The NaN fallback's one warning: `model` computed a non-finite output under the policy."""
    import logging

    logging.getLogger("ptranspile").warning(
        "%s: non-finite output under policy %s; recomputing in float32", type(model).__name__, policy_name
    )

"""Precision policies on Keras 3 code at run time: what a policy's generated block binds.

Two policy passes write Keras code (precision/passes/): `keras.py` on Keras code people wrote
(`KerasPolicy`: layer dtype policies after `__init__`, output casts, path overrides, the NaN
fallback), and `keras_torch.py` on torch models converted to Keras (`TorchAutocastPolicy`: the
policy as torch runs it, `model.to(param)` plus `torch.autocast`). The file's generated block holds
only what is the file's own, the `_PTRANSPILE_*` dtype-policy names its layer calls pass and
bindings such as

    _ptranspile_policy = KerasPolicy("mixed", output="float32")
    _ptranspile_layer = _ptranspile_policy.layer

and the definitions here reach the file as every runtime definition does (copied in, or imported
from the runtime module beside it). They import what they use inside the functions, so copying
them adds no import line that `--policy fp32` (which strips the block) would leave behind.
"""

from precision_transpiler.runtime.device import pick_compute_dtype
from precision_transpiler.runtime.policy import (
    call_nested,
    is_output_class,
    map_output_class,
    path_matches,
    warn_recompute,
)


def device_compute_dtype(requested):
    """`--device auto`: the compute dtype name for a policy asking for `requested`, on the Keras
    backend's device: TensorFlow's GPUs have bfloat16 from compute capability 8.0; the JAX and
    torch backends are asked the same way their frameworks are (runtime/device.py)."""
    import keras

    backend = keras.backend.backend()
    where, gpu_bf16 = "cpu", False
    if backend == "tensorflow":
        import tensorflow as tf

        gpus = tf.config.list_physical_devices("GPU")
        if tf.config.list_logical_devices("TPU"):
            where = "tpu"
        elif gpus:
            where = "gpu"
            capability = tf.config.experimental.get_device_details(gpus[0]).get("compute_capability") or (0, 0)
            gpu_bf16 = tuple(capability) >= (8, 0)
    elif backend == "jax":
        import jax

        where = {"gpu": "gpu", "tpu": "tpu"}.get(jax.default_backend(), "cpu")
        capability = str(getattr(jax.devices()[0], "compute_capability", "0") or "0")
        gpu_bf16 = where == "gpu" and float(capability.split(".")[0] or 0) >= 8
    elif backend == "torch":
        import torch

        if torch.cuda.is_available():
            where, gpu_bf16 = "gpu", torch.cuda.is_bf16_supported()
    return pick_compute_dtype("keras", requested, where, gpu_bf16)


def mixed_policy_name(compute):
    """The Keras dtype policy with float32 variables computing in `compute` (a dtype decided
    where the code runs): "mixed_bfloat16", or "float32"."""
    return "float32" if compute == "float32" else "mixed_" + compute


def is_floating(t):
    import keras

    return hasattr(t, "dtype") and keras.backend.is_float_dtype(keras.backend.standardize_dtype(t.dtype))


def map_structure(f, value):
    """keras.tree.map_structure(f, value), also into the dict subclasses it takes for one leaf (a
    model's output class: diffusers' `BaseOutput`), item by item in a copy."""
    import keras

    def one(t):
        return map_output_class(map_structure, f, t) if is_output_class(t) else f(t)

    return keras.tree.map_structure(one, value)


def cast_floating(value, dtype):
    """Cast the floating tensors in a (nested) value to `dtype`."""
    import keras

    def cast(t):
        if is_floating(t) and keras.backend.standardize_dtype(t.dtype) != dtype:
            return keras.ops.cast(t, dtype)
        return t

    return map_structure(cast, value)


def first_floating_dtype(args, kwargs):
    """The dtype of the first floating tensor among a call's arguments (None: there is none)."""
    import keras

    first = next((t for t in keras.tree.flatten((args, kwargs)) if is_floating(t)), None)
    return None if first is None else keras.backend.standardize_dtype(first.dtype)


def fp32_cast(x):
    """fp32 island for a functional op of Keras code the policy keeps in float32."""
    import keras

    return keras.ops.cast(x, "float32")


def fp32_island(x):
    """fp32 island for a functional op of converted torch code: its floating tensors in float32."""
    return cast_floating(x, "float32")


def autocast_matmul(a, b):
    """`a @ b` of the converted code, as an op an autocast region calls."""
    import keras

    return keras.ops.matmul(a, b)


def all_finite(value):
    """False only for a concrete floating output holding inf/nan: symbolic tensors (functional
    construction, tf.function, jax.jit) are not checked."""
    import keras

    leaves = []
    map_structure(leaves.append, value)
    leaves = [t for t in leaves if is_floating(t)]
    if any(isinstance(t, keras.KerasTensor) for t in leaves):
        return True
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        if not tf.executing_eagerly():
            return True
    try:
        return all(bool(keras.ops.all(keras.ops.isfinite(t))) for t in leaves)
    except TypeError:  # a tracer that cannot be read (jax.jit)
        return True


def recompute_fp32(policy, call, model, args, kwargs):
    """Run `call` (the model's, bound) again with every layer of `model` computing in float32,
    then restore them; `policy.depth` marks the run as inside the outermost call."""
    import keras

    warn_recompute(policy.name, model)
    saved = [(layer, layer._dtype_policy) for layer in model._flatten_layers()]
    fp32 = keras.dtype_policies.get("float32")
    policy.depth += 1
    try:
        for layer, _ in saved:
            object.__setattr__(layer, "_dtype_policy", fp32)
        args, kwargs = cast_floating((args, kwargs), "float32")
        return cast_floating(call(*args, **kwargs), "float32")
    finally:
        policy.depth -= 1
        for layer, dtype_policy in saved:
            object.__setattr__(layer, "_dtype_policy", dtype_policy)


def with_signature(wrapper, wrapped):
    """Keras reads a constructor's arguments with inspect.getfullargspec (auto get_config), which
    does not follow __wrapped__ but does read __signature__."""
    import inspect

    wrapper.__signature__ = inspect.signature(wrapped)
    return wrapper


class KerasPolicy:
    """One Keras file's policy (precision/passes/keras.py): output activations of functional
    models, subclassed layers' dtype policies after `__init__` (`layer(dtype)`), float32 island
    results back in a layer's compute dtype (`compute`), the NaN fallback (`model`). (`path:`
    overrides: Fp32Paths.)"""

    def __init__(self, name, output, nan_fallback=False):
        self.name = name
        self.output = output
        self.nan_fallback = nan_fallback
        self.depth = 0  # > 0 while the outermost model call runs
        self.initializing = set()  # ids of the layers whose outermost __init__ is running

    def output_activation(self, outputs):
        """Model outputs in the output dtype (a linear Activation, as the Keras guide does)."""
        import keras

        return keras.tree.map_structure(lambda t: keras.layers.Activation("linear", dtype=self.output)(t), outputs)

    def compute(self, value, layer):
        """A float32 island's result inside a subclassed layer, in the layer's compute dtype:
        TensorFlow refuses `bfloat16 + float32` where Keras' functional graph would promote."""
        return cast_floating(value, layer.compute_dtype)

    def set_policy(self, layer, dtype, explicit):
        """After the outermost `__init__` of a subclassed layer: the dtype policy `dtype`, unless
        the caller passed `dtype=` or the layer chose a policy itself. A layer left computing in
        float32 (explicitly or by a class override) computes everything inside it in float32 too."""
        import keras

        if not explicit and layer.dtype_policy.name == keras.config.dtype_policy().name:
            policy = keras.dtype_policies.get(dtype)
            own = [*getattr(layer, "_trainable_variables", []), *getattr(layer, "_non_trainable_variables", [])]
            if policy.compute_dtype != "float32" and any(v.dtype != policy.variable_dtype for v in own):
                dtype = "mixed_" + policy.compute_dtype  # weights made in __init__ stay float32: autocast them
            layer.dtype_policy = dtype
        if layer.compute_dtype == "float32":
            for sub in layer._flatten_layers(include_self=False):
                sub.dtype_policy = "float32"

    def outermost(self, call, model, args, kwargs, output):
        """The outermost model call: floating outputs in `output` (None: as computed); with the
        NaN fallback, a non-finite result (eager only) is computed again in float32."""
        if self.depth:
            return call(*args, **kwargs)
        out = call_nested(self, call, *args, **kwargs)
        if output is not None:
            out = cast_floating(out, output)
        if self.nan_fallback and not all_finite(out):
            return recompute_fp32(self, call, model, args, kwargs)
        return out

    def layer(self, dtype):
        """Class decorator for a subclassed Layer or Model: the dtype policy `dtype` after its
        `__init__` (see set_policy); a Model's outermost call returns its floating outputs in the
        policy's output dtype."""
        import functools

        import keras

        policy = self

        def decorate(cls):
            init = cls.__init__

            @functools.wraps(init)
            def __init__(self, *args, **kwargs):
                if id(self) in policy.initializing:  # a base class's __init__ (super().__init__)
                    return init(self, *args, **kwargs)
                policy.initializing.add(id(self))
                try:
                    init(self, *args, **kwargs)
                finally:
                    policy.initializing.discard(id(self))
                policy.set_policy(self, dtype, "dtype" in kwargs)

            cls.__init__ = with_signature(__init__, init)
            call = cls.__call__
            if issubclass(cls, keras.Model):

                @functools.wraps(call)
                def __call__(self, *args, **kwargs):
                    return policy.outermost(functools.partial(call, self), self, args, kwargs, policy.output)

                cls.__call__ = __call__
            elif keras.dtype_policies.get(dtype).compute_dtype == "float32":

                @functools.wraps(call)
                def __call__(self, *args, **kwargs):
                    # a float32 island (class override): results in the dtype it was given, so that
                    # the caller's own arithmetic (`x + self.block(x)`) sees one dtype
                    first = first_floating_dtype(args, kwargs)
                    out = call(self, *args, **kwargs)
                    return out if first is None else cast_floating(out, first)

                cls.__call__ = __call__
            return cls

        return decorate

    def model(self, model):
        """NaN fallback for a functional or Sequential model: its outermost call is checked."""
        import functools

        call = model.call

        @functools.wraps(call)
        def run(*args, **kwargs):
            return self.outermost(call, model, args, kwargs, None)

        object.__setattr__(model, "call", run)
        return model


class Fp32Paths:
    """`path:` overrides with compute float32 on Keras code (precision/passes/keras.py): the
    model built by `keras.Model(...)`/`keras.Sequential(...)` goes through the object, and `call`
    of subclassed layers through `on_call`; when the model is built or first called, the layers
    whose path (`layers.3`, `blocks.0.attn`: the scheme `ptranspile verify` reports) or name
    matches one of `patterns` get the float32 dtype policy, which Keras reads at every call."""

    def __init__(self, patterns):
        self.patterns = tuple(patterns)

    def __call__(self, model):
        """The layers whose path (relative to `model`) or name matches, and their sublayers,
        get the float32 dtype policy. Applied once, from the outermost model; its sublayers are
        marked as done too."""
        import keras

        if not isinstance(model, keras.layers.Layer) or getattr(model, "_ptranspile_paths_done", False):
            return model
        object.__setattr__(model, "_ptranspile_paths_done", True)
        seen = {id(model)}
        stack = [("", model, False)]
        while stack:
            prefix, layer, inside = stack.pop(0)
            children = []
            for step, sub in sublayers(layer):
                if id(sub) in seen:
                    continue
                seen.add(id(sub))
                path = f"{prefix}.{step}" if prefix else step
                fp32 = inside or path_matches(path, self.patterns) or path_matches(sub.name, self.patterns)
                if fp32:
                    sub.dtype_policy = "float32"
                object.__setattr__(sub, "_ptranspile_paths_done", True)
                children.append((path, sub, fp32))
            stack[0:0] = children
        return model

    def on_call(self, call):
        """Apply the path overrides when a subclassed model is first called."""
        import functools

        @functools.wraps(call)
        def run(layer, *args, **kwargs):
            self(layer)
            return call(layer, *args, **kwargs)

        return run


def sublayers(layer):
    """(path step, sublayer): `layers.<i>` in functional and Sequential models, attribute names
    (public ones first) elsewhere."""
    import keras

    if isinstance(layer, keras.Sequential) or hasattr(layer, "_nodes_by_depth"):
        return [(f"layers.{i}", sub) for i, sub in enumerate(layer.layers)]
    found = []
    internal = ("_layers", "_functional", "_operations", "_tracker")
    for private in (False, True):
        for name, value in list(vars(layer).items()):
            if name.startswith("_") != private or name in internal or name.startswith("_self_"):
                continue
            if isinstance(value, keras.layers.Layer):
                found.append((name, value))
            elif isinstance(value, list | tuple | dict):
                items = value.items() if isinstance(value, dict) else enumerate(value)
                found += [(f"{name}.{k}", v) for k, v in items if isinstance(v, keras.layers.Layer)]
    return found


class TorchAutocastPolicy:
    """One converted torch model's policy, as torch runs it (precision/passes/keras_torch.py):
    the model in `base` (model.to), layers of the policy's low-precision classes in autocast
    regions computing in their dtype policy's compute dtype (`layer_dtypes`: layer class name ->
    dtype policy, for layers the converter did not see being built), float32 islands, outputs in
    `output`, `path:` overrides (`fp32_paths`, torch module paths) in float32."""

    def __init__(self, name, base, compute, output, layer_dtypes=None, fp32_paths=(), nan_fallback=False):
        self.name = name
        self.base = base
        self.compute = compute
        self.output = output
        self.layer_dtypes = layer_dtypes or {}
        self.fp32_paths = tuple(fp32_paths)
        self.nan_fallback = nan_fallback
        self.depth = 0  # > 0 while the outermost model call runs
        self.init = 0  # > 0 while the __init__ of a converted module runs

    def base_cast(self, x):
        """A float32 island's result back in the model's dtype."""
        return cast_floating(x, self.base)

    def autocast(self, op, *args, **kwargs):
        """torch.autocast for one functional op: floating inputs in the compute dtype, floating
        results back in the dtype of the first floating input."""
        dtype = first_floating_dtype(args, kwargs)
        out = op(*cast_floating(args, self.compute), **cast_floating(kwargs, self.compute))
        return out if dtype is None else cast_floating(out, dtype)

    def apply(self, model):
        """Give every layer of `model` its dtype policy: the table's for layers of its classes
        (unless the code gave one), float32 under fp32 path overrides (paths relative to `model`),
        the base dtype elsewhere; layers computing in another dtype than the model become
        autocast regions."""
        import keras

        global_policy = keras.config.dtype_policy().name
        fp32_inside = []
        for path, layer in named_layers(model):
            fp32 = any(path == p or path.startswith(p + ".") for p in fp32_inside) or path_matches(
                path, self.fp32_paths
            )
            if fp32:
                fp32_inside.append(path)
                name = "float32"
            else:
                table = self.layer_dtypes
                name = next((table[c.__name__] for c in type(layer).__mro__ if c.__name__ in table), None)
                if name is None:
                    name = self.base
                elif layer.dtype_policy.name not in (global_policy, "float32"):
                    name = layer.dtype_policy.name  # the code gave this layer its dtype
            if layer.dtype_policy.name != name:
                layer.dtype_policy = layer_dtype_policy(layer, name)
            if keras.dtype_policies.get(name).compute_dtype != self.base:
                autocast_region(layer)

    def module(self, cls):
        """Class decorator for a converted torch module: when the outermost `__init__` of
        converted modules ends (not those of submodules it builds, nor super().__init__) the
        policy reaches every layer of the module; its first outermost call applies it again
        (layers set since: `model.fc = ...`, a module built apart and passed in); its outermost
        calls return floating outputs in the policy's output dtype."""
        import functools

        import keras

        if not issubclass(cls, keras.layers.Layer):  # a class deriving from a library counterpart (ModelOutput)
            return cls
        policy = self
        init = cls.__init__

        @functools.wraps(init)
        def __init__(self, *args, **kwargs):
            policy.init += 1
            try:
                init(self, *args, **kwargs)
            finally:
                policy.init -= 1
            if not policy.init:
                policy.apply(self)

        cls.__init__ = with_signature(__init__, init)
        call = cls.__call__

        @functools.wraps(call)
        def __call__(self, *args, **kwargs):
            if policy.depth:
                return call(self, *args, **kwargs)
            if not getattr(self, "_ptranspile_called", False):  # layers set after __init__ (`model.fc = ...`)
                object.__setattr__(self, "_ptranspile_called", True)
                policy.apply(self)
            out = cast_floating(call_nested(policy, call, self, *args, **kwargs), policy.output)
            if policy.nan_fallback and not all_finite(out):
                return recompute_fp32(policy, functools.partial(call, self), self, args, kwargs)
            return out

        cls.__call__ = __call__
        return cls


def autocast_region(layer):
    """Make `layer` an autocast region: its floating inputs in its compute dtype, its floating
    results back in the dtype of its first floating input. Keras would cast the inputs itself
    (and lose the input's dtype), so that is turned off for this layer."""
    import functools

    if getattr(layer, "_ptranspile_region", False):
        return
    call = layer.call

    @functools.wraps(call)
    def run(*args, **kwargs):
        dtype = first_floating_dtype(args, kwargs)
        compute = layer.compute_dtype
        out = call(*cast_floating(args, compute), **cast_floating(kwargs, compute))
        return out if dtype is None else cast_floating(out, dtype)

    object.__setattr__(layer, "call", run)
    object.__setattr__(layer, "_convert_input_args", False)
    object.__setattr__(layer, "_ptranspile_region", True)


def layer_dtype_policy(layer, name):
    """`name`, or its "mixed_" form where the layer's variables were already made in float32 (a
    layer built before the policy reached it): Keras then casts them when the layer reads them."""
    import keras

    policy = keras.dtype_policies.get(name)
    own = [*getattr(layer, "_trainable_variables", []), *getattr(layer, "_non_trainable_variables", [])]
    if policy.compute_dtype != "float32" and any(v.dtype != policy.compute_dtype for v in own):
        return "mixed_" + policy.compute_dtype
    return name


def named_layers(model):
    """(torch module path, layer) for the model and everything in it."""
    walk = getattr(model, "named_modules", None)
    named = list(walk()) if callable(walk) else [("", model)]
    seen = {id(layer) for _, layer in named}
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if id(layer) not in seen:  # a layer the torch-style walk does not name (Keras bookkeeping)
            seen.add(id(layer))
            named.append((layer.name, layer))
    return named

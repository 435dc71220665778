"""Keras 3 counterparts of the Hugging Face transformers infrastructure that model files import.

The Keras twin of runtime/flax/transformers.py (read its docstring for why these names are redirected
rather than converted): `mappings/layers/transformers.yaml` points `PreTrainedModel`,
`ModelOutput`, `ACT2FN`, the KV caches and the mask builders here for `--to tf`, and the model
code itself (BertLayer, GPT2Attention, ...) is converted to `TorchModule` subclasses
(runtime/keras/modules.py) built from the torch-semantics layers of this runtime. Each definition keeps
the transformers behaviour the model code relies on (and only that):

- `PreTrainedModel` is a `TorchModule` (a `keras.layers.Layer` with torch's module methods);
  `__init__` stores the config and picks the "eager" attention implementation unless the config
  names one; `post_init` ties the output embeddings to the input embeddings when
  `config.tie_word_embeddings` says so. Tying shares the one Keras variable (`TiedLinear`), as
  torch shares the Parameter: the state_dict's `lm_head.weight` and `transformer.wte.weight`
  then both name it (precision_transpiler/weights/torch_to_keras.py assigns it twice, harmlessly),
  and the untied `Linear` is untracked so that no orphan weight is left in `model.weights`.
- `dtype` is Keras' own `Layer.dtype` (the variable dtype's name, "float32"), which is what
  transformers' `PreTrainedModel.dtype` (the parameters' dtype) means; converted code takes dtype
  names wherever it takes dtypes.
- Masks are additive float masks (0 where attention is allowed, the dtype's minimum elsewhere),
  as transformers' eager paths use them, and always materialised ("all ones -> None" would be a
  data-dependent branch under `tf.function`; adding zeros changes nothing).
- `ModelOutput` is an ordered dict with attribute access and tuple indexing, as in transformers;
  every subclass is registered with `keras.tree`, so `keras.tree.flatten(model(x))` and the
  `tree.map_structure` calls of Keras' `Layer.__call__` see its tensors (the verifier reads it as
  a dict).
- `DynamicCache` is a plain per-layer concatenating cache: enough for `use_cache=True` eagerly.

Like every runtime module, each top-level definition is copied into the converted file on its own
(precision_transpiler/convert/vendor.py), with the helpers it names: only keras, numpy and the
standard library at module level, plus the runtime imports (`TorchModule`) that the vendoring follows
(Keras' private tree registry is imported inside the one function that uses it).
"""

import collections
import dataclasses
import math
from typing import Any

import keras
import numpy as np
from keras import ops

from precision_transpiler.runtime.common import Cache
from precision_transpiler.runtime.keras.modules import TorchModule


def _register_keras_tree_node(cls: type) -> None:
    """Make `keras.tree` (optree or dm-tree, private registries in Keras 3.0-3.15) traverse `cls`
    through its `tree_flatten`/`tree_unflatten`. Best effort: without it a ModelOutput is a leaf
    of Keras' trees, which only `keras.tree` users notice (the verifier reads it as a dict)."""
    import contextlib

    try:
        from keras.src.tree import tree_api
    except ImportError:  # pragma: no cover - a Keras without that module
        return
    with contextlib.suppress(ValueError, TypeError):  # already registered
        tree_api.register_tree_node_class(cls)


class ModelOutput(collections.OrderedDict):
    """transformers' ModelOutput: a dataclass that is also an ordered dict of its non-None fields,
    indexable by name or position (`outputs[0]`, `outputs["last_hidden_state"]`)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _register_keras_tree_node(cls)

    def tree_flatten(self) -> tuple[tuple[Any, ...], tuple[str, ...], tuple[str, ...]]:
        """keras.tree's view: the non-None field values, keyed by field name."""
        keys = tuple(self.keys())
        return tuple(self.values()), keys, keys

    @classmethod
    def tree_unflatten(cls, keys: Any, values: Any) -> "ModelOutput":
        return cls(**dict(zip(keys, values, strict=True)))

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is not None:
                super().__setitem__(field.name, value)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return dict(self.items())[key]
        return self.to_tuple()[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self.keys() and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def to_tuple(self) -> tuple[Any, ...]:
        return tuple(self[k] for k in self.keys())


class TiedLinear(keras.layers.Layer):
    """An output projection that shares the input embedding table (`lm_head.weight is
    wte.weight` in torch). `weight` is the embedding's own variable, shape (vocab, hidden) as
    torch's tied weight, so loading either torch key fills the one shared table."""

    def __init__(self, embedding: Any, bias: Any = None, **kwargs: Any) -> None:
        super().__init__(dtype=embedding.dtype_policy, **kwargs)
        self.weight = embedding.weight
        self.bias = bias
        self.in_features = int(self.weight.shape[1])
        self.out_features = int(self.weight.shape[0])
        self.built = True

    def call(self, input: Any) -> Any:
        dt = self.compute_dtype
        out = ops.matmul(ops.cast(input, dt), ops.transpose(ops.cast(self.weight, dt)))
        return out if self.bias is None else out + ops.cast(self.bias, dt)


def _dtype_min(dtype: Any) -> float:
    """torch.finfo(dtype).min for a Keras, TensorFlow or numpy dtype (bfloat16 included, which
    numpy's finfo does not know)."""
    name = keras.backend.standardize_dtype(dtype)
    if name == "bfloat16":
        return -3.3895313892515355e38
    return float(np.finfo(name).min)


def _additive_mask(allowed: Any, dtype: Any) -> Any:
    """1/0 (or bool) `allowed` -> 0 where allowed, the dtype's minimum elsewhere, in `dtype`."""
    allowed = ops.cast(allowed, dtype)
    return (1.0 - allowed) * ops.cast(_dtype_min(dtype), dtype)


# Keras' own bookkeeping attributes of a layer (the tracker's stores): not torch attributes.
_KERAS_STORES = frozenset(
    {
        "_tracker",
        "_layers",
        "_trainable_variables",
        "_non_trainable_variables",
        "_metrics",
        "_seed_generators",
        "_functional",
        "_operations",
    }
)


def _attribute_ids(layer: Any) -> set[int]:
    """ids of everything a layer's attributes hold (through lists, tuples and dicts)."""
    found: set[int] = set()
    stack = [value for name, value in vars(layer).items() if name not in _KERAS_STORES]
    while stack:
        value = stack.pop()
        if isinstance(value, list | tuple):
            stack.extend(value)
        elif isinstance(value, dict):
            stack.extend(value.values())
        else:
            found.add(id(value))
    return found


def _untrack_replaced(model: Any) -> None:
    """Untrack the layers and variables no attribute holds any more.

    torch forgets a submodule or Parameter when its attribute is assigned again
    (RobertaEmbeddings assigns `self.position_embeddings` twice; BartEncoder sets
    `self.embed_tokens.weight = shared.weight`); Keras' tracker keeps the old one, which would
    stay in `model.weights` as a weight with no torch key (and no gradient)."""
    for layer in list(model._flatten_layers(include_self=True, recursive=True)):
        tracker = getattr(layer, "_tracker", None)
        if tracker is None:
            continue
        held = _attribute_ids(layer)
        for store in ("layers", "trainable_variables", "non_trainable_variables"):
            entry = tracker.config.get(store)
            for item in list(entry[1]) if entry is not None else []:
                if id(item) not in held:
                    tracker.untrack(item)


class PreTrainedModel(TorchModule):
    """transformers' PreTrainedModel, as far as model code uses it: `self.config`, `post_init()`
    (weight tying), `get_extended_attention_mask`, `invert_attention_mask`, `get_head_mask`,
    `device` and the input/output embedding accessors."""

    config_class = None
    base_model_prefix = ""
    main_input_name = "input_ids"
    supports_gradient_checkpointing = False
    _tied_weights_keys = None

    def __init__(self, config: Any, *inputs: Any, **kwargs: Any) -> None:
        super().__init__()
        if getattr(config, "_attn_implementation_internal", "eager") is None:
            config._attn_implementation_internal = "eager"
        self.config = config
        self.name_or_path = getattr(config, "name_or_path", "")
        self.gradient_checkpointing = False

    def post_init(self) -> None:
        """The end of every transformers model's `__init__`: tie the embeddings, and drop from
        Keras' tracking what the constructor replaced (see `_untrack_replaced`)."""
        self.tie_weights()
        _untrack_replaced(self)

    def tie_weights(self) -> None:
        config = self.config
        if hasattr(config, "get_text_config"):
            config = config.get_text_config(decoder=True)
        if not getattr(config, "tie_word_embeddings", True):
            return
        output = self.get_output_embeddings()
        if output is None or isinstance(output, TiedLinear):
            return
        embedding = self.get_input_embeddings()
        for name, value in list(vars(self).items()):
            if value is output:
                setattr(self, name, TiedLinear(embedding, getattr(output, "bias", None)))
        _untrack_replaced(self)  # the untied Linear and its weight

    def get_input_embeddings(self) -> Any:
        name = getattr(self, "_input_embed_layer", "embed_tokens")
        if getattr(self, name, None) is not None:
            return getattr(self, name)
        base = getattr(self, self.base_model_prefix, None) if self.base_model_prefix else None
        if base is not None and base is not self:
            return base.get_input_embeddings()
        raise NotImplementedError(f"{type(self).__name__} does not define get_input_embeddings")

    def get_output_embeddings(self) -> Any:
        if not hasattr(self, "lm_head"):
            return None
        try:
            self.get_input_embeddings()
        except NotImplementedError:
            return None
        return self.lm_head

    @property
    def device(self) -> Any:
        return None

    def warn_if_padding_and_no_attention_mask(self, input_ids: Any, attention_mask: Any) -> None:
        pass

    def get_extended_attention_mask(
        self, attention_mask: Any, input_shape: Any, device: Any = None, dtype: Any = None
    ) -> Any:
        """(batch, [from,] to) 1/0 mask -> additive (batch, 1, from|1, to) mask; causal on top
        for decoders, as transformers builds it."""
        dtype = self.dtype if dtype is None else dtype
        attention_mask = ops.convert_to_tensor(attention_mask)
        if len(attention_mask.shape) == 3:
            extended = attention_mask[:, None, :, :]
        elif len(attention_mask.shape) == 2:
            if getattr(self.config, "is_decoder", False):
                seq = input_shape[1]
                causal = ops.tril(ops.ones((seq, seq), attention_mask.dtype))
                prefix = attention_mask.shape[1] - seq
                if prefix > 0:
                    causal = ops.concatenate([ops.ones((seq, prefix), causal.dtype), causal], axis=-1)
                extended = causal[None, None, :, :] * attention_mask[:, None, None, :]
            else:
                extended = attention_mask[:, None, None, :]
        else:
            raise ValueError(f"Wrong shape for input_ids (shape {input_shape}) or attention_mask")
        return _additive_mask(extended, dtype)

    def invert_attention_mask(self, encoder_attention_mask: Any) -> Any:
        mask = ops.convert_to_tensor(encoder_attention_mask)
        mask = mask[:, None, :, :] if len(mask.shape) == 3 else mask[:, None, None, :]
        return _additive_mask(mask, self.dtype)

    def get_head_mask(self, head_mask: Any, num_hidden_layers: int, is_attention_chunked: bool = False) -> Any:
        if head_mask is None:
            return [None] * num_hidden_layers
        head_mask = ops.convert_to_tensor(head_mask)
        if len(head_mask.shape) == 1:
            head_mask = head_mask[None, None, :, None, None]
            head_mask = ops.broadcast_to(head_mask, (num_hidden_layers, *head_mask.shape[1:]))
        elif len(head_mask.shape) == 2:
            head_mask = head_mask[:, None, :, None, None]
        head_mask = ops.cast(head_mask, self.dtype)
        if is_attention_chunked:
            head_mask = head_mask[..., None]
        return head_mask


def _transformers_activation(name: str) -> Any:
    """transformers' activation `name` with torch's semantics (exact-erf "gelu", tanh "gelu_new")."""
    table = {
        "gelu": lambda x: ops.gelu(x, approximate=False),
        "gelu_new": lambda x: ops.gelu(x, approximate=True),
        "gelu_pytorch_tanh": lambda x: ops.gelu(x, approximate=True),
        "gelu_fast": lambda x: ops.gelu(x, approximate=True),
        "quick_gelu": lambda x: x * ops.sigmoid(1.702 * x),
        "relu": ops.relu,
        "relu6": ops.relu6,
        "leaky_relu": lambda x: ops.leaky_relu(x, 0.01),
        "silu": ops.silu,
        "swish": ops.silu,
        "mish": lambda x: x * ops.tanh(ops.softplus(x)),
        "tanh": ops.tanh,
        "sigmoid": ops.sigmoid,
        "linear": lambda x: x,
    }
    if name not in table:
        raise KeyError(f"activation {name!r} is not converted; known: {', '.join(sorted(table))}")
    return table[name]


class _Activations(dict):
    """ACT2FN's lookup: a name -> activation function mapping built on demand."""

    def __getitem__(self, name: str) -> Any:
        return _transformers_activation(name)

    def __contains__(self, name: object) -> bool:
        try:
            _transformers_activation(str(name))
        except KeyError:
            return False
        return True


ACT2FN = _Activations()


def get_activation(name: str) -> Any:
    """transformers' get_activation: the activation function called `name`."""
    return _transformers_activation(name)


class DynamicCache(Cache):
    """transformers' DynamicCache, eagerly: per layer, keys and values concatenated along the
    sequence axis as `update` is called."""

    def __init__(self, *args: Any, config: Any = None, **kwargs: Any) -> None:
        self.keys: list[Any] = []
        self.values: list[Any] = []

    def update(self, key_states: Any, value_states: Any, layer_idx: int, cache_kwargs: Any = None) -> tuple[Any, Any]:
        while len(self.keys) <= layer_idx:
            self.keys.append(None)
            self.values.append(None)
        if self.keys[layer_idx] is None:
            self.keys[layer_idx], self.values[layer_idx] = key_states, value_states
        else:
            self.keys[layer_idx] = ops.concatenate([self.keys[layer_idx], key_states], axis=-2)
            self.values[layer_idx] = ops.concatenate([self.values[layer_idx], value_states], axis=-2)
        return self.keys[layer_idx], self.values[layer_idx]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        if len(self.keys) <= layer_idx or self.keys[layer_idx] is None:
            return 0
        return self.keys[layer_idx].shape[-2]

    def __len__(self) -> int:
        return len(self.keys)

    @classmethod
    def from_legacy_cache(cls, past_key_values: Any = None) -> "DynamicCache":
        cache = cls()
        for index, (key, value) in enumerate(past_key_values or ()):
            cache.update(key, value, index)
        return cache

    def to_legacy_cache(self) -> tuple[tuple[Any, Any], ...]:
        return tuple(zip(self.keys, self.values, strict=True))


def _prepare_4d_attention_mask_for_sdpa(mask: Any, dtype: Any, tgt_len: Any = None) -> Any:
    """(batch, src) 1/0 mask -> additive (batch, 1, tgt, src) mask (materialised, see module doc)."""
    mask = ops.convert_to_tensor(mask)
    batch, src = ops.shape(mask)[0], mask.shape[1]
    tgt = src if tgt_len is None else tgt_len
    expanded = ops.broadcast_to(mask[:, None, None, :], (batch, 1, tgt, src))
    return _additive_mask(expanded, dtype)


_prepare_4d_attention_mask = _prepare_4d_attention_mask_for_sdpa  # the same mask: always materialised


def _causal_additive_mask(
    batch: Any,
    query_length: int,
    key_length: int,
    dtype: Any,
    attention_mask: Any = None,
    sliding_window: int | None = None,
) -> Any:
    """Additive (batch, 1, q, k) mask: causal (queries are the last `query_length` positions),
    within `sliding_window` positions back when given, and a (batch, k) 1/0 padding mask."""
    offset = key_length - query_length
    rows = np.arange(query_length)[:, None] + offset
    allowed = np.arange(key_length)[None, :] <= rows
    if sliding_window is not None:
        allowed = allowed & (np.arange(key_length)[None, :] > rows - sliding_window)
    allowed = ops.broadcast_to(ops.convert_to_tensor(allowed[None, None]), (batch, 1, query_length, key_length))
    if attention_mask is not None:
        padding = ops.cast(ops.convert_to_tensor(attention_mask)[:, None, None, :key_length], "bool")
        allowed = ops.logical_and(allowed, padding)
    return ops.where(allowed, ops.zeros((), dtype), ops.cast(_dtype_min(dtype), dtype))


def _prepare_4d_causal_attention_mask_for_sdpa(
    attention_mask: Any, input_shape: Any, inputs_embeds: Any, past_key_values_length: int
) -> Any:
    """transformers' causal mask for decoders with optional padding (additive, materialised)."""
    batch, query_length = input_shape[0], input_shape[-1]
    key_length = query_length + past_key_values_length
    return _causal_additive_mask(batch, query_length, key_length, inputs_embeds.dtype, attention_mask)


_prepare_4d_causal_attention_mask = _prepare_4d_causal_attention_mask_for_sdpa  # the same mask, materialised


def _model_mask(input_embeds: Any, attention_mask: Any, past_key_values: Any, sliding_window: Any = None) -> Any:
    """The (batch, 1, q, k) additive mask of a decoder call: a 4D mask passes through."""
    if attention_mask is not None and len(ops.shape(attention_mask)) == 4:
        return attention_mask
    batch, query_length = ops.shape(input_embeds)[0], input_embeds.shape[1]
    past = past_key_values.get_seq_length() if past_key_values is not None else 0
    key_length = past + query_length
    if attention_mask is not None:
        key_length = max(key_length, attention_mask.shape[-1])
    return _causal_additive_mask(batch, query_length, key_length, input_embeds.dtype, attention_mask, sliding_window)


def create_causal_mask(
    config: Any,
    input_embeds: Any,
    attention_mask: Any,
    cache_position: Any,
    past_key_values: Any,
    position_ids: Any = None,
    **kwargs: Any,
) -> Any:
    """transformers' masking_utils.create_causal_mask: an additive (batch, 1, q, k) causal mask
    with the padding of a 2D `attention_mask`; a 4D mask is passed through."""
    return _model_mask(input_embeds, attention_mask, past_key_values)


def create_sliding_window_causal_mask(
    config: Any,
    input_embeds: Any,
    attention_mask: Any,
    cache_position: Any,
    past_key_values: Any,
    position_ids: Any = None,
    **kwargs: Any,
) -> Any:
    """transformers' create_sliding_window_causal_mask: causal, and each query sees at most
    `config.sliding_window` positions back (Mistral); additive, materialised."""
    return _model_mask(input_embeds, attention_mask, past_key_values, getattr(config, "sliding_window", None))


def sdpa_attention_forward(
    module: Any,
    query: Any,
    key: Any,
    value: Any,
    attention_mask: Any,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[Any, None]:
    """transformers' sdpa attention interface on (batch, heads, seq, dim) inputs with an
    additive or boolean mask; returns (batch, seq, heads, dim) and no weights, as transformers.
    Scores and softmax in float32, as torch's math kernel for 16-bit inputs."""
    scale = 1.0 / math.sqrt(query.shape[-1]) if scaling is None else scaling
    if key.shape[1] != query.shape[1]:  # grouped-query attention: repeat the key/value heads
        key = ops.repeat(key, query.shape[1] // key.shape[1], axis=1)
        value = ops.repeat(value, query.shape[1] // value.shape[1], axis=1)
    scores = ops.cast(ops.matmul(query, ops.swapaxes(key, -1, -2)), "float32") * scale
    if attention_mask is not None:
        mask = ops.convert_to_tensor(attention_mask)[:, :, :, : key.shape[-2]]
        if keras.backend.standardize_dtype(mask.dtype) == "bool":
            scores = ops.where(mask, scores, _dtype_min("float32"))
        else:
            scores = scores + ops.cast(mask, "float32")
    elif is_causal if is_causal is not None else getattr(module, "is_causal", False):
        scores = scores + _causal_additive_mask(1, query.shape[-2], key.shape[-2], "float32")
    weights = ops.cast(ops.softmax(scores, axis=-1), value.dtype)
    out = ops.matmul(weights, value)
    return ops.swapaxes(out, 1, 2), None


ALL_ATTENTION_FUNCTIONS = {"sdpa": sdpa_attention_forward}


def _compute_default_rope_parameters(config: Any = None, device: Any = None, seq_len: Any = None) -> tuple[Any, float]:
    """transformers' default RoPE inverse frequencies (and attention factor 1.0), in float32 as
    torch computes them."""
    base = config.rope_theta
    partial_rotary_factor = getattr(config, "partial_rotary_factor", 1.0)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    dim = int(head_dim * partial_rotary_factor)
    exponent = ops.cast(ops.arange(0, dim, 2), "float32") / dim
    inv_freq = 1.0 / ops.power(ops.cast(base, "float32"), exponent)
    return inv_freq, 1.0


def _compute_linear_scaling_rope_parameters(
    config: Any = None, device: Any = None, seq_len: Any = None
) -> tuple[Any, float]:
    """transformers' linear RoPE scaling: the default frequencies divided by the factor."""
    inv_freq, attention_factor = _compute_default_rope_parameters(config, device, seq_len)
    return inv_freq / config.rope_scaling["factor"], attention_factor


# The RoPE types converted so far; others raise KeyError naming these.
ROPE_INIT_FUNCTIONS = {"default": _compute_default_rope_parameters, "linear": _compute_linear_scaling_rope_parameters}

"""Flax NNX counterparts of the Hugging Face transformers infrastructure that model files import.

A transformers model file (`modeling_bert.py`, `modeling_gpt2.py`) is model code on top of a
torch-only base: `PreTrainedModel` (config, `post_init`, weight tying, attention-mask helpers),
`ModelOutput` (the ordered-dict dataclass every forward returns), `ACT2FN`, the KV caches and the
mask builders. Converting those modules would drag in most of the library, so
`mappings/layers/transformers.yaml` points these names here instead. Each definition keeps the
transformers behaviour the model code relies on (and only that):

- `PreTrainedModel.__init__` stores the config and picks an attention implementation as
  transformers does ("eager" unless the config names one); `post_init` ties the output
  embeddings to the input embeddings when `config.tie_word_embeddings` says so, by sharing the
  embedding table (`TiedLinear`), as torch shares the Parameter.
- Masks are additive float masks (0 where attention is allowed, the dtype's minimum elsewhere),
  as transformers' eager paths use them. They are always materialised: "all ones -> None" is a
  data-dependent branch that cannot be taken under `jax.jit`, and adding zeros changes nothing.
- `ModelOutput` is a JAX pytree, so converted models can return it from `nnx.jit`.
- `DynamicCache` is a plain per-layer concatenating cache: enough for `use_cache=True` eagerly.

Like every runtime module, each top-level definition is copied into the converted file on its own
(with the helpers it names): only `jax`, `jax.numpy as jnp`, `nnx`, `collections`,
`dataclasses` and `math` imports.
"""

import collections
import dataclasses
import math

import jax
import jax.numpy as jnp
from flax import nnx

from precision_transpiler.runtime.common import Cache
from precision_transpiler.runtime.flax.layers import TorchLayer


class ModelOutput(collections.OrderedDict):
    """transformers' ModelOutput: a dataclass that is also an ordered dict of its non-None fields,
    indexable by name or position (`outputs[0]`, `outputs["last_hidden_state"]`)."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        jax.tree_util.register_pytree_with_keys(
            cls,
            lambda out: (tuple((jax.tree_util.DictKey(k), v) for k, v in out.items()), tuple(out.keys())),
            lambda keys, values: cls(**dict(zip(keys, values, strict=True))),
            lambda out: (tuple(out.values()), tuple(out.keys())),
        )

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is not None:
                super().__setitem__(field.name, value)

    def __getitem__(self, key):
        if isinstance(key, str):
            return dict(self.items())[key]
        return self.to_tuple()[key]

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def __setattr__(self, name, value):
        if name in self.keys() and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


class TiedLinear(TorchLayer):
    """An output projection that shares the input embedding table (`lm_head.weight is
    wte.weight` in torch). `weight` is the embedding's own Param, shape (vocab, hidden) as torch's
    tied weight, so loading either torch key fills the one shared table."""

    def __init__(self, embedding, bias=None, dtype=None):
        self.weight = embedding.embedding
        self.bias = bias
        self.dtype = dtype

    def __call__(self, x):
        weight = self.weight[...]
        if self.dtype is not None:
            x, weight = x.astype(self.dtype), weight.astype(self.dtype)
        out = jnp.matmul(x, weight.T)
        if self.bias is not None:
            out = out + self.bias[...].astype(out.dtype)
        return out


class PreTrainedModel(TorchLayer):
    """transformers' PreTrainedModel, as far as model code uses it: `self.config`, `post_init()`
    (weight tying), `get_extended_attention_mask`, `invert_attention_mask`, `get_head_mask`,
    `dtype` and the input/output embedding accessors."""

    config_class = None
    base_model_prefix = ""
    main_input_name = "input_ids"
    supports_gradient_checkpointing = False
    _tied_weights_keys = None

    def __init__(self, config, *inputs, **kwargs):
        if getattr(config, "_attn_implementation_internal", "eager") is None:
            config._attn_implementation_internal = "eager"
        self.config = config
        self.name_or_path = getattr(config, "name_or_path", "")
        self.gradient_checkpointing = False

    def post_init(self):
        self.tie_weights()

    def tie_weights(self):
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
                bias = getattr(output, "bias", None)
                setattr(self, name, TiedLinear(embedding, bias, getattr(output, "dtype", None)))

    def get_input_embeddings(self):
        name = getattr(self, "_input_embed_layer", "embed_tokens")
        if getattr(self, name, None) is not None:
            return getattr(self, name)
        base = getattr(self, self.base_model_prefix, None) if self.base_model_prefix else None
        if base is not None and base is not self:
            return base.get_input_embeddings()
        raise NotImplementedError(f"{type(self).__name__} does not define get_input_embeddings")

    def get_output_embeddings(self):
        if not hasattr(self, "lm_head"):
            return None
        try:
            self.get_input_embeddings()
        except NotImplementedError:
            return None
        return self.lm_head

    @property
    def dtype(self):
        for _, value in nnx.iter_graph(self):
            if isinstance(value, nnx.Param):
                return value[...].dtype
        return jnp.float32

    @property
    def device(self):
        return None

    def warn_if_padding_and_no_attention_mask(self, input_ids, attention_mask):
        pass

    def get_extended_attention_mask(self, attention_mask, input_shape, device=None, dtype=None):
        """(batch, [from,] to) 1/0 mask -> additive (batch, 1, from|1, to) mask; causal on top
        for decoders, as transformers builds it."""
        dtype = self.dtype if dtype is None else dtype
        attention_mask = jnp.asarray(attention_mask)
        if attention_mask.ndim == 3:
            extended = attention_mask[:, None, :, :]
        elif attention_mask.ndim == 2:
            if getattr(self.config, "is_decoder", False):
                seq = input_shape[1]
                causal = jnp.tril(jnp.ones((seq, seq), attention_mask.dtype))
                prefix = attention_mask.shape[1] - seq
                if prefix > 0:
                    causal = jnp.concatenate([jnp.ones((seq, prefix), causal.dtype), causal], axis=-1)
                extended = causal[None, None, :, :] * attention_mask[:, None, None, :]
            else:
                extended = attention_mask[:, None, None, :]
        else:
            raise ValueError(f"Wrong shape for input_ids (shape {input_shape}) or attention_mask")
        extended = extended.astype(dtype)
        return (1.0 - extended) * jnp.finfo(dtype).min

    def invert_attention_mask(self, encoder_attention_mask):
        mask = jnp.asarray(encoder_attention_mask)
        mask = mask[:, None, :, :] if mask.ndim == 3 else mask[:, None, None, :]
        mask = mask.astype(self.dtype)
        return (1.0 - mask) * jnp.finfo(self.dtype).min

    def get_head_mask(self, head_mask, num_hidden_layers, is_attention_chunked=False):
        if head_mask is None:
            return [None] * num_hidden_layers
        head_mask = jnp.asarray(head_mask)
        if head_mask.ndim == 1:
            head_mask = head_mask[None, None, :, None, None]
            head_mask = jnp.broadcast_to(head_mask, (num_hidden_layers, *head_mask.shape[1:]))
        elif head_mask.ndim == 2:
            head_mask = head_mask[:, None, :, None, None]
        head_mask = head_mask.astype(self.dtype)
        if is_attention_chunked:
            head_mask = head_mask[..., None]
        return head_mask


def _transformers_activation(name):
    table = {
        "gelu": lambda x: jax.nn.gelu(x, approximate=False),
        "gelu_new": lambda x: jax.nn.gelu(x, approximate=True),
        "gelu_pytorch_tanh": lambda x: jax.nn.gelu(x, approximate=True),
        "gelu_fast": lambda x: jax.nn.gelu(x, approximate=True),
        "quick_gelu": lambda x: x * jax.nn.sigmoid(1.702 * x),
        "relu": jax.nn.relu,
        "relu6": jax.nn.relu6,
        "leaky_relu": lambda x: jax.nn.leaky_relu(x, 0.01),
        "silu": jax.nn.silu,
        "swish": jax.nn.silu,
        "mish": lambda x: x * jnp.tanh(jax.nn.softplus(x)),
        "tanh": jnp.tanh,
        "sigmoid": jax.nn.sigmoid,
        "linear": lambda x: x,
    }
    if name not in table:
        raise KeyError(f"activation {name!r} is not converted; known: {', '.join(sorted(table))}")
    return table[name]


class _Activations(dict):
    def __getitem__(self, name):
        return _transformers_activation(name)

    def __contains__(self, name):
        try:
            _transformers_activation(name)
        except KeyError:
            return False
        return True


ACT2FN = _Activations()


def get_activation(name):
    """transformers' get_activation: the activation function called `name`."""
    return _transformers_activation(name)


class DynamicCache(Cache):
    """transformers' DynamicCache, eagerly: per layer, keys and values concatenated along the
    sequence axis as `update` is called."""

    def __init__(self, *args, config=None, **kwargs):
        self.keys = []
        self.values = []

    def update(self, key_states, value_states, layer_idx, cache_kwargs=None):
        while len(self.keys) <= layer_idx:
            self.keys.append(None)
            self.values.append(None)
        if self.keys[layer_idx] is None:
            self.keys[layer_idx], self.values[layer_idx] = key_states, value_states
        else:
            self.keys[layer_idx] = jnp.concatenate([self.keys[layer_idx], key_states], axis=-2)
            self.values[layer_idx] = jnp.concatenate([self.values[layer_idx], value_states], axis=-2)
        return self.keys[layer_idx], self.values[layer_idx]

    def get_seq_length(self, layer_idx=0):
        if len(self.keys) <= layer_idx or self.keys[layer_idx] is None:
            return 0
        return self.keys[layer_idx].shape[-2]

    def __len__(self):
        return len(self.keys)

    @classmethod
    def from_legacy_cache(cls, past_key_values=None):
        cache = cls()
        for index, (key, value) in enumerate(past_key_values or ()):
            cache.update(key, value, index)
        return cache

    def to_legacy_cache(self):
        return tuple(zip(self.keys, self.values, strict=True))


def _prepare_4d_attention_mask_for_sdpa(mask, dtype, tgt_len=None):
    """(batch, src) 1/0 mask -> additive (batch, 1, tgt, src) mask (materialised, see module doc)."""
    mask = jnp.asarray(mask)
    batch, src = mask.shape
    tgt = src if tgt_len is None else tgt_len
    expanded = jnp.broadcast_to(mask[:, None, None, :], (batch, 1, tgt, src)).astype(dtype)
    return (1.0 - expanded) * jnp.finfo(dtype).min


_prepare_4d_attention_mask = _prepare_4d_attention_mask_for_sdpa  # the same mask: always materialised


def _causal_additive_mask(batch, query_length, key_length, dtype, attention_mask=None, sliding_window=None):
    """Additive (batch, 1, q, k) mask: causal (queries are the last `query_length` positions),
    within `sliding_window` positions back when given, and a (batch, k) 1/0 padding mask."""
    offset = key_length - query_length
    rows = jnp.arange(query_length)[:, None] + offset
    allowed = jnp.arange(key_length)[None, :] <= rows
    if sliding_window is not None:
        allowed = allowed & (jnp.arange(key_length)[None, :] > rows - sliding_window)
    allowed = jnp.broadcast_to(allowed[None, None], (batch, 1, query_length, key_length))
    if attention_mask is not None:
        padding = jnp.asarray(attention_mask)[:, None, None, :key_length].astype(jnp.bool_)
        allowed = allowed & padding
    return jnp.where(allowed, jnp.zeros((), dtype), jnp.finfo(dtype).min)


def _prepare_4d_causal_attention_mask_for_sdpa(attention_mask, input_shape, inputs_embeds, past_key_values_length):
    """transformers' causal mask for decoders with optional padding (additive, materialised)."""
    batch, query_length = input_shape[0], input_shape[-1]
    key_length = query_length + past_key_values_length
    return _causal_additive_mask(batch, query_length, key_length, inputs_embeds.dtype, attention_mask)


_prepare_4d_causal_attention_mask = _prepare_4d_causal_attention_mask_for_sdpa  # the same mask, materialised


def _model_mask(input_embeds, attention_mask, past_key_values, sliding_window=None):
    """The (batch, 1, q, k) additive mask of a decoder call: a 4D mask passes through."""
    if attention_mask is not None and jnp.ndim(attention_mask) == 4:
        return attention_mask
    batch, query_length = input_embeds.shape[0], input_embeds.shape[1]
    past = past_key_values.get_seq_length() if past_key_values is not None else 0
    key_length = past + query_length
    if attention_mask is not None:
        key_length = max(key_length, jnp.shape(attention_mask)[-1])
    return _causal_additive_mask(batch, query_length, key_length, input_embeds.dtype, attention_mask, sliding_window)


def create_causal_mask(
    config, input_embeds, attention_mask, cache_position, past_key_values, position_ids=None, **kwargs
):
    """transformers' masking_utils.create_causal_mask: an additive (batch, 1, q, k) causal mask
    with the padding of a 2D `attention_mask`; a 4D mask is passed through."""
    return _model_mask(input_embeds, attention_mask, past_key_values)


def create_sliding_window_causal_mask(
    config, input_embeds, attention_mask, cache_position, past_key_values, position_ids=None, **kwargs
):
    """transformers' create_sliding_window_causal_mask: causal, and each query sees at most
    `config.sliding_window` positions back (Mistral); additive, materialised."""
    return _model_mask(input_embeds, attention_mask, past_key_values, getattr(config, "sliding_window", None))


def sdpa_attention_forward(
    module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None, **kwargs
):
    """transformers' sdpa attention interface on (batch, heads, seq, dim) inputs with an
    additive or boolean mask; returns (batch, seq, heads, dim) and no weights, as transformers."""
    scale = 1.0 / math.sqrt(query.shape[-1]) if scaling is None else scaling
    scores = jnp.matmul(query, jnp.swapaxes(key, -1, -2)).astype(jnp.float32) * scale
    if attention_mask is not None:
        mask = jnp.asarray(attention_mask)[:, :, :, : key.shape[-2]]
        if mask.dtype == jnp.bool_:
            scores = jnp.where(mask, scores, jnp.finfo(jnp.float32).min)
        else:
            scores = scores + mask.astype(jnp.float32)
    elif is_causal if is_causal is not None else getattr(module, "is_causal", False):
        scores = scores + _causal_additive_mask(1, query.shape[-2], key.shape[-2], jnp.float32)
    weights = jax.nn.softmax(scores, axis=-1).astype(value.dtype)
    out = jnp.matmul(weights, value)
    return jnp.swapaxes(out, 1, 2), None


ALL_ATTENTION_FUNCTIONS = {"sdpa": sdpa_attention_forward}


def _compute_default_rope_parameters(config=None, device=None, seq_len=None):
    """transformers' default RoPE inverse frequencies (and attention factor 1.0)."""
    base = config.rope_theta
    partial_rotary_factor = getattr(config, "partial_rotary_factor", 1.0)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    dim = int(head_dim * partial_rotary_factor)
    inv_freq = 1.0 / (base ** (jnp.arange(0, dim, 2).astype(jnp.float32) / dim))
    return inv_freq, 1.0


def _compute_linear_scaling_rope_parameters(config=None, device=None, seq_len=None):
    """transformers' linear RoPE scaling: the default frequencies divided by the factor."""
    inv_freq, attention_factor = _compute_default_rope_parameters(config, device, seq_len)
    return inv_freq / config.rope_scaling["factor"], attention_factor


# The RoPE types converted so far; others raise KeyError naming these.
ROPE_INIT_FUNCTIONS = {"default": _compute_default_rope_parameters, "linear": _compute_linear_scaling_rope_parameters}

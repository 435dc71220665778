"""torch's attention for Flax NNX: `scaled_dot_product_attention` (torch's mask polarity: True
attends), `MultiheadAttention` (sequence-first, packed `in_proj_weight`, torch's names) and its
functional form `multi_head_attention_forward` (the same computation, weights passed in).
"""

import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from precision_transpiler.runtime.flax.functional import (
    _dropout_apply,
    _promote,
    _rng_key,
    _stats_dtype,
    _uniform,
    linear,
)
from precision_transpiler.runtime.flax.layers import TorchLayer
from precision_transpiler.runtime.flax.rng import default_rngs


def _attention_mask_bias(mask: Any, dtype: Any) -> Any:
    """torch MultiheadAttention's `_canonical_mask`: bool True = blocked becomes -inf; float masks are added."""
    if mask is None:
        return None
    mask = jnp.asarray(mask)
    if mask.dtype == jnp.bool_:
        return jnp.where(mask, jnp.asarray(-jnp.inf, dtype), jnp.asarray(0, dtype))
    if not jnp.issubdtype(mask.dtype, jnp.floating):
        raise TypeError("only bool and floating types of masks are supported")
    return mask.astype(dtype)


def scaled_dot_product_attention(
    query: jax.Array,
    key: jax.Array,
    value: jax.Array,
    attn_mask: Any = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    *,
    rngs: Any = None,
) -> jax.Array:
    """torch.nn.functional.scaled_dot_product_attention on (..., heads, L, E) inputs.

    torch's polarity for THIS function: a bool mask is True where attention is allowed (the
    opposite of nn.MultiheadAttention's masks); a float mask is added to the scores. `is_causal`
    is a top-left aligned lower-triangular mask. Rows whose scores are all masked give 0 (torch's
    CPU kernels and safe softmax), not NaN. `enable_gqa` repeats key/value heads. Dropout on the
    attention weights needs `rngs` (torch draws from its global generator).
    """
    if is_causal and attn_mask is not None:
        raise ValueError("scaled_dot_product_attention: explicit attn_mask should not be set when is_causal=True")
    seq_q, seq_k = query.shape[-2], key.shape[-2]
    factor = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    if enable_gqa:
        key = jnp.repeat(key, query.shape[-3] // key.shape[-3], axis=-3)
        value = jnp.repeat(value, query.shape[-3] // value.shape[-3], axis=-3)
    out_dtype = jnp.result_type(query, key, value)
    sdt = _stats_dtype(out_dtype)
    scores = jnp.matmul(query, jnp.swapaxes(key, -2, -1)).astype(sdt) * factor
    neg_inf = jnp.asarray(-jnp.inf, sdt)
    if is_causal:
        scores = jnp.where(jnp.tril(jnp.ones((seq_q, seq_k), jnp.bool_)), scores, neg_inf)
    if attn_mask is not None:
        attn_mask = jnp.asarray(attn_mask)
        if attn_mask.dtype == jnp.bool_:
            scores = jnp.where(attn_mask, scores, neg_inf)
        else:
            scores = scores + attn_mask.astype(sdt)
    weights = jax.nn.softmax(scores, axis=-1)
    weights = jnp.where(jnp.all(scores == neg_inf, axis=-1, keepdims=True), jnp.zeros((), sdt), weights)
    if dropout_p > 0.0:
        weights = _dropout_apply(weights, dropout_p, _rng_key(rngs))
    return jnp.matmul(weights.astype(out_dtype), value)


def _multi_head_attention(
    query: Any,
    key: Any,
    value: Any,
    num_heads: int,
    projections: tuple[Any, Any, Any, Any, Any, Any],
    bias_k: Any,
    bias_v: Any,
    add_zero_attn: bool,
    out_proj: Any,
    key_padding_mask: Any,
    need_weights: bool,
    attn_mask: Any,
    average_attn_weights: bool,
    is_causal: bool,
    *,
    dropout_p: float,
    rngs: Any,
    batch_first: bool,
    dtype: Any,
    precision: Any,
    caller: str,
) -> tuple[jax.Array, jax.Array | None]:
    """What MultiheadAttention and `multi_head_attention_forward` both compute (torch's layer calls
    its functional form too), so the two cannot drift apart.

    `projections` is (wq, wk, wv, bq, bk, bv) in torch's (out, in) layout; `out_proj` maps the
    (N, L, E) attention output (an nnx.Linear for the layer, torch's weights for the function);
    `dtype` is Flax's compute dtype (None: the promotion of inputs and projections); `dropout_p`
    is the effective probability (0 outside training), drawn from `rngs`; `caller` names the
    entry point in errors.
    """
    batched = query.ndim == 3
    if not batched:
        query, key, value = query[None], key[None], value[None]
        if key_padding_mask is not None:
            key_padding_mask = jnp.asarray(key_padding_mask)[None]
    elif not batch_first:
        query, key, value = (jnp.swapaxes(t, 0, 1) for t in (query, key, value))
    n, seq_q, e = query.shape
    heads, head_dim = num_heads, e // num_heads
    wq, wk, wv, bq, bk, bv = projections
    query, key, value, wq, wk, wv, bq, bk, bv = _promote(dtype, query, key, value, wq, wk, wv, bq, bk, bv)
    cdt = query.dtype

    kpm = _attention_mask_bias(key_padding_mask, cdt)
    if is_causal and attn_mask is None:
        raise ValueError(f"{caller}: is_causal is a hint and needs attn_mask (as in torch)")
    if is_causal and kpm is None and not need_weights:
        mask = None
    else:
        mask = _attention_mask_bias(attn_mask, cdt)
        is_causal = False
    if mask is not None:
        if mask.ndim == 2:
            mask = mask[None, None]
        elif mask.ndim == 3:
            mask = mask.reshape(n, heads, seq_q, mask.shape[-1])
        else:
            raise ValueError(f"attn_mask's dimension {mask.ndim} is not supported")

    q = linear(query, wq, bq, precision=precision)
    k = linear(key, wk, bk, precision=precision)
    v = linear(value, wv, bv, precision=precision)
    if bias_k is not None and bias_v is not None:
        k = jnp.concatenate([k, jnp.broadcast_to(jnp.asarray(bias_k).astype(cdt), (n, 1, e))], axis=1)
        v = jnp.concatenate([v, jnp.broadcast_to(jnp.asarray(bias_v).astype(cdt), (n, 1, e))], axis=1)
        mask = None if mask is None else _pad_last(mask, 1)
        kpm = None if kpm is None else _pad_last(kpm, 1)
    q = q.reshape(n, seq_q, heads, head_dim).transpose(0, 2, 1, 3)
    k = k.reshape(n, k.shape[1], heads, head_dim).transpose(0, 2, 1, 3)
    v = v.reshape(n, v.shape[1], heads, head_dim).transpose(0, 2, 1, 3)
    if add_zero_attn:
        k = jnp.concatenate([k, jnp.zeros((n, heads, 1, head_dim), cdt)], axis=2)
        v = jnp.concatenate([v, jnp.zeros((n, heads, 1, head_dim), cdt)], axis=2)
        mask = None if mask is None else _pad_last(mask, 1)
        kpm = None if kpm is None else _pad_last(kpm, 1)
    if kpm is not None:
        kpm = kpm[:, None, None, :]
        mask = kpm if mask is None else mask + kpm
    key_for_dropout = _rng_key(rngs) if dropout_p > 0.0 else None

    if need_weights:
        scores = jnp.einsum("nhld,nhsd->nhls", q * math.sqrt(1.0 / head_dim), k, precision=precision)
        if mask is not None:
            scores = scores + mask
        weights = jax.nn.softmax(scores.astype(_stats_dtype(cdt)), axis=-1).astype(cdt)
        if key_for_dropout is not None:
            weights = _dropout_apply(weights, dropout_p, key_for_dropout)
        out = jnp.einsum("nhls,nhsd->nhld", weights, v, precision=precision)
        returned: jax.Array | None = weights.mean(axis=1) if average_attn_weights else weights
    else:
        out = scaled_dot_product_attention(q, k, v, mask, dropout_p, is_causal, rngs=key_for_dropout)
        returned = None
    out = out_proj(out.transpose(0, 2, 1, 3).reshape(n, seq_q, e))
    if not batched:
        return out[0], None if returned is None else returned[0]
    if not batch_first:
        out = jnp.swapaxes(out, 0, 1)
    return out, returned


def multi_head_attention_forward(
    query: jax.Array,
    key: jax.Array,
    value: jax.Array,
    embed_dim_to_check: int,
    num_heads: int,
    in_proj_weight: Any,
    in_proj_bias: Any,
    bias_k: Any,
    bias_v: Any,
    add_zero_attn: bool,
    dropout_p: float,
    out_proj_weight: Any,
    out_proj_bias: Any,
    training: bool = True,
    key_padding_mask: Any = None,
    need_weights: bool = True,
    attn_mask: Any = None,
    use_separate_proj_weight: bool = False,
    q_proj_weight: Any = None,
    k_proj_weight: Any = None,
    v_proj_weight: Any = None,
    static_k: Any = None,
    static_v: Any = None,
    average_attn_weights: bool = True,
    is_causal: bool = False,
    *,
    rngs: Any = None,
) -> tuple[jax.Array, jax.Array | None]:
    """torch.nn.functional.multi_head_attention_forward: MultiheadAttention's computation with its
    weights passed in (CLIP's attention pooling calls it with separate q/k/v projections).

    As in torch: inputs (L, N, E) (sequence-first) or unbatched (L, E); weights in torch's
    (out, in) layout, the packed `in_proj_weight` (3E, E) unless `use_separate_proj_weight`;
    masks with MultiheadAttention's polarity (bool True = blocked, float added); returns
    `(output, weights)`, weights None when `need_weights=False`. The compute dtype is the
    promotion of the inputs and weights (Flax's rule when no dtype is given). Dropout on the
    attention weights (`training` and `dropout_p > 0`) needs a key: torch draws from its global
    generator, JAX from `rngs`, which the converter passes (`rngs=self` in a module's methods);
    an nnx.Rngs, a stream or a key work too. `static_k`/`static_v` are not supported.
    """
    if static_k is not None or static_v is not None:
        raise NotImplementedError(
            "multi_head_attention_forward: static_k/static_v (precomputed per-head keys and values) are not "
            "supported; pass the key and value to project instead"
        )
    embed_dim = query.shape[-1]
    if embed_dim != embed_dim_to_check:
        raise ValueError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}")
    if embed_dim % num_heads:
        raise ValueError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        if key.shape[:2] != value.shape[:2]:
            raise ValueError(f"key's sequence and batch dims {key.shape[:2]} do not match value's {value.shape[:2]}")
        if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
            raise ValueError(
                "use_separate_proj_weight is True but q_proj_weight, k_proj_weight or v_proj_weight is None"
            )
        wq, wk, wv = q_proj_weight, k_proj_weight, v_proj_weight
    else:
        if key.shape != value.shape:
            raise ValueError(f"key shape {key.shape} does not match value shape {value.shape}")
        if in_proj_weight is None:
            raise ValueError("use_separate_proj_weight is False but in_proj_weight is None")
        e = embed_dim
        wq, wk, wv = in_proj_weight[:e], in_proj_weight[e : 2 * e], in_proj_weight[2 * e :]
    if (bias_k is None) != (bias_v is None):
        raise ValueError("bias_k and bias_v must be given together")
    bq = bk = bv = None
    if in_proj_bias is not None:
        bq, bk, bv = in_proj_bias[:embed_dim], in_proj_bias[embed_dim : 2 * embed_dim], in_proj_bias[2 * embed_dim :]
    given = (query, key, value, wq, wk, wv, in_proj_bias, bias_k, bias_v, out_proj_weight, out_proj_bias)
    dtype = jnp.result_type(*[a for a in given if a is not None])

    def out_proj(x: jax.Array) -> jax.Array:
        bias = None if out_proj_bias is None else jnp.asarray(out_proj_bias, x.dtype)
        return linear(x, jnp.asarray(out_proj_weight, x.dtype), bias)

    return _multi_head_attention(
        query,
        key,
        value,
        num_heads,
        (wq, wk, wv, bq, bk, bv),
        bias_k,
        bias_v,
        add_zero_attn,
        out_proj,
        key_padding_mask,
        need_weights,
        attn_mask,
        average_attn_weights,
        is_causal,
        dropout_p=dropout_p if training else 0.0,
        rngs=rngs,
        batch_first=False,
        dtype=dtype,
        precision=None,
        caller="multi_head_attention_forward",
    )


def _xavier_uniform(key: jax.Array, shape: tuple[int, int], dtype: Any) -> jax.Array:
    """torch.nn.init.xavier_uniform_ for a 2D (out, in) weight."""
    return _uniform(key, shape, dtype, math.sqrt(6.0 / (shape[0] + shape[1])))


class MultiheadAttention(TorchLayer):
    """torch.nn.MultiheadAttention: same arguments, layouts, masks, outputs and parameter names.

    What nnx.MultiHeadAttention does differently: batch-first only, mask True = attend, per-head
    (in, heads, head_dim) kernels, no returned weights. Here:

    - inputs are (L, N, E) unless `batch_first=True`, or unbatched (L, E);
    - `key_padding_mask` (N, S) and `attn_mask` (L, S) or (N*num_heads, L, S): bool True = blocked,
      float masks are added; `is_causal` is torch's hint (needs `attn_mask`; used as a causal mask
      only when there is no key_padding_mask and `need_weights=False`, as torch does);
    - returns `(output, weights)`; weights averaged over heads unless `average_attn_weights=False`,
      None when `need_weights=False`; fully masked rows give NaN weights (need_weights) or 0 output
      (SDPA path), as in torch;
    - parameters keep torch's names and layouts: `in_proj_weight` (3E, E) and `in_proj_bias` (3E,),
      or `q_proj_weight`/`k_proj_weight`/`v_proj_weight` when kdim/vdim differ from E; `bias_k`/
      `bias_v` (1, 1, E); `out_proj` is an nnx.Linear (kernel (E, E) = torch weight transposed);
    - dropout on the attention weights when not `deterministic` (eval() sets it), drawn from the
      'dropout' stream of `rngs`.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        device: Any = None,
        dtype: Any = None,
        *,
        deterministic: bool = False,
        param_dtype: Any = jnp.float32,
        precision: Any = None,
        rngs: nnx.Rngs | None = None,
    ) -> None:
        rngs = default_rngs() if rngs is None else rngs  # built without one (`layer=nn.Linear` passed around)
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got {embed_dim} and {num_heads}")
        if embed_dim % num_heads:
            raise ValueError("embed_dim must be divisible by num_heads")
        e = embed_dim
        self.embed_dim = e
        self.kdim = kdim if kdim is not None else e
        self.vdim = vdim if vdim is not None else e
        self.qkv_same_embed_dim = self.kdim == e and self.vdim == e
        self.num_heads = num_heads
        self.head_dim = e // num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.add_zero_attn = add_zero_attn
        self.deterministic = deterministic
        self.dtype = dtype
        self.param_dtype = param_dtype
        self.precision = precision
        if self.qkv_same_embed_dim:
            self.in_proj_weight = nnx.Param(_xavier_uniform(rngs.params(), (3 * e, e), param_dtype))
            self.q_proj_weight = nnx.data(None)
            self.k_proj_weight = nnx.data(None)
            self.v_proj_weight = nnx.data(None)
        else:
            self.in_proj_weight = nnx.data(None)
            self.q_proj_weight = nnx.Param(_xavier_uniform(rngs.params(), (e, e), param_dtype))
            self.k_proj_weight = nnx.Param(_xavier_uniform(rngs.params(), (e, self.kdim), param_dtype))
            self.v_proj_weight = nnx.Param(_xavier_uniform(rngs.params(), (e, self.vdim), param_dtype))
        self.in_proj_bias = nnx.Param(jnp.zeros((3 * e,), param_dtype)) if bias else nnx.data(None)
        bound = 1.0 / math.sqrt(e)
        self.out_proj = nnx.Linear(
            e,
            e,
            use_bias=bias,
            dtype=dtype,
            param_dtype=param_dtype,
            precision=precision,
            kernel_init=lambda key, shape, dtype=param_dtype: _uniform(key, shape, dtype, bound),
            rngs=rngs,
        )
        if add_bias_kv:
            std = math.sqrt(1.0 / e)
            self.bias_k = nnx.Param(std * jax.random.normal(rngs.params(), (1, 1, e), param_dtype))
            self.bias_v = nnx.Param(std * jax.random.normal(rngs.params(), (1, 1, e), param_dtype))
        else:
            self.bias_k = nnx.data(None)
            self.bias_v = nnx.data(None)
        self.rngs = rngs["dropout"].fork() if dropout > 0.0 else nnx.data(None)

    def _projections(self) -> tuple[Any, Any, Any, Any, Any, Any]:
        """(wq, wk, wv, bq, bk, bv) in torch's (out, in) layout."""
        e = self.embed_dim
        if self.qkv_same_embed_dim:
            w = self.in_proj_weight[...]
            wq, wk, wv = w[:e], w[e : 2 * e], w[2 * e :]
        else:
            wq, wk, wv = self.q_proj_weight[...], self.k_proj_weight[...], self.v_proj_weight[...]
        if self.in_proj_bias is None:
            return wq, wk, wv, None, None, None
        b = self.in_proj_bias[...]
        return wq, wk, wv, b[:e], b[e : 2 * e], b[2 * e :]

    def __call__(
        self,
        query: jax.Array,
        key: jax.Array,
        value: jax.Array,
        key_padding_mask: Any = None,
        need_weights: bool = True,
        attn_mask: Any = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
        *,
        deterministic: bool | None = None,
        rngs: Any = None,
    ) -> tuple[jax.Array, jax.Array | None]:
        det = self.deterministic if deterministic is None else deterministic
        return _multi_head_attention(
            query,
            key,
            value,
            self.num_heads,
            self._projections(),
            None if self.bias_k is None else self.bias_k[...],
            None if self.bias_v is None else self.bias_v[...],
            self.add_zero_attn,
            self.out_proj,
            key_padding_mask,
            need_weights,
            attn_mask,
            average_attn_weights,
            is_causal,
            dropout_p=0.0 if det else self.dropout,
            rngs=rngs if rngs is not None else self.rngs,
            batch_first=self.batch_first,
            dtype=self.dtype,
            precision=self.precision,
            caller="MultiheadAttention",
        )


def _pad_last(x: jax.Array, count: int) -> jax.Array:
    """Append `count` zeros along the last axis (torch's `pad(mask, (0, 1))` in attention)."""
    return jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, count)])


def torch_canonical_mask(mask, mask_name, other_type, other_name, target_type, check_other=True):
    """torch.nn.functional._canonical_mask, which code copied from torch's MultiheadAttention calls
    (torch-uncertainty's packed transformer layers): a boolean mask becomes an additive one of
    `target_type` (-inf where True); a float mask, or None, is returned as it is."""
    if mask is None:
        return None
    mask = jnp.asarray(mask)
    if mask.dtype != jnp.bool_ and not jnp.issubdtype(mask.dtype, jnp.floating):
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    if mask.dtype == jnp.bool_:
        mask = jnp.where(mask, -jnp.inf, 0.0).astype(target_type)
    return mask


def torch_none_or_dtype(input):
    """torch.nn.functional._none_or_dtype: None for None, else the array's dtype."""
    return None if input is None else jnp.asarray(input).dtype

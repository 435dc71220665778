"""torch's attention for Flax NNX: `scaled_dot_product_attention` (torch's mask polarity: True
attends) and `MultiheadAttention` (sequence-first, packed `in_proj_weight`, torch's names).
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
from precision_transpiler.runtime.flax.modules import TorchLayer


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
        *,
        device: Any = None,
        deterministic: bool = False,
        dtype: Any = None,
        param_dtype: Any = jnp.float32,
        precision: Any = None,
        rngs: nnx.Rngs | None = None,
    ) -> None:
        rngs = nnx.Rngs(0) if rngs is None else rngs  # built without one (`layer=nn.Linear` passed around)
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
        batched = query.ndim == 3
        if not batched:
            query, key, value = query[None], key[None], value[None]
            if key_padding_mask is not None:
                key_padding_mask = jnp.asarray(key_padding_mask)[None]
        elif not self.batch_first:
            query, key, value = (jnp.swapaxes(t, 0, 1) for t in (query, key, value))
        n, seq_q, e = query.shape
        heads, head_dim = self.num_heads, self.head_dim
        wq, wk, wv, bq, bk, bv = self._projections()
        query, key, value, wq, wk, wv, bq, bk, bv = _promote(self.dtype, query, key, value, wq, wk, wv, bq, bk, bv)
        cdt = query.dtype

        kpm = _attention_mask_bias(key_padding_mask, cdt)
        if is_causal and attn_mask is None:
            raise ValueError("MultiheadAttention: is_causal is a hint and needs attn_mask (as in torch)")
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

        q = linear(query, wq, bq, precision=self.precision)
        k = linear(key, wk, bk, precision=self.precision)
        v = linear(value, wv, bv, precision=self.precision)
        if self.bias_k is not None and self.bias_v is not None:
            k = jnp.concatenate([k, jnp.broadcast_to(self.bias_k[...].astype(cdt), (n, 1, e))], axis=1)
            v = jnp.concatenate([v, jnp.broadcast_to(self.bias_v[...].astype(cdt), (n, 1, e))], axis=1)
            mask = None if mask is None else _pad_last(mask, 1)
            kpm = None if kpm is None else _pad_last(kpm, 1)
        q = q.reshape(n, seq_q, heads, head_dim).transpose(0, 2, 1, 3)
        k = k.reshape(n, k.shape[1], heads, head_dim).transpose(0, 2, 1, 3)
        v = v.reshape(n, v.shape[1], heads, head_dim).transpose(0, 2, 1, 3)
        if self.add_zero_attn:
            k = jnp.concatenate([k, jnp.zeros((n, heads, 1, head_dim), cdt)], axis=2)
            v = jnp.concatenate([v, jnp.zeros((n, heads, 1, head_dim), cdt)], axis=2)
            mask = None if mask is None else _pad_last(mask, 1)
            kpm = None if kpm is None else _pad_last(kpm, 1)
        if kpm is not None:
            kpm = kpm[:, None, None, :]
            mask = kpm if mask is None else mask + kpm
        dropout_p = 0.0 if det else self.dropout
        key_for_dropout = _rng_key(rngs if rngs is not None else self.rngs) if dropout_p > 0.0 else None

        if need_weights:
            scores = jnp.einsum("nhld,nhsd->nhls", q * math.sqrt(1.0 / head_dim), k, precision=self.precision)
            if mask is not None:
                scores = scores + mask
            weights = jax.nn.softmax(scores.astype(_stats_dtype(cdt)), axis=-1).astype(cdt)
            if key_for_dropout is not None:
                weights = _dropout_apply(weights, dropout_p, key_for_dropout)
            out = jnp.einsum("nhls,nhsd->nhld", weights, v, precision=self.precision)
            returned: jax.Array | None = weights.mean(axis=1) if average_attn_weights else weights
        else:
            out = scaled_dot_product_attention(q, k, v, mask, dropout_p, is_causal, rngs=key_for_dropout)
            returned = None
        out = self.out_proj(out.transpose(0, 2, 1, 3).reshape(n, seq_q, e))
        if not batched:
            return out[0], None if returned is None else returned[0]
        if not self.batch_first:
            out = jnp.swapaxes(out, 0, 1)
        return out, returned


def _pad_last(x: jax.Array, count: int) -> jax.Array:
    """Append `count` zeros along the last axis (torch's `pad(mask, (0, 1))` in attention)."""
    return jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, count)])

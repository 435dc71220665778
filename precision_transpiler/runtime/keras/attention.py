"""torch's attention for Keras 3: `scaled_dot_product_attention`, `MultiheadAttention`
(sequence-first, packed `in_proj_weight`, torch's mask polarity) and its functional form
`multi_head_attention_forward` (the same computation, weights passed in), softmax in at least
float32.
"""

import math
from typing import Any

import keras
from keras import ops

from precision_transpiler.runtime.keras.functional import (
    _dropout,
    _keras_dtype,
    _linear,
    _stats_dtype,
    _uniform,
)
from precision_transpiler.runtime.keras.layers import Linear


def _scaled_dot_product_attention(
    query: Any,
    key: Any,
    value: Any,
    attn_mask: Any,
    dropout_p: float,
    is_causal: bool,
    scale: float | None,
    enable_gqa: bool,
    seed: Any,
) -> Any:
    """torch's math SDPA on (..., heads, L, E): bool mask True = attend, float mask added, causal top-left.

    Scores and softmax in float32 or wider; rows whose scores are all masked give 0 (torch's CPU
    kernels), not NaN.
    """
    if is_causal and attn_mask is not None:
        raise ValueError("scaled_dot_product_attention: explicit attn_mask should not be set when is_causal=True")
    factor = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    if enable_gqa:
        key = ops.repeat(key, query.shape[-3] // key.shape[-3], axis=-3)
        value = ops.repeat(value, query.shape[-3] // value.shape[-3], axis=-3)
    sdt = _stats_dtype(query.dtype)
    scores = ops.cast(ops.matmul(query, ops.swapaxes(key, -2, -1)), sdt) * factor
    neg_inf = ops.convert_to_tensor(float("-inf"), sdt)
    if is_causal:
        rows = ops.arange(ops.shape(query)[-2])[:, None]
        cols = ops.arange(ops.shape(key)[-2])[None, :]
        scores = ops.where(rows >= cols, scores, neg_inf)
    if attn_mask is not None:
        attn_mask = ops.convert_to_tensor(attn_mask)
        if keras.backend.standardize_dtype(attn_mask.dtype) == "bool":
            scores = ops.where(attn_mask, scores, neg_inf)
        else:
            scores = scores + ops.cast(attn_mask, sdt)
    weights = ops.softmax(scores, axis=-1)
    weights = ops.where(ops.all(scores == neg_inf, axis=-1, keepdims=True), ops.zeros((), sdt), weights)
    if dropout_p > 0.0:
        weights = _dropout(weights, dropout_p, seed)
    return ops.matmul(ops.cast(weights, value.dtype), value)


def scaled_dot_product_attention(
    query: Any,
    key: Any,
    value: Any,
    attn_mask: Any = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    *,
    seed: Any = None,
) -> Any:
    """torch.nn.functional.scaled_dot_product_attention on (..., heads, L, E) inputs.

    torch's polarity for THIS function: a bool mask is True where attention is allowed (the
    opposite of nn.MultiheadAttention's masks); a float mask is added to the scores. `is_causal`
    is a top-left aligned lower-triangular mask. Fully masked rows give 0, not NaN. Dropout draws
    from `seed` (a keras.random.SeedGenerator or int; torch draws from its global generator).
    """
    return _scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, seed)


def _attention_mask_bias(mask: Any, dtype: Any) -> Any:
    """torch MultiheadAttention's `_canonical_mask`: bool True = blocked becomes -inf; float masks are added."""
    if mask is None:
        return None
    mask = ops.convert_to_tensor(mask)
    if keras.backend.standardize_dtype(mask.dtype) == "bool":
        return ops.where(mask, ops.convert_to_tensor(float("-inf"), dtype), ops.zeros((), dtype))
    if "float" not in keras.backend.standardize_dtype(mask.dtype):
        raise TypeError("only bool and floating types of masks are supported")
    return ops.cast(mask, dtype)


def _pad_last(x: Any, count: int) -> Any:
    """Append `count` zeros along the last axis (torch's `pad(mask, (0, 1))` in attention)."""
    return ops.pad(x, [(0, 0)] * (len(x.shape) - 1) + [(0, count)])


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
    seed: Any,
    batch_first: bool,
    dtype: Any,
    caller: str,
) -> tuple[Any, Any]:
    """What MultiheadAttention and `multi_head_attention_forward` both compute (torch's layer calls
    its functional form too), so the two cannot drift apart.

    `projections` is (wq, wk, wv, bq, bk, bv) in torch's (out, in) layout, already in `dtype`, the
    compute dtype the inputs are cast to; `out_proj` maps the (N, L, E) attention output (a
    `Linear` for the layer, torch's weights for the function); `dropout_p` is the effective
    probability (0 outside training), drawn from `seed`; `caller` names the entry point in errors.
    """
    cdt = dtype
    query, key, value = (ops.cast(t, cdt) for t in (query, key, value))
    batched = len(query.shape) == 3
    if not batched:
        query, key, value = (ops.expand_dims(t, 0) for t in (query, key, value))
        if key_padding_mask is not None:
            key_padding_mask = ops.expand_dims(ops.convert_to_tensor(key_padding_mask), 0)
    elif not batch_first:
        query, key, value = (ops.swapaxes(t, 0, 1) for t in (query, key, value))
    e = query.shape[-1]
    heads, head_dim = num_heads, e // num_heads
    n, seq_q = ops.shape(query)[0], ops.shape(query)[1]

    kpm = _attention_mask_bias(key_padding_mask, cdt)
    if is_causal and attn_mask is None:
        raise ValueError(f"{caller}: is_causal is a hint and needs attn_mask (as in torch)")
    if is_causal and kpm is None and not need_weights:
        mask = None
    else:
        mask = _attention_mask_bias(attn_mask, cdt)
        is_causal = False
    if mask is not None:
        if len(mask.shape) == 2:
            mask = mask[None, None]
        elif len(mask.shape) == 3:
            mask = ops.reshape(mask, (n, heads, seq_q, mask.shape[-1]))
        else:
            raise ValueError(f"attn_mask's dimension {len(mask.shape)} is not supported")

    wq, wk, wv, bq, bk, bv = projections
    q, k, v = _linear(query, wq, bq), _linear(key, wk, bk), _linear(value, wv, bv)
    if bias_k is not None and bias_v is not None:
        k = ops.concatenate([k, ops.broadcast_to(ops.cast(bias_k, cdt), (n, 1, e))], axis=1)
        v = ops.concatenate([v, ops.broadcast_to(ops.cast(bias_v, cdt), (n, 1, e))], axis=1)
        mask = None if mask is None else _pad_last(mask, 1)
        kpm = None if kpm is None else _pad_last(kpm, 1)
    q = ops.transpose(ops.reshape(q, (n, seq_q, heads, head_dim)), (0, 2, 1, 3))
    k = ops.transpose(ops.reshape(k, (n, -1, heads, head_dim)), (0, 2, 1, 3))
    v = ops.transpose(ops.reshape(v, (n, -1, heads, head_dim)), (0, 2, 1, 3))
    if add_zero_attn:
        k = ops.pad(k, [(0, 0), (0, 0), (0, 1), (0, 0)])
        v = ops.pad(v, [(0, 0), (0, 0), (0, 1), (0, 0)])
        mask = None if mask is None else _pad_last(mask, 1)
        kpm = None if kpm is None else _pad_last(kpm, 1)
    if kpm is not None:
        kpm = kpm[:, None, None, :]
        mask = kpm if mask is None else mask + kpm

    if need_weights:
        scores = ops.matmul(q * math.sqrt(1.0 / head_dim), ops.swapaxes(k, -2, -1))
        if mask is not None:
            scores = scores + mask
        weights = ops.cast(ops.softmax(ops.cast(scores, _stats_dtype(cdt)), axis=-1), cdt)
        if dropout_p > 0.0:
            weights = _dropout(weights, dropout_p, seed)
        out = ops.matmul(weights, v)
        returned = ops.mean(weights, axis=1) if average_attn_weights else weights
    else:
        out = _scaled_dot_product_attention(q, k, v, mask, dropout_p, is_causal, None, False, seed)
        returned = None
    out = out_proj(ops.reshape(ops.transpose(out, (0, 2, 1, 3)), (n, seq_q, e)))
    if not batched:
        return out[0], None if returned is None else returned[0]
    if not batch_first:
        out = ops.swapaxes(out, 0, 1)
    return out, returned


def multi_head_attention_forward(
    query: Any,
    key: Any,
    value: Any,
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
    seed: Any = None,
) -> tuple[Any, Any]:
    """torch.nn.functional.multi_head_attention_forward: MultiheadAttention's computation with its
    weights passed in (CLIP's attention pooling calls it with separate q/k/v projections).

    As in torch: inputs (L, N, E) (sequence-first) or unbatched (L, E); weights in torch's
    (out, in) layout, the packed `in_proj_weight` (3E, E) unless `use_separate_proj_weight`;
    masks with MultiheadAttention's polarity (bool True = blocked, float added); returns
    `(output, weights)`, weights None when `need_weights=False`. Computes in the query's dtype
    (weights are cast to it), softmax in at least float32. Dropout on the attention weights
    (`training` and `dropout_p > 0`) draws from `seed` (a keras.random.SeedGenerator; torch draws
    from its global generator). `static_k`/`static_v` are not supported.
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
    cdt = keras.backend.standardize_dtype(ops.convert_to_tensor(query).dtype)
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise ValueError(f"key's sequence and batch dims {key.shape[:2]} do not match value's {value.shape[:2]}")
        if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
            raise ValueError(
                "use_separate_proj_weight is True but q_proj_weight, k_proj_weight or v_proj_weight is None"
            )
        wq, wk, wv = (ops.cast(w, cdt) for w in (q_proj_weight, k_proj_weight, v_proj_weight))
    else:
        if tuple(key.shape) != tuple(value.shape):
            raise ValueError(f"key shape {key.shape} does not match value shape {value.shape}")
        if in_proj_weight is None:
            raise ValueError("use_separate_proj_weight is False but in_proj_weight is None")
        w = ops.cast(in_proj_weight, cdt)
        wq, wk, wv = w[:embed_dim], w[embed_dim : 2 * embed_dim], w[2 * embed_dim :]
    if (bias_k is None) != (bias_v is None):
        raise ValueError("bias_k and bias_v must be given together")
    bq = bk = bv = None
    if in_proj_bias is not None:
        b = ops.cast(in_proj_bias, cdt)
        bq, bk, bv = b[:embed_dim], b[embed_dim : 2 * embed_dim], b[2 * embed_dim :]

    def out_proj(x: Any) -> Any:
        bias = None if out_proj_bias is None else ops.cast(out_proj_bias, cdt)
        return _linear(x, ops.cast(out_proj_weight, cdt), bias)

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
        seed=seed,
        batch_first=False,
        dtype=cdt,
        caller="multi_head_attention_forward",
    )


def _xavier_uniform(shape: tuple[int, int]) -> Any:
    """torch.nn.init.xavier_uniform_ for a 2D (out, in) weight."""
    return _uniform(math.sqrt(6.0 / (shape[0] + shape[1])))


class MultiheadAttention(keras.layers.Layer):
    """torch.nn.MultiheadAttention: same arguments, layouts, masks, outputs and weight names.

    What keras.layers.MultiHeadAttention does differently: batch-first only, mask True = attend,
    per-head (E, heads, head_dim) kernels, separate key_dim. Here:

    - inputs are (L, N, E) unless `batch_first=True`, or unbatched (L, E);
    - `key_padding_mask` (N, S) and `attn_mask` (L, S) or (N*num_heads, L, S): bool True = blocked,
      float masks are added; `is_causal` is torch's hint (needs `attn_mask`);
    - returns `(output, weights)`; weights averaged over heads unless `average_attn_weights=False`,
      None when `need_weights=False`; fully masked rows give NaN weights (need_weights) or 0 output,
      as in torch;
    - weights keep torch's names and layouts: `in_proj_weight` (3E, E), `in_proj_bias` (3E,) or
      `q_proj_weight`/`k_proj_weight`/`v_proj_weight` when kdim/vdim differ from E; `bias_k`/`bias_v`
      (1, 1, E); `out_proj` a torch-layout `Linear`;
    - attention-weight dropout when `training=True`.
    Non-tensor arguments may be passed positionally, as in torch.
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
        **kwargs: Any,
    ) -> None:
        super().__init__(dtype=_keras_dtype(dtype), **kwargs)
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got {embed_dim} and {num_heads}")
        if embed_dim % num_heads:
            raise ValueError("embed_dim must be divisible by num_heads")
        self._allow_non_tensor_positional_args = True
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
        if self.qkv_same_embed_dim:
            self.in_proj_weight = self.add_weight(
                shape=(3 * e, e), initializer=_xavier_uniform((3 * e, e)), name="in_proj_weight"
            )
            self.q_proj_weight = self.k_proj_weight = self.v_proj_weight = None
        else:
            self.in_proj_weight = None
            for name, dim in (("q_proj_weight", e), ("k_proj_weight", self.kdim), ("v_proj_weight", self.vdim)):
                setattr(self, name, self.add_weight(shape=(e, dim), initializer=_xavier_uniform((e, dim)), name=name))
        self.in_proj_bias = self.add_weight(shape=(3 * e,), initializer="zeros", name="in_proj_bias") if bias else None
        self.out_proj = Linear(e, e, bias=bias, dtype=self.dtype_policy, name="out_proj")
        if bias:
            self.out_proj.bias.assign(ops.zeros((e,)))
        if add_bias_kv:
            normal = keras.initializers.RandomNormal(0.0, math.sqrt(1.0 / e))  # xavier_normal_ of (1, 1, E)
            self.bias_k = self.add_weight(shape=(1, 1, e), initializer=normal, name="bias_k")
            self.bias_v = self.add_weight(shape=(1, 1, e), initializer=normal, name="bias_v")
        else:
            self.bias_k = self.bias_v = None
        self.seed_generator = keras.random.SeedGenerator() if dropout > 0.0 else None
        self.built = True

    def _projections(self, dtype: Any) -> tuple[Any, Any, Any, Any, Any, Any]:
        """(wq, wk, wv, bq, bk, bv) in torch's (out, in) layout, cast to `dtype`."""
        e = self.embed_dim
        if self.qkv_same_embed_dim:
            w = ops.cast(self.in_proj_weight, dtype)
            wq, wk, wv = w[:e], w[e : 2 * e], w[2 * e :]
        else:
            wq, wk, wv = (ops.cast(w, dtype) for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight))
        if self.in_proj_bias is None:
            return wq, wk, wv, None, None, None
        b = ops.cast(self.in_proj_bias, dtype)
        return wq, wk, wv, b[:e], b[e : 2 * e], b[2 * e :]

    def call(
        self,
        query: Any,
        key: Any,
        value: Any,
        key_padding_mask: Any = None,
        need_weights: bool = True,
        attn_mask: Any = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
        training: bool | None = None,
    ) -> tuple[Any, Any]:
        cdt = self.compute_dtype
        return _multi_head_attention(
            query,
            key,
            value,
            self.num_heads,
            self._projections(cdt),
            self.bias_k,
            self.bias_v,
            self.add_zero_attn,
            self.out_proj,
            key_padding_mask,
            need_weights,
            attn_mask,
            average_attn_weights,
            is_causal,
            dropout_p=self.dropout if training else 0.0,
            seed=self.seed_generator,
            batch_first=self.batch_first,
            dtype=cdt,
            caller="MultiheadAttention",
        )


def torch_canonical_mask(mask, mask_name, other_type, other_name, target_type, check_other=True):
    """torch.nn.functional._canonical_mask, which code copied from torch's MultiheadAttention calls
    (torch-uncertainty's packed transformer layers): a boolean mask becomes an additive one of
    `target_type` (-inf where True); a float mask, or None, is returned as it is."""
    if mask is None:
        return None
    mask = ops.convert_to_tensor(mask)
    dtype = keras.backend.standardize_dtype(mask.dtype)
    if dtype != "bool" and "float" not in dtype:
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    if dtype == "bool":
        mask = ops.cast(ops.where(mask, float("-inf"), 0.0), keras.backend.standardize_dtype(target_type))
    return mask


def torch_none_or_dtype(input):
    """torch.nn.functional._none_or_dtype: None for None, else the tensor's dtype."""
    return None if input is None else ops.convert_to_tensor(input).dtype

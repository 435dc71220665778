"""torch's Transformer layers for Flax NNX: TransformerEncoderLayer, TransformerDecoderLayer,
TransformerEncoder, TransformerDecoder and Transformer, with torch's sub-module names.

Why shims: Flax has no Transformer blocks; torch's are fixed compositions (post- or pre-norm,
`norm_first`) of MultiheadAttention, two Linear layers, LayerNorms and Dropouts whose state-dict
keys (`self_attn.in_proj_weight`, `linear1.weight`, `norm2.bias`, `layers.0. ...`) must match. These
classes build the same tree from the runtime's MultiheadAttention, Linear, LayerNorm and Dropout, so
torch weights load by path, and compute the same forward (masks, key padding, `is_causal`).
The encoder and decoder stack copies of the given layer, as torch deep-copies it.
"""

from typing import Any

import jax
from flax import nnx

from precision_transpiler.runtime.flax.attention import MultiheadAttention
from precision_transpiler.runtime.flax.layers import Dropout, Linear, TorchLayer
from precision_transpiler.runtime.flax.norm import LayerNorm
from precision_transpiler.runtime.flax.rng import default_rngs


def _activation(activation: Any) -> Any:
    """torch's `activation` argument: "relu", "gelu" (exact erf form) or a callable."""
    if activation == "relu":
        return jax.nn.relu
    if activation == "gelu":
        return lambda x: jax.nn.gelu(x, approximate=False)
    if callable(activation):
        return activation
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


class _TransformerLayer(TorchLayer):
    """Shared body of the encoder and decoder layers (torch's constructor): self-attention, the
    feed-forward block, `norm1..n`/`dropout1..n`, and for the decoder the cross-attention."""

    _decoder = False

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: Any = "relu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
        *,
        rngs: nnx.Rngs | None = None,
    ) -> None:
        rngs = default_rngs() if rngs is None else rngs  # built without one (`layer=nn.Linear` passed around)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout, bias=bias, batch_first=batch_first, rngs=rngs)
        if self._decoder:
            self.multihead_attn = MultiheadAttention(
                d_model, nhead, dropout, bias=bias, batch_first=batch_first, rngs=rngs
            )
        self.linear1 = Linear(d_model, dim_feedforward, bias, rngs=rngs)
        self.dropout = Dropout(dropout, rngs=rngs)
        self.linear2 = Linear(dim_feedforward, d_model, bias, rngs=rngs)
        self.norm_first = norm_first
        for i in range(1, 4 if self._decoder else 3):
            setattr(self, f"norm{i}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias))
            setattr(self, f"dropout{i}", Dropout(dropout, rngs=rngs))
        self.activation = _activation(activation)

    def _sa_block(self, x: jax.Array, attn_mask: Any, key_padding_mask: Any, is_causal: bool) -> jax.Array:
        y = self.self_attn(
            x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False, is_causal=is_causal
        )[0]
        return self.dropout1(y)

    def _ff_block(self, x: jax.Array, n: int) -> jax.Array:
        y = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return getattr(self, f"dropout{n}")(y)


class TransformerEncoderLayer(_TransformerLayer):
    """torch.nn.TransformerEncoderLayer: self-attention then feed-forward, each with a residual, post-norm
    by default (`norm_first=True`: pre-norm)."""

    def __call__(
        self, src: jax.Array, src_mask: Any = None, src_key_padding_mask: Any = None, is_causal: bool = False
    ) -> jax.Array:
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x), 2)
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x, 2))


class TransformerDecoderLayer(_TransformerLayer):
    """torch.nn.TransformerDecoderLayer: self-attention, cross-attention over `memory`, feed-forward."""

    _decoder = True

    def _mha_block(self, x: jax.Array, memory: jax.Array, mask: Any, padding: Any, is_causal: bool) -> jax.Array:
        y = self.multihead_attn(
            x, memory, memory, attn_mask=mask, key_padding_mask=padding, need_weights=False, is_causal=is_causal
        )[0]
        return self.dropout2(y)

    def __call__(
        self,
        tgt: jax.Array,
        memory: jax.Array,
        tgt_mask: Any = None,
        memory_mask: Any = None,
        tgt_key_padding_mask: Any = None,
        memory_key_padding_mask: Any = None,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
    ) -> jax.Array:
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            return x + self._ff_block(self.norm3(x), 3)
        x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
        return self.norm3(x + self._ff_block(x, 3))


class _Stack(TorchLayer):
    """Shared body of TransformerEncoder/Decoder: `num_layers` copies of the layer in `layers`, an
    optional final `norm`."""

    def __init__(self, layer: Any, num_layers: int, norm: Any = None) -> None:
        self.layers = nnx.List([nnx.clone(layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def _finish(self, x: jax.Array) -> jax.Array:
        return x if self.norm is None else self.norm(x)


class TransformerEncoder(_Stack):
    """torch.nn.TransformerEncoder(encoder_layer, num_layers, norm): the layers in sequence, then `norm`.
    (torch's nested-tensor fast path is an inference optimisation with the same results.)"""

    def __init__(
        self,
        encoder_layer: Any,
        num_layers: int,
        norm: Any = None,
        enable_nested_tensor: bool = True,
        mask_check: bool = True,
        *,
        rngs: Any = None,
    ) -> None:
        super().__init__(encoder_layer, num_layers, norm)

    def __call__(
        self, src: jax.Array, mask: Any = None, src_key_padding_mask: Any = None, is_causal: bool | None = None
    ) -> jax.Array:
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal))
        return self._finish(x)


class TransformerDecoder(_Stack):
    """torch.nn.TransformerDecoder(decoder_layer, num_layers, norm): the layers in sequence over `memory`."""

    def __init__(self, decoder_layer: Any, num_layers: int, norm: Any = None, *, rngs: Any = None) -> None:
        super().__init__(decoder_layer, num_layers, norm)

    def __call__(
        self,
        tgt: jax.Array,
        memory: jax.Array,
        tgt_mask: Any = None,
        memory_mask: Any = None,
        tgt_key_padding_mask: Any = None,
        memory_key_padding_mask: Any = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> jax.Array:
        x = tgt
        for layer in self.layers:
            x = layer(
                x,
                memory,
                tgt_mask=tgt_mask,
                memory_mask=memory_mask,
                tgt_key_padding_mask=tgt_key_padding_mask,
                memory_key_padding_mask=memory_key_padding_mask,
                tgt_is_causal=bool(tgt_is_causal),
                memory_is_causal=memory_is_causal,
            )
        return self._finish(x)


class Transformer(TorchLayer):
    """torch.nn.Transformer: an encoder and a decoder stack, each ending in a LayerNorm."""

    def __init__(
        self,
        d_model: int = 512,
        nhead: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: Any = "relu",
        custom_encoder: Any = None,
        custom_decoder: Any = None,
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
        *,
        rngs: nnx.Rngs | None = None,
    ) -> None:
        rngs = default_rngs() if rngs is None else rngs  # built without one (`layer=nn.Linear` passed around)
        args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first, bias)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
            self.encoder = TransformerEncoder(TransformerEncoderLayer(*args, rngs=rngs), num_encoder_layers, norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
            self.decoder = TransformerDecoder(TransformerDecoderLayer(*args, rngs=rngs), num_decoder_layers, norm)
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def __call__(
        self,
        src: jax.Array,
        tgt: jax.Array,
        src_mask: Any = None,
        tgt_mask: Any = None,
        memory_mask: Any = None,
        src_key_padding_mask: Any = None,
        tgt_key_padding_mask: Any = None,
        memory_key_padding_mask: Any = None,
        src_is_causal: bool | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> jax.Array:
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(
            tgt,
            memory,
            tgt_mask=tgt_mask,
            memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask,
            tgt_is_causal=tgt_is_causal,
            memory_is_causal=memory_is_causal,
        )

"""torch's recurrent layers for Flax NNX: RNN, LSTM and GRU (stacked, bidirectional, batch_first,
LSTM projections) and their cells, with torch's gate order and parameter names.

Why shims: nnx's recurrent cells keep one kernel per gate under their own names and initialise
differently; torch keeps all gates of a layer in one `weight_ih_l{k}` (gates x input) and
`weight_hh_l{k}` matrix, in the order (i, f, g, o) for LSTM and (r, z, n) for GRU, with GRU's
reset gate applied after the hidden projection (`n = tanh(W_in x + b_in + r * (W_hn h + b_hn))`).
These classes store torch's parameters under torch's names and shapes (`weight_ih_l0`,
`bias_hh_l1_reverse`, ...), so torch state dicts load as they are, and scan over time with
`jax.lax.scan`. Inter-layer `dropout` applies in training mode only, as torch.
"""

import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from precision_transpiler.runtime.common import _GATES
from precision_transpiler.runtime.flax.functional import _uniform
from precision_transpiler.runtime.flax.layers import TorchLayer
from precision_transpiler.runtime.flax.rng import default_rngs


def _matmul_t(x: jax.Array, w: jax.Array, b: Any) -> jax.Array:
    """x @ w.T + b: torch's (out, in) weight layout."""
    y = x @ w.T
    return y if b is None else y + b


def _step(mode: str, gi: jax.Array, h: jax.Array, c: Any, w_hh: jax.Array, b_hh: Any, w_hr: Any) -> tuple[Any, Any]:
    """One time step of `mode` given the input projection gi = x W_ih^T + b_ih: the new (h, c)."""
    gh = _matmul_t(h, w_hh, b_hh)
    if mode == "GRU":
        ir, iz, in_ = jnp.split(gi, 3, axis=-1)
        hr, hz, hn = jnp.split(gh, 3, axis=-1)
        r, z = jax.nn.sigmoid(ir + hr), jax.nn.sigmoid(iz + hz)
        n = jnp.tanh(in_ + r * hn)
        return (1.0 - z) * n + z * h, c
    if mode == "LSTM":
        i, f, g, o = jnp.split(gi + gh, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (h if w_hr is None else h @ w_hr.T), c
    pre = gi + gh
    return (jnp.tanh(pre) if mode == "RNN_TANH" else jax.nn.relu(pre)), c


class _RNNBase(TorchLayer):
    """Shared body of RNN/LSTM/GRU: torch's constructor, parameters and multi-layer forward."""

    mode = "LSTM"

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device: Any = None,
        dtype: Any = None,
        *,
        param_dtype: Any = jnp.float32,
        rngs: nnx.Rngs | None = None,
    ) -> None:
        rngs = default_rngs() if rngs is None else rngs  # built without one (`layer=nn.Linear` passed around)
        if proj_size and self.mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if proj_size < 0 or (proj_size and proj_size >= hidden_size):
            raise ValueError("proj_size has to be smaller than hidden_size")
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        self.dtype = dtype
        self.deterministic = False  # `model.eval()` sets it: no inter-layer dropout
        self.dropout_layer = nnx.Dropout(self.dropout, rngs=rngs) if self.dropout and num_layers > 1 else None
        bound = 1.0 / math.sqrt(hidden_size) if hidden_size > 0 else 0.0
        real_hidden = proj_size or hidden_size
        gates = _GATES[self.mode] * hidden_size
        directions = 2 if bidirectional else 1
        for layer in range(num_layers):
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                width = input_size if layer == 0 else real_hidden * directions
                shapes = {"weight_ih": (gates, width), "weight_hh": (gates, real_hidden)}
                if bias:
                    shapes.update(bias_ih=(gates,), bias_hh=(gates,))
                if proj_size:
                    shapes["weight_hr"] = (proj_size, hidden_size)
                for name, shape in shapes.items():
                    setattr(self, name + suffix, nnx.Param(_uniform(rngs.params(), shape, param_dtype, bound)))

    def flatten_parameters(self) -> None:
        """torch's cuDNN weight-compaction hint (model code calls it in `forward`): nothing to do here."""

    def _weights(self, suffix: str, dtype: Any) -> tuple[Any, ...]:
        """(w_ih, w_hh, b_ih, b_hh, w_hr) of one layer and direction, None where absent, cast to dtype."""

        def get(name: str) -> Any:
            var = getattr(self, name + suffix, None)
            return None if var is None else var[...].astype(dtype)

        return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh"), get("weight_hr")

    def __call__(self, input: jax.Array, hx: Any = None) -> tuple[jax.Array, Any]:
        dtype = self.dtype or input.dtype
        unbatched = input.ndim == 2
        x = input[:, None] if unbatched else (jnp.swapaxes(input, 0, 1) if self.batch_first else input)
        x = x.astype(dtype)
        directions = 2 if self.bidirectional else 1
        n = x.shape[1]
        out_size = self.proj_size or self.hidden_size
        lstm = self.mode == "LSTM"
        h0, c0 = (hx if lstm else (hx, None)) if hx is not None else (None, None)
        if h0 is None:
            h0 = jnp.zeros((self.num_layers * directions, n, out_size), dtype)
        if lstm and c0 is None:
            c0 = jnp.zeros((self.num_layers * directions, n, self.hidden_size), dtype)
        if unbatched and hx is not None:
            h0 = h0[:, None]
            c0 = c0[:, None] if lstm else None
        hs, cs = [], []
        for layer in range(self.num_layers):
            outs = []
            for direction in range(directions):
                index = layer * directions + direction
                w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(f"_l{layer}" + ("_reverse" if direction else ""), dtype)
                gi = _matmul_t(x, w_ih, b_ih)
                mode = self.mode

                def body(carry: tuple[Any, Any], g: jax.Array) -> tuple[tuple[Any, Any], jax.Array]:
                    h, c = _step(mode, g, carry[0], carry[1], w_hh, b_hh, w_hr)  # noqa: B023
                    return (h, c), h

                init = (h0[index].astype(dtype), c0[index].astype(dtype) if lstm else None)
                (h, c), ys = jax.lax.scan(body, init, gi, reverse=bool(direction))
                outs.append(ys)
                hs.append(h)
                cs.append(c)
            x = jnp.concatenate(outs, axis=-1) if directions == 2 else outs[0]
            if self.dropout_layer is not None and layer < self.num_layers - 1:
                x = self.dropout_layer(x, deterministic=self.deterministic)
        h_n = jnp.stack(hs)
        c_n = jnp.stack(cs) if lstm else None
        if unbatched:
            x, h_n = x[:, 0], h_n[:, 0]
            c_n = c_n[:, 0] if lstm else None
        elif self.batch_first:
            x = jnp.swapaxes(x, 0, 1)
        return x, ((h_n, c_n) if lstm else h_n)


class RNN(_RNNBase):
    """torch.nn.RNN(input_size, hidden_size, num_layers=1, nonlinearity='tanh', bias, batch_first,
    dropout, bidirectional): h' = act(W_ih x + b_ih + W_hh h + b_hh)."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        nonlinearity: str = "tanh",
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device: Any = None,
        dtype: Any = None,
        *,
        param_dtype: Any = jnp.float32,
        rngs: nnx.Rngs | None = None,
    ) -> None:
        rngs = default_rngs() if rngs is None else rngs  # built without one (`layer=nn.Linear` passed around)
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        self.nonlinearity = nonlinearity
        self.mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"
        super().__init__(
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            dtype=dtype,
            param_dtype=param_dtype,
            rngs=rngs,
        )


class LSTM(_RNNBase):
    """torch.nn.LSTM: gates (i, f, g, o) stacked in `weight_ih_l{k}`; `proj_size` adds `weight_hr_l{k}`.
    Returns (output, (h_n, c_n))."""

    mode = "LSTM"


class GRU(_RNNBase):
    """torch.nn.GRU: gates (r, z, n), the reset gate applied to the hidden projection with its bias
    (`proj_size` is LSTM's only, refused as torch does)."""

    mode = "GRU"


class _RNNCellBase(TorchLayer):
    """Shared body of RNNCell/LSTMCell/GRUCell: `weight_ih`, `weight_hh`, `bias_ih`, `bias_hh` as torch."""

    mode = "LSTM"

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
        *,
        param_dtype: Any = jnp.float32,
        rngs: nnx.Rngs | None = None,
    ) -> None:
        rngs = default_rngs() if rngs is None else rngs  # built without one (`layer=nn.Linear` passed around)
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.dtype = dtype
        bound = 1.0 / math.sqrt(hidden_size) if hidden_size > 0 else 0.0
        gates = _GATES[self.mode] * hidden_size
        self.weight_ih = nnx.Param(_uniform(rngs.params(), (gates, input_size), param_dtype, bound))
        self.weight_hh = nnx.Param(_uniform(rngs.params(), (gates, hidden_size), param_dtype, bound))
        self.bias_ih = nnx.Param(_uniform(rngs.params(), (gates,), param_dtype, bound)) if bias else nnx.data(None)
        self.bias_hh = nnx.Param(_uniform(rngs.params(), (gates,), param_dtype, bound)) if bias else nnx.data(None)

    def __call__(self, input: jax.Array, hx: Any = None) -> Any:
        dtype = self.dtype or input.dtype
        unbatched = input.ndim == 1
        x = (input[None] if unbatched else input).astype(dtype)
        lstm = self.mode == "LSTM"
        h, c = (hx if lstm else (hx, None)) if hx is not None else (None, None)
        zeros = jnp.zeros((x.shape[0], self.hidden_size), dtype)
        h = zeros if h is None else (h[None] if unbatched else h).astype(dtype)
        if lstm:
            c = zeros if c is None else (c[None] if unbatched else c).astype(dtype)
        b_ih = None if self.bias_ih is None else self.bias_ih[...].astype(dtype)
        b_hh = None if self.bias_hh is None else self.bias_hh[...].astype(dtype)
        gi = _matmul_t(x, self.weight_ih[...].astype(dtype), b_ih)
        h, c = _step(self.mode, gi, h, c, self.weight_hh[...].astype(dtype), b_hh, None)
        if unbatched:
            h, c = h[0], (c[0] if lstm else None)
        return (h, c) if lstm else h


class RNNCell(_RNNCellBase):
    """torch.nn.RNNCell(input_size, hidden_size, bias, nonlinearity='tanh')."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: str = "tanh",
        device: Any = None,
        dtype: Any = None,
        *,
        param_dtype: Any = jnp.float32,
        rngs: nnx.Rngs | None = None,
    ) -> None:
        rngs = default_rngs() if rngs is None else rngs  # built without one (`layer=nn.Linear` passed around)
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(
                f"Invalid nonlinearity selected for RNN. Can be either 'tanh' or 'relu'. Got {nonlinearity}"
            )
        self.nonlinearity = nonlinearity
        self.mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"
        super().__init__(input_size, hidden_size, bias, dtype=dtype, param_dtype=param_dtype, rngs=rngs)


class LSTMCell(_RNNCellBase):
    """torch.nn.LSTMCell: gates (i, f, g, o); returns (h', c')."""

    mode = "LSTM"


class GRUCell(_RNNCellBase):
    """torch.nn.GRUCell: gates (r, z, n), the reset gate applied to the hidden projection with its bias."""

    mode = "GRU"

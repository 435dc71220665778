"""torch's recurrent layers for Keras 3: RNN, LSTM and GRU (stacked, bidirectional, batch_first,
LSTM projections) and their cells, with torch's gate order and parameter names.

Why shims: Keras' LSTM/GRU are batch-first with one (in, 4H) kernel in gate order (i, f, c, o),
GRU's `reset_after` bias layout differs, and neither stacks layers or keeps torch's names. These
layers store torch's parameters under torch's names and shapes (`weight_ih_l0`,
`bias_hh_l1_reverse`, ...), so torch state dicts load as they are, and step through time in
torch's order (i, f, g, o) / (r, z, n), GRU's reset gate applied after the hidden projection.
Inter-layer `dropout` applies with `training=True` only, as torch.
"""

import math
from typing import Any

import keras
from keras import ops

from precision_transpiler.runtime.common import _GATES
from precision_transpiler.runtime.keras.functional import _keras_dtype, _uniform


def _matmul_t(x: Any, w: Any, b: Any) -> Any:
    """x @ w.T + b: torch's (out, in) weight layout."""
    y = ops.matmul(x, ops.transpose(w))
    return y if b is None else y + b


def _step(mode: str, gi: Any, h: Any, c: Any, w_hh: Any, b_hh: Any, w_hr: Any) -> tuple[Any, Any]:
    """One time step of `mode` given the input projection gi = x W_ih^T + b_ih: the new (h, c)."""
    gh = _matmul_t(h, w_hh, b_hh)
    if mode == "GRU":
        ir, iz, in_ = ops.split(gi, 3, axis=-1)
        hr, hz, hn = ops.split(gh, 3, axis=-1)
        r, z = ops.sigmoid(ir + hr), ops.sigmoid(iz + hz)
        n = ops.tanh(in_ + r * hn)
        return (1.0 - z) * n + z * h, c
    if mode == "LSTM":
        i, f, g, o = ops.split(gi + gh, 4, axis=-1)
        c = ops.sigmoid(f) * c + ops.sigmoid(i) * ops.tanh(g)
        h = ops.sigmoid(o) * ops.tanh(c)
        return (h if w_hr is None else ops.matmul(h, ops.transpose(w_hr))), c
    pre = gi + gh
    return (ops.tanh(pre) if mode == "RNN_TANH" else ops.relu(pre)), c


class _RNNBase(keras.layers.Layer):
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
        **kwargs: Any,
    ) -> None:
        super().__init__(dtype=_keras_dtype(dtype), **kwargs)
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
        self.seed_generator = keras.random.SeedGenerator()
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
                    weight = self.add_weight(shape=shape, initializer=_uniform(bound), name=name + suffix)
                    setattr(self, name + suffix, weight)
        self.built = True

    def flatten_parameters(self) -> None:
        """torch's cuDNN weight-compaction hint (model code calls it in `forward`): nothing to do here."""

    def _weights(self, suffix: str, dtype: Any) -> tuple[Any, ...]:
        """(w_ih, w_hh, b_ih, b_hh, w_hr) of one layer and direction, None where absent, cast to dtype."""

        def get(name: str) -> Any:
            var = getattr(self, name + suffix, None)
            return None if var is None else ops.cast(var, dtype)

        return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh"), get("weight_hr")

    def call(self, input: Any, hx: Any = None, training: bool | None = None) -> tuple[Any, Any]:
        dtype = self.compute_dtype
        unbatched = len(input.shape) == 2
        x = ops.expand_dims(input, 1) if unbatched else (ops.swapaxes(input, 0, 1) if self.batch_first else input)
        x = ops.cast(x, dtype)
        directions = 2 if self.bidirectional else 1
        n = ops.shape(x)[1]
        out_size = self.proj_size or self.hidden_size
        lstm = self.mode == "LSTM"
        h0, c0 = (hx if lstm else (hx, None)) if hx is not None else (None, None)
        if h0 is None:
            h0 = ops.zeros((self.num_layers * directions, n, out_size), dtype)
        if lstm and c0 is None:
            c0 = ops.zeros((self.num_layers * directions, n, self.hidden_size), dtype)
        if unbatched and hx is not None:
            h0 = ops.expand_dims(h0, 1)
            c0 = ops.expand_dims(c0, 1) if lstm else None
        hs, cs = [], []
        for layer in range(self.num_layers):
            outs = []
            for direction in range(directions):
                index = layer * directions + direction
                w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(f"_l{layer}" + ("_reverse" if direction else ""), dtype)
                gi = _matmul_t(x, w_ih, b_ih)
                h, c = ops.cast(h0[index], dtype), (ops.cast(c0[index], dtype) if lstm else None)
                steps = range(x.shape[0] - 1, -1, -1) if direction else range(x.shape[0])
                ys = [None] * x.shape[0]
                for t in steps:
                    h, c = _step(self.mode, gi[t], h, c, w_hh, b_hh, w_hr)
                    ys[t] = h
                outs.append(ops.stack(ys))
                hs.append(h)
                cs.append(c)
            x = ops.concatenate(outs, axis=-1) if directions == 2 else outs[0]
            if training and self.dropout and layer < self.num_layers - 1:
                x = keras.random.dropout(x, self.dropout, seed=self.seed_generator)
        h_n = ops.stack(hs)
        c_n = ops.stack(cs) if lstm else None
        if unbatched:
            x, h_n = x[:, 0], h_n[:, 0]
            c_n = c_n[:, 0] if lstm else None
        elif self.batch_first:
            x = ops.swapaxes(x, 0, 1)
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
        **kwargs: Any,
    ) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        self.mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"
        super().__init__(
            input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, dtype=dtype, **kwargs
        )
        self.nonlinearity = nonlinearity


class LSTM(_RNNBase):
    """torch.nn.LSTM: gates (i, f, g, o) stacked in `weight_ih_l{k}`; `proj_size` adds `weight_hr_l{k}`.
    Returns (output, (h_n, c_n))."""

    mode = "LSTM"


class GRU(_RNNBase):
    """torch.nn.GRU: gates (r, z, n), the reset gate applied to the hidden projection with its bias
    (`proj_size` is LSTM's only, refused as torch does)."""

    mode = "GRU"


class _RNNCellBase(keras.layers.Layer):
    """Shared body of RNNCell/LSTMCell/GRUCell: `weight_ih`, `weight_hh`, `bias_ih`, `bias_hh` as torch."""

    mode = "LSTM"

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(dtype=_keras_dtype(dtype), **kwargs)
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        init = _uniform(1.0 / math.sqrt(hidden_size) if hidden_size > 0 else 0.0)
        gates = _GATES[self.mode] * hidden_size
        self.weight_ih = self.add_weight(shape=(gates, input_size), initializer=init, name="weight_ih")
        self.weight_hh = self.add_weight(shape=(gates, hidden_size), initializer=init, name="weight_hh")
        self.bias_ih = self.add_weight(shape=(gates,), initializer=init, name="bias_ih") if bias else None
        self.bias_hh = self.add_weight(shape=(gates,), initializer=init, name="bias_hh") if bias else None
        self.built = True

    def call(self, input: Any, hx: Any = None) -> Any:
        dtype = self.compute_dtype
        unbatched = len(input.shape) == 1
        x = ops.cast(ops.expand_dims(input, 0) if unbatched else input, dtype)
        lstm = self.mode == "LSTM"
        h, c = (hx if lstm else (hx, None)) if hx is not None else (None, None)
        zeros = ops.zeros((ops.shape(x)[0], self.hidden_size), dtype)
        h = zeros if h is None else ops.cast(ops.expand_dims(h, 0) if unbatched else h, dtype)
        if lstm:
            c = zeros if c is None else ops.cast(ops.expand_dims(c, 0) if unbatched else c, dtype)
        b_ih = None if self.bias_ih is None else ops.cast(self.bias_ih, dtype)
        b_hh = None if self.bias_hh is None else ops.cast(self.bias_hh, dtype)
        gi = _matmul_t(x, ops.cast(self.weight_ih, dtype), b_ih)
        h, c = _step(self.mode, gi, h, c, ops.cast(self.weight_hh, dtype), b_hh, None)
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
        **kwargs: Any,
    ) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(
                f"Invalid nonlinearity selected for RNN. Can be either 'tanh' or 'relu'. Got {nonlinearity}"
            )
        self.mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"
        super().__init__(input_size, hidden_size, bias, dtype=dtype, **kwargs)
        self.nonlinearity = nonlinearity


class LSTMCell(_RNNCellBase):
    """torch.nn.LSTMCell: gates (i, f, g, o); returns (h', c')."""

    mode = "LSTM"


class GRUCell(_RNNCellBase):
    """torch.nn.GRUCell: gates (r, z, n), the reset gate applied to the hidden projection with its bias."""

    mode = "GRU"

"""Runtime definitions for converted torch code (`--to torch`).

Today it holds the `--device auto` decision (`device.py`). It is where the policy helpers that
torch outputs copy in will live, and the Flax and Keras semantics written in torch that code
converted from JAX or Keras to torch will need.
"""

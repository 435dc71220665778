"""Runtime definitions for converted torch code (`--to torch`).

Today it holds the precision policies' run time (`policy.py`: the `@_ptranspile_policy` forward
wrapper, fp32 islands, the `--device auto` decision), which a torch output under a policy carries
copied in. It is also where the Flax and Keras semantics written in torch that code converted from
JAX or Keras to torch will need would live.
"""

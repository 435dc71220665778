"""torch dtypes that a target has no counterpart for (`torch.complex32`, the quantized and
bit-packed dtypes, the float8 and wide unsigned ones the tables do not map): converted code names
each with a placeholder that equals only itself, so a membership test or comparison against the
target's dtypes gives torch's answer (not one of them), and allocating with one fails, naming the
torch dtype. Framework-free, shared by the Flax and Keras runtimes.
"""


class TorchOnlyDtype:
    """`torch.complex32` in converted code (kornia's `dtype not in (torch.float16, ...,
    torch.complex32, ...)`): equal to the same torch dtype only; NumPy, JAX and TensorFlow refuse
    it as a dtype with its torch name in the message."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"torch.{self.name}"

    def __eq__(self, other):
        return isinstance(other, TorchOnlyDtype) and other.name == self.name

    def __hash__(self):
        return hash(("torch", self.name))

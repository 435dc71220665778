"""What the original draws when it is built and keeps outside its state dict (verify/build_draws.py).

torchdyn's `CoupledFourierSystem` draws a count of harmonics and amplitudes when it is built
(`torch.randint(2, 20, size=(1,))`, `A_dist.sample(torch.Size([dim, n, 2]))`) and holds them as
plain attributes, which no state dict carries: the converted model draws its own from its own
generator, and however right the conversion, the outputs differ. After a failed comparison the
verifier builds the original again under another seed; the plain tensor attributes that come
out different are draws, given to the converted model as its weights were, and the comparison
runs again. A plain attribute the constructor computes is never copied, so a wrong conversion of
it still fails.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers import convert_and_verify, on_both_targets

FOURIER = """import torch
from torch import nn
from torch.distributions import Uniform


class Fourier(nn.Module):
    def __init__(self, dim=2, dist=Uniform(-1, 1)):
        super().__init__()
        self.harmonics = n = torch.randint(2, 6, size=(1,))
        self.amplitudes = dist.sample(torch.Size([dim, n, 2]))
        self.scale = torch.arange(dim, dtype=torch.float32) + 1
        self.mix = nn.Linear(dim, dim)

    def forward(self, s, x):
        return self.mix(self.amplitudes.sum((1, 2)) * torch.cos(s) * self.scale + x)
"""


@on_both_targets
def test_draws_of_the_build_are_given_to_the_converted_model(tmp_path: Path, target: str) -> None:
    verdict = convert_and_verify(tmp_path, FOURIER, target, "Fourier()", ["float32[2]", "float32[2]"])
    assert verdict.passed, verdict
    note = next(n for n in verdict.notes if "when it is built" in n)
    assert "draws harmonics, amplitudes when it is built" in note, note
    assert "scale" not in note, note


@on_both_targets
def test_a_computed_attribute_converted_wrong_still_fails(tmp_path: Path, target: str) -> None:
    def wrong(code: str) -> str:
        assert code.count("dtype=jnp.float32) + 1\n") + code.count("dtype=tf.float32) + 1\n") == 1, code
        return code.replace("float32) + 1\n", "float32) + 2\n")

    verdict = convert_and_verify(tmp_path, FOURIER, target, "Fourier()", ["float32[2]", "float32[2]"], edit=wrong)
    assert not verdict.passed, verdict

from siren_pytorch.siren_pytorch import Sine, Siren, SirenNet, SirenWrapper

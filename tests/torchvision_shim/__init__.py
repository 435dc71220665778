"""`sitecustomize.py` here is the tests' torchvision work-around (see its docstring); this folder
goes on the PYTHONPATH of subprocesses that import torchvision."""

"""normflows 1.7.3: this package's own flows/__init__.py is not vendored (it imports modules the CI slice does not carry)."""

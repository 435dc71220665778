"""The package version, in a module of its own: anything may import it without importing the
package root (which imports the API)."""

__version__ = "0.1.0"

"""The engine: everything that is not Qt. Nothing under this package may import Qt."""

"""SpecChat: local chat with speculative decoding, made visible."""

__version__ = "0.1.0"
PRODUCT_NAME = "SpecChat"

"""Measurement code for developers: the benchmark harness, replay, draft agreement and toy
models. The app's runtime path never imports it (an import-linter contract)."""

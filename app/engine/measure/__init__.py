"""Measurement code for developers: the benchmark harness, replay, the oracle's tables, draft
agreement and toy models. The app's runtime path never imports it (an import-linter contract)."""

"""The lab's tests use the engine's toy pair, loaded once per session as there."""

from tests.engine.conftest import toy_pair, toy_prompt, toy_useless_pair

__all__ = ["toy_pair", "toy_prompt", "toy_useless_pair"]

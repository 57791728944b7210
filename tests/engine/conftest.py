"""Engine fixtures: the toy pair loaded once; sessions are cheap and made per test."""

from __future__ import annotations

import pytest

from app.engine.decoding.loading import ModelPair, load_pair


@pytest.fixture(scope="session")
def toy_pair(toy_models) -> ModelPair:
    return load_pair(toy_models.main, toy_models.draft)


@pytest.fixture(scope="session")
def toy_useless_pair(toy_models) -> ModelPair:
    """A draft that shares the tokenizer but has unrelated random weights."""
    return load_pair(toy_models.main, toy_models.draft_random)


@pytest.fixture(scope="session")
def toy_prompt(toy_pair) -> list[int]:
    return toy_pair.tokenizer.encode("def fibonacci(n):\n    # return the n-th number\n")


@pytest.fixture
def store(tmp_path):
    """A fresh conversation database per test."""
    from app.engine.store.conversations import ConversationStore

    s = ConversationStore(tmp_path / "c.sqlite3")
    yield s
    s.close()

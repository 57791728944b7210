"""Compiling every pass shape before the controller times one."""

from app.engine.decoding.decode import generate
from app.engine.decoding.events import RoundEvent
from app.engine.policy.warmup import compile_pass_shapes


def test_every_draft_length_is_played_once(toy_pair, toy_prompt, monkeypatch):
    played = []

    def spy(session, prompt, *, policy, max_tokens, **kw):
        for event in generate(session, prompt, policy=policy, max_tokens=max_tokens, **kw):
            if isinstance(event, RoundEvent) and event.k:
                played.append(event.k)
            yield event

    monkeypatch.setattr("app.engine.policy.warmup.generate", spy)
    assert compile_pass_shapes(toy_pair, toy_prompt, max_k=4) >= 4
    assert sorted(set(played)) == [1, 2, 3, 4]


def test_without_a_draft_nothing_is_played(toy_pair, toy_prompt):
    from dataclasses import replace

    assert compile_pass_shapes(replace(toy_pair, draft=None), toy_prompt) == 0

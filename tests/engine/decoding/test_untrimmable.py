"""A model whose cache cannot be rewound (recurrent layers) still chats, plainly."""

from __future__ import annotations

from app.engine.decoding.loading import LoadedModel, ModelPair
from app.engine.decoding.policy import FixedDraftLength, PlainDecoding
from app.engine.decoding.session import ChatSession
from tests.engine.helpers import RecurrentLike, drive


def test_untrimmable_main_refuses_speculation_with_a_reason_and_generates_plainly(toy_pair, toy_prompt):
    main = toy_pair.main
    wrapped = LoadedModel(RecurrentLike(main.model), main.tokenizer, main.config, main.source)
    session = ChatSession(ModelPair(wrapped, toy_pair.draft))
    assert not session.can_speculate, "a cache that cannot be rewound stops speculation"
    assert "cannot be rewound" in session.speculation_refusal, "the refusal says why"
    out = drive(session, toy_prompt, FixedDraftLength(4), max_tokens=20, stop_ids=[])
    assert [n.kind for n in out.notices] == ["notice"], "one notice is given"
    assert "main model" in out.notices[0].message, "the notice names the main model"
    assert all(r.k == 0 for r in out.rounds)
    reference = drive(ChatSession(toy_pair), toy_prompt, PlainDecoding(), max_tokens=20, stop_ids=[])
    assert out.ids == reference.ids
    # a second, edited turn must start over instead of trimming
    edited = toy_prompt[:-2] + toy_pair.tokenizer.encode(" again")
    again = drive(session, edited, FixedDraftLength(4), max_tokens=10, stop_ids=[])
    fresh = drive(ChatSession(toy_pair), edited, PlainDecoding(), max_tokens=10, stop_ids=[])
    assert again.ids == fresh.ids, "the next answer is a fresh session's"
    assert again.offsets_ok, "every round left the caches in step with the tokens"

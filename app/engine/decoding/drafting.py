"""The two model passes of a round: the draft proposing k tokens, the main scoring them.

Both stay lazy: the loop evaluates the draft's ids once (the draft's only sync) and the
acceptance rule's verdict once (the main's), so timing a round costs no extra host syncs.
"""

from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx

from app.engine.decoding.sampling import Sampler
from app.engine.decoding.session import ChatSession
from app.engine.decoding.shapes import buckets


@dataclass(frozen=True, slots=True)
class Proposal:
    ids: mx.array  # (k,) proposed tokens, lazily computed
    scores: mx.array | None  # (k, V) the draft's processed scores; None: a lookup point mass
    draft_end: int | None  # tokens the draft cache holds afterwards (None: the draft did not run)
    catch_up: int = 0  # tokens the draft had to read before proposing (not those it skipped)


def propose(
    session: ChatSession, sampler: Sampler, k: int, history: mx.array, read_limit: int | None = None
) -> Proposal:
    """Run the draft k steps; its backlog (all of it, or the last `read_limit` tokens, skipping
    the rest) is read in the first step, together with `pending`."""
    draft = session.pair.draft
    assert draft is not None and session.draft_cache is not None and session.pending is not None
    if read_limit is not None:
        session.skip_draft(read_limit)
    lag = len(session.tokens) - session.draft_len
    tail = session.catch_up_draft()
    y = mx.array(tail + [session.pending], dtype=mx.uint32)
    ids: list[mx.array] = []
    scores: list[mx.array] = []
    compiled = session.draft_step  # the same for every step of the round: asked once
    for _ in range(k):
        # the first step reads the tail too: in pass sizes where the session buckets
        out = buckets.run(draft.model, session.draft_cache, y, session.bucketed, step=compiled)
        logits = out[:, -1, :]
        row = sampler.process(logits, history if sampler.uses_history else None)
        y = sampler.draw(row)
        mx.async_eval(y)  # type: ignore[no-untyped-call]  # mlx declares no types for it
        ids.append(y)
        scores.append(row)
        if sampler.uses_history:
            history = mx.concatenate([history, y])
    # pending and the first k-1 proposals went into the draft cache
    return Proposal(
        ids=mx.concatenate(ids),
        scores=mx.concatenate(scores, axis=0),
        draft_end=len(session.tokens) + k,
        catch_up=lag,
    )


def score(session: ChatSession, sampler: Sampler, fed: mx.array, history: mx.array) -> mx.array:
    """Main pass over `fed` -> processed scores (len(fed), V); row i sees fed[1 : i + 1] as history."""
    logits = buckets.run(
        session.pair.main.model, session.main_cache, fed, session.bucketed, step=session.main_step
    )[0]
    if not sampler.uses_history:
        return sampler.process(logits, None)
    rows = [
        sampler.process(logits[i : i + 1], mx.concatenate([history, fed[1 : i + 1]])) for i in range(fed.size)
    ]
    return mx.concatenate(rows, axis=0)

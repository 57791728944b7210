"""What the draft would have done where it did not draft: the verdicts the adaptive controller
learns from besides its own draft rounds. The main's confidence in each token, linked to the
draft's hits (ConfidenceLink), predicts them while the draft sits out; a probe's catch-up judges
the whole bypassed stretch in hindsight."""

from __future__ import annotations

from collections import deque

from app.engine.decoding.events import Provenance, RoundEvent
from app.engine.policy.confidence import ConfidenceLink
from app.engine.policy.config import AdaptiveConfig
from app.engine.policy.estimates import AcceptanceCounts


class DraftHindsight:
    """Teaches the controller's `link` and the draft's acceptance from the main's confidence and
    from hindsight; owns the tokens' recent confidence and the rounds a bypassed draft could
    have started."""

    def __init__(self, config: AdaptiveConfig, link: ConfidenceLink) -> None:
        self.config, self.link = config, link
        # per emitted token; None where the round did not compute it (see wants_confidence)
        self.recent_confidence: deque[float | None] = deque(maxlen=4096)
        # rounds the bypassed draft could have started in its last tokens: each one's chance of
        # having reached the newest token (AcceptanceCounts.add_predicted), oldest first
        self.open_rounds: list[float] = []

    def begin_answer(self) -> None:
        self.open_rounds = []

    def follow(self, event: RoundEvent, acceptance: AcceptanceCounts) -> None:
        """Learn from the confidence the round carries (the draft's `acceptance` is taught):
        teach the link with every draft verdict this round revealed; while the draft sits out,
        count the tokens as the rounds it would likely have had (at a third of a round each, as
        hindsight counts, since starts overlap)."""
        confidence, link, config = event.confidence, self.link, self.config
        if not confidence:  # not computed this round: keeps hindsight aligned with the tokens
            self.recent_confidence.extend([None] * len(event.emitted))
            return
        if event.source is Provenance.DRAFT:
            for j in range(min(event.accepted + 1, event.k, len(confidence))):
                link.learn(confidence[j], j < event.accepted)
            if event.accepted == event.k < len(confidence) and config.bonus_weight and link.informative():
                # every proposal passed: the main's own next token is the trial one more
                # proposal would have had, and its confidence prices it (deep positions are
                # otherwise seen only when played, so a short k could never learn to grow)
                p = link.predict(confidence[event.k])
                acceptance.add_at(event.k, p, config.bonus_weight)
            self.open_rounds.clear()
        elif link.informative():
            for c in confidence:
                acceptance.add_predicted(
                    self.open_rounds, link.predict(c), config.predicted_weight, config.max_k
                )
        self.recent_confidence.extend(confidence)

    def judge(self, hits: tuple[bool, ...]) -> list[tuple[int, int]]:
        """The draft's catch-up after a bypass says, for every skipped token, whether the draft
        would have proposed it: a round starting at token t would have had its run of hits from
        t accepted. So one probe judges the whole bypassed stretch, not just its own round, and
        a draft that became useful again is noticed at the first probe. Teaches the link, and
        returns those rounds as (k, accepted), in order."""
        recent = list(self.recent_confidence)[-len(hits) :] if self.recent_confidence else []
        if len(recent) == len(hits):  # the skipped tokens are the last ones emitted
            for c, hit in zip(recent, hits):
                if c is not None:
                    self.link.learn(c, hit)
        run = 0
        runs = []
        for hit in reversed(hits):
            run = run + 1 if hit else 0
            runs.append(run)
        runs.reverse()
        rounds = []
        for t, r in enumerate(runs):
            left = len(hits) - t
            rounds.append((r + 1 if r < left else left, r))
        return rounds

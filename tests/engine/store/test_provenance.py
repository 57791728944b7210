"""An answer's token record: its storage code stays exact while codes are kept a chunk at a time."""

from __future__ import annotations

from app.engine.decoding.events import Provenance
from app.engine.store.provenance import CODE_CHUNK, Answer, Piece

KINDS = (Provenance.MAIN, Provenance.DRAFT, Provenance.LOOKUP)


def test_a_long_answer_saved_as_it_grows_keeps_every_tokens_code_and_its_last_tail():
    answer = Answer()
    pieces = [Piece(f"w{i} " * (i % 3), KINDS[i % 3], i // 4) for i in range(3 * CODE_CHUNK + 5)]
    for n, piece in enumerate(pieces):
        answer.add(piece)
        if n in (10, CODE_CHUNK, CODE_CHUNK + 1, 2 * CODE_CHUNK + 7):  # checkpoints along the way
            answer.encoded()
    answer.add_tail("held back")  # the last token grows after the chunks before it were joined
    expected = [f"{len(p.text)}{'mdl'[i % 3]}{p.round}" for i, p in enumerate(pieces)]
    expected[-1] = (
        f"{len(pieces[-1].text) + len('held back')}{'mdl'[(len(pieces) - 1) % 3]}{pieces[-1].round}"
    )
    assert answer.encoded() == ";".join(expected)
    again = Answer.decode(answer.text, answer.encoded())
    assert again.parts == answer.parts and again.provenance == answer.provenance
    assert again.rounds == answer.rounds and again == answer

"""Messages to and from rank 0 survive the launcher's pipes and a terminal on the way."""

from __future__ import annotations

from app.engine.decoding.events import Provenance, TokenEvent
from app.engine.distributed.wire import END, LINE, TAG, Decoder, decode_lines, encode, pack, unpack


def test_a_long_message_is_cut_into_short_lines_and_put_back() -> None:
    message = {"t": "generate", "ids": list(range(2000))}
    lines = encode(message).splitlines()
    assert len(lines) > 1 and all(len(line) <= LINE + len(TAG) for line in lines)
    assert lines[-1].startswith(END) and all(line.startswith(TAG) for line in lines[:-1])
    assert list(decode_lines(iter(lines))) == [message]


def test_crlf_and_other_output_between_lines_are_ignored() -> None:
    text = encode({"t": "a"}) + "a warning a library printed\n" + encode({"t": "b", "n": 1})
    lines = [line + "\r\n" for line in text.splitlines()]
    assert list(decode_lines(iter(lines))) == [{"t": "a"}, {"t": "b", "n": 1}]
    assert Decoder().feed("unrelated\r\n") is None


def test_events_cross_as_themselves() -> None:
    event = TokenEvent(42, " fox", Provenance.DRAFT, 0.5, 3, 7)
    assert unpack(pack(event)) == event

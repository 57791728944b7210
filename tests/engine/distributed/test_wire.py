"""Messages to and from rank 0 survive the launcher's pipes and a terminal on the way, and
nothing but this session's well-formed JSON is ever taken for one."""

from __future__ import annotations

import base64
import io
import json
import pickle
import re
from pathlib import Path

import pytest

from app.engine.decoding.events import (
    Decision,
    EngineError,
    ErrorKind,
    FinishReason,
    GenerationFinished,
    GenerationStats,
    PrefillProgress,
    Provenance,
    Reason,
    RoundEvent,
    TokenEvent,
)
from app.engine.decoding.sampling import SamplingParams
from app.engine.distributed import codec
from app.engine.distributed.codec import BadMessage, event_data, event_from_data
from app.engine.distributed.wire import (
    LINE,
    READ_LIMIT,
    SESSION,
    TO_CALLER,
    TO_RANKS,
    Decoder,
    RankInfo,
    decode_lines,
    encode,
    new_token,
    read_lines,
    read_session_token,
)

TOKEN = new_token()


def _roundtrip(event: object) -> object:
    """An event as it crosses: to data, through the channel, back."""
    wire = encode({"t": "event", "e": event_data(event)}, TOKEN)  # type: ignore[arg-type]
    (message,) = decode_lines(iter(wire.splitlines()), TOKEN)
    return event_from_data(message["e"])


def test_a_long_message_is_cut_into_short_lines_and_put_back() -> None:
    message = {"t": "generate", "ids": list(range(2000))}
    lines = encode(message, TOKEN).splitlines()
    assert len(lines) > 1, "a long message is split over several lines"
    assert all(len(line) <= LINE + 80 for line in lines), "no line is much longer than the limit"
    assert all(line.startswith(f"{TO_CALLER} {TOKEN} ") for line in lines)
    assert list(decode_lines(iter(lines), TOKEN)) == [message]


def test_crlf_and_other_output_between_lines_are_ignored() -> None:
    text = encode({"t": "a"}, TOKEN) + "a warning a library printed\n" + encode({"t": "b", "n": 1}, TOKEN)
    lines = [line + "\r\n" for line in text.splitlines()]
    assert list(decode_lines(iter(lines), TOKEN)) == [{"t": "a"}, {"t": "b", "n": 1}]
    assert Decoder(TOKEN).feed("unrelated\r\n") is None


def test_every_event_crosses_as_itself() -> None:
    stats = GenerationStats(5, 1, 3, 0.25, 0.5, 2, 4, 3)
    events = [
        TokenEvent(42, " fox", Provenance.DRAFT, 0.5, 3, 7),
        RoundEvent(
            2,
            3,
            (5, 6, 7),
            2,
            (5, 6, 9),
            0.01,
            0.02,
            Provenance.DRAFT,
            decision=Decision(
                Reason.BEST, 3, expected_speedup=1.4, acceptance=(0.5, 0.25), draft_right=(1, 60)
            ),
            refused_text=" cat",
        ),
        PrefillProgress(64, 128, 0.125),
        GenerationFinished(FinishReason.LENGTH, "The fox", (1, 2), stats, tail="é"),
        EngineError("boom", kind=ErrorKind.CONTEXT, plain="too long"),
    ]
    assert [_roundtrip(event) for event in events] == events


def test_a_round_from_an_older_rank_with_a_retired_field_still_decodes() -> None:
    """An older SpecChat's round carried `left_out` (a slow round's record); it is read past."""
    event = RoundEvent(2, 3, (5, 6, 7), 2, (5, 6, 9), 0.01, 0.02, Provenance.DRAFT, refused_text=" cat")
    slow = {"k": 3, "source": "draft", "draft_tokens": 4, "main_tokens": 4, "position": 10, "seconds": 0.5}
    for left_out in (None, slow):
        data = json.loads(json.dumps({**event_data(event), "left_out": left_out}))
        assert event_from_data(data) == event, f"a round with left_out={left_out!r} decodes as the round"


def test_sampling_settings_cross_as_themselves() -> None:
    params = SamplingParams(temperature=0.7, top_p=0.9, top_k=40, seed=-3)
    assert codec.sampling_from_data(json.loads(json.dumps(codec.sampling_data(params)))) == params
    with pytest.raises(BadMessage):
        codec.sampling_from_data({**codec.sampling_data(params), "top_p": 2.0})  # type: ignore[dict-item]


class Exploded(Exception):
    pass


class _Payload:
    """What a hostile machine would send: unpickling it calls `explode`."""

    def __reduce__(self) -> tuple[object, tuple[()]]:
        return (_explode, ())


def _explode() -> None:
    Path(_MARKER).write_text("ran")
    raise Exploded


_MARKER = ""


def test_a_pickle_payload_is_refused_and_never_run(tmp_path: Path) -> None:
    global _MARKER
    _MARKER = str(tmp_path / "ran")
    payload = base64.b64encode(pickle.dumps(_Payload())).decode()
    decoder = Decoder(TOKEN)
    # the old wire format (a pickled event under the old tags) and this one's, with the right token
    old_style = encode({"t": "event", "id": 1, "e": payload}, TOKEN)
    as_frame = f"{TO_CALLER} {TOKEN} 0 1 {payload}"
    received = [decoder.feed(line) for line in [*old_style.splitlines(), as_frame, "@specchat. " + payload]]
    messages = [m for m in received if m is not None]
    assert messages == [{"t": "event", "id": 1, "e": payload}]  # a string field, as data
    with pytest.raises(BadMessage):
        event_from_data(messages[0]["e"])
    assert decoder.refused == 1  # the raw pickle in a frame is not JSON
    assert not Path(_MARKER).exists()


def test_lines_with_another_token_or_the_callers_tag_are_refused() -> None:
    decoder = Decoder(TOKEN)
    forged = encode({"t": "done", "id": 1}, new_token())
    echoed = encode({"t": "done", "id": 1}, TOKEN, TO_RANKS)  # a terminal echoing the caller's input
    assert [decoder.feed(line) for line in (forged + echoed).splitlines()] == [None, None]
    assert decoder.refused == 1  # the echo is not a rank-0 line at all


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"[1, 2, 3]",  # JSON, but not a message
        b'{"id": 1}',  # no type
        b'{"t": 7}',
        b"\xff\xfe",  # not UTF-8
        b"[" * 100_000 + b"]" * 100_000,  # deeper than the parser goes
    ],
)
def test_malformed_messages_are_refused(body: bytes) -> None:
    text = base64.b64encode(body).decode()
    parts = [text[i : i + LINE] for i in range(0, len(text), LINE)]
    lines = [f"{TO_CALLER} {TOKEN} {i} {len(parts)} {p}" for i, p in enumerate(parts)]
    decoder = Decoder(TOKEN)
    assert [m for m in map(decoder.feed, lines) if m is not None] == []
    assert decoder.refused == 1


def test_a_broken_frame_is_dropped_and_the_next_message_still_arrives() -> None:
    long = encode({"t": "a", "ids": list(range(500))}, TOKEN).splitlines()
    assert len(long) > 2
    decoder = Decoder(TOKEN)
    shuffled = [long[0], long[2], long[1], *long[3:]]  # out of order
    bad = [
        f"{TO_CALLER} {TOKEN} 0 2 ***",  # not base64
        f"{TO_CALLER} {TOKEN} 5 2 QQ==",  # index past the count
        f"{TO_CALLER} {TOKEN} 0 99999999999 QQ==",  # absurd count
        f"{TO_CALLER} {TOKEN} 0 1",  # fields missing
    ]
    good = encode({"t": "b"}, TOKEN).splitlines()
    got = [m for m in map(decoder.feed, [*shuffled, *bad, *good]) if m is not None]
    assert got == [{"t": "b"}]
    assert decoder.refused >= len(bad)


@pytest.mark.parametrize(
    "data",
    [
        {"event": "token", "id": "42", "text": "x", "provenance": "main", "time": 0, "round": 0, "index": 0},
        {"event": "token", "id": -1, "text": "x", "provenance": "main", "time": 0, "round": 0, "index": 0},
        {"event": "token", "id": 1, "text": "x", "provenance": "god", "time": 0, "round": 0, "index": 0},
        {"event": "token", "id": 1, "text": "x", "provenance": "main", "time": 0, "round": 0},
        {"event": "prefill", "done": 1, "total": 2, "seconds": float("nan")},
        {"event": "prefill", "done": True, "total": 2, "seconds": 1.0},
        {"event": "error", "message": "x", "kind": "y", "plain": ""},
        {"event": "__import__('os').system('true')"},
        "not a mapping",
    ],
)
def test_an_event_with_a_wrong_field_is_refused(data: object) -> None:
    with pytest.raises(BadMessage):
        event_from_data(data)


def test_a_huge_line_is_read_in_bounded_pieces() -> None:
    stream = io.StringIO("x" * (READ_LIMIT * 10) + "\n" + encode({"t": "a"}, TOKEN))
    lines = list(read_lines(stream))
    assert max(len(line) for line in lines) <= READ_LIMIT
    assert list(decode_lines(iter(lines), TOKEN)) == [{"t": "a"}]


def test_a_rank_reads_its_token_from_the_first_session_line() -> None:
    stream = io.StringIO(f"noise\r\n{SESSION}{TOKEN}\r\n")
    assert read_session_token(stream) == TOKEN
    assert read_session_token(io.StringIO(f"{SESSION}$(rm -rf ~)\n")) is None


def test_a_rank_description_is_typed_or_refused() -> None:
    info = RankInfo(1, "mini", 11, "0.32.4", "0.1.0")
    assert RankInfo.from_text(info.to_text()) == info
    for text in ('["1", "mini", 11, "a", "b"]', "[1, 2]", "{}", "nope", 5):
        with pytest.raises(ValueError):
            RankInfo.from_text(text)


def test_no_pickle_in_the_distributed_package() -> None:
    package = Path(codec.__file__).parent
    for source in package.glob("*.py"):
        text = source.read_text()
        assert not re.search(r"^\s*(import|from)\s+(c?pickle|marshal|shelve|dill)\b", text, re.M), source
        assert not re.search(r"(?<![.\w])(eval|exec)\(|yaml\.load\(", text), source  # mx.eval is MLX's

"""What the caller reads from the launcher is data from this session's rank 0, nothing else.

A stand-in rank 0 (a real child process, started as the launcher would be, with the session's
token in its environment) prints what a hostile machine on the list could: a pickle that would
create a file when unpickled, framed with the right token and in the old format, a message
under another token, malformed JSON; then it answers like rank 0, and sends a pickle as an event.
"""

from __future__ import annotations

import base64
import pickle
import sys
import textwrap
from pathlib import Path

import pytest

import app
from app.engine.decoding.events import EngineError, ErrorKind
from app.engine.distributed import session
from app.engine.distributed.session import Placement, ShardedPair
from app.engine.distributed.wire import PolicySpec

_ROOT = str(Path(app.__file__).resolve().parents[1])

_RANK_0 = textwrap.dedent(
    f"""
    import base64, os, sys
    sys.path.insert(0, {_ROOT!r})
    from app.engine.distributed.wire import TO_CALLER, TO_RANKS, TOKEN_ENV, Decoder, RankInfo, encode

    token, payload = os.environ[TOKEN_ENV], sys.argv[1]
    say = lambda message, key=token: sys.stdout.write(encode(message, key))
    print(f"{{TO_CALLER}} {{token}} 0 1 {{payload}}")  # a pickle in a frame: not JSON
    print("@specchat. " + payload)  # the old wire format's last line
    say({{"t": "fatal", "message": "forged"}}, "0" * 32)  # another session's token
    print(f"{{TO_CALLER}} {{token}} 0 1 " + base64.b64encode(b"{{oops").decode())  # malformed JSON
    say({{"t": "hello", "ranks": [RankInfo(0, "stand-in", os.getpid(), "m", "s").to_text()]}})
    say({{"t": "ready", "ready": {{"can_speculate": True, "context_length": 64}}}})
    sys.stdout.flush()
    decoder = Decoder(token, TO_RANKS)
    for line in sys.stdin:
        command = decoder.feed(line)
        if command is None:
            continue
        if command["t"] == "render":
            say({{"t": "rendered", "id": command["id"], "ids": [1, 2, 3]}})
        elif command["t"] == "generate":
            say({{"t": "event", "id": command["id"], "e": payload}})  # a pickle where an event goes
        elif command["t"] == "close":
            say({{"t": "closed"}})
            sys.stdout.flush()
            break
        sys.stdout.flush()
    """
)


class _Creates:
    """Unpickling this opens `path` for writing, which creates the file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (str(self.path), "w"))


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Rank 0 replaced by the script above; returns the file a pickle would create."""
    marker = tmp_path / "unpickled"
    payload = base64.b64encode(pickle.dumps(_Creates(marker))).decode()
    monkeypatch.setattr(
        session, "launch_command", lambda *args, **kwargs: [sys.executable, "-c", _RANK_0, payload]
    )
    return marker


def test_only_this_sessions_well_formed_messages_are_read(stand_in: Path) -> None:
    pair = ShardedPair("main", None, Placement(ranks=2), floor_s=20.0, load_timeout_s=60.0)
    try:
        assert [r.host for r in pair.ranks] == ["stand-in"], "the stand-in rank's host is read"
        assert pair.context_length == 64, "its context length is read"
        assert pair.render([{"role": "user", "content": "Hi"}]) == [1, 2, 3]
        assert pair.refused >= 3  # the framed pickle, the foreign token, the malformed JSON
        events = list(pair.generate([1, 2, 3], PolicySpec("plain"), max_tokens=4))
    finally:
        pair.close(timeout=5.0)
    assert len(events) == 1 and isinstance(events[0], EngineError)
    assert events[0].kind == ErrorKind.RANKS_LOST, "an unreadable message means the ranks are lost"
    assert "cannot read" in events[0].message, "the error says the message could not be read"
    assert not stand_in.exists()  # nothing was ever unpickled


def test_a_rank_line_cannot_rewrite_the_users_terminal() -> None:
    said = session.printable_line("\x1b[31mrank 1:\x1b[0m gone\x1b]0;owned\x07\x1b[2J")
    assert "\x1b" not in said, "no escape sequence reaches the terminal"
    assert "\x07" not in said, "no bell or title-ending character reaches the terminal"
    assert said.startswith("rank 1: gone"), "the words themselves are kept, without colours"

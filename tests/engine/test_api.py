"""The public engine API: the documented example, provenance, refusals and compatibility."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.engine.api import LoadedPair, Provenance, check_compatibility, load_pair, stream_generate
from app.engine.decoding.decode import generate
from app.engine.decoding.events import GenerationFinished
from app.engine.decoding.loading import LoadedModel, ModelPair
from app.engine.decoding.policy import PlainDecoding
from app.engine.decoding.session import ChatSession
from app.engine.decoding.templates.chat import format_chat
from tests.engine.helpers import RecurrentLike

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"
QUESTION = "Hello, how are you?"


@pytest.fixture(autouse=True)
def specchat_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Compatibility verdicts are cached in the library store: one per test."""
    home = tmp_path / "specchat-home"
    monkeypatch.setenv("SPECCHAT_HOME", str(home))
    return home


def _examples() -> list[str]:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    assert len(blocks) == 2, "docs/api.md holds two Python examples: one process, and a split main"
    return [str(b) for b in blocks]


def _example() -> str:
    return _examples()[0]


def _plain_ids(pair: ModelPair, question: str, max_tokens: int) -> tuple[int, ...]:
    prompt = format_chat(pair.tokenizer, [{"role": "user", "content": question}])
    events = generate(ChatSession(pair), prompt, policy=PlainDecoding(), max_tokens=max_tokens)
    return next(e for e in events if isinstance(e, GenerationFinished)).token_ids


def test_the_documented_example_runs_and_prints_what_it_says(toy_models, tmp_path, monkeypatch, capsys):
    (tmp_path / "toy").symlink_to(toy_models.main.parent)  # where `toy-models toy` would write
    monkeypatch.chdir(tmp_path)
    exec(compile(_example(), str(DOC), "exec"), {"__name__": "__main__"})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "compatibility: compatible"
    summary = re.fullmatch(
        r"(length|stop): (\d+) tokens, \d+ tok/s, (\d+) of (\d+) drafted tokens accepted", lines[-1]
    )
    assert summary, lines[-1]
    tokens = lines[1:-1]
    assert len(tokens) == int(summary[2])
    assert sum(line.startswith("draft ") for line in tokens) == int(summary[3]) > 0
    replaced = [line for line in tokens if "instead of the draft's" in line]
    assert replaced and all(line.startswith("main ") for line in replaced)


def test_the_documented_split_main_example_runs(toy_models, tmp_path, monkeypatch):
    """The second example starts two local ranks; its answer must arrive and the ranks end."""
    (tmp_path / "toy").symlink_to(toy_models.main.parent)
    monkeypatch.chdir(tmp_path)
    seen: list[object] = []
    code = _examples()[1].replace("    ...  #", "    seen.append(event)  #")
    scope = {"__name__": "__main__", "seen": seen}
    exec(compile(code, str(DOC), "exec"), scope)
    assert any(isinstance(e, GenerationFinished) for e in seen)
    assert scope["pair"].lost  # closed: the ranks were ended


@pytest.mark.parametrize("mode", ["fixed", "adaptive", "lookup", "off", "plain"])
def test_greedy_answers_are_plain_decodings_whatever_the_mode(toy_pair, mode):
    answer = stream_generate(LoadedPair(toy_pair), QUESTION, mode=mode, k=4, max_tokens=40)
    tokens = list(answer)
    assert tuple(t.id for t in tokens) == answer.answer.token_ids == _plain_ids(toy_pair, QUESTION, 40)
    assert "".join(t.text for t in tokens) + answer.answer.tail == answer.answer.text
    assert [t.index for t in tokens] == list(range(len(tokens)))
    if mode == "fixed":
        assert any(t.provenance is Provenance.DRAFT for t in tokens)
    if mode in ("off", "plain"):  # "plain" is the older word for off, still accepted
        assert {t.provenance for t in tokens} == {Provenance.MAIN}, (
            "with speculation off, every token is the main's"
        )
        assert answer.stats.proposed == 0, "nothing is drafted"


def test_refused_drafts_ride_on_the_token_the_main_chose_instead(toy_pair):
    answer = LoadedPair(toy_pair).stream(QUESTION, mode="fixed", k=4, max_tokens=40)
    tokens = list(answer)
    replacing = [t for t in tokens if t.refused_ids]
    assert replacing, "the toy draft is refused somewhere on this question"
    for token in replacing:
        assert token.provenance is Provenance.MAIN
        assert token.refused_ids[0] != token.id  # the main disagreed at the first refused place
        assert token.refused_text == toy_pair.tokenizer.decode(list(token.refused_ids))
    assert answer.answer.finish_reason == "length"  # so no refusal fell on a stop token
    stats = answer.stats
    assert sum(len(t.refused_ids) for t in tokens) == stats.proposed - stats.accepted
    assert sum(t.provenance is Provenance.DRAFT for t in tokens) == stats.accepted


def test_the_next_turn_reuses_the_conversation_in_the_caches(toy_pair):
    pair = LoadedPair(toy_pair)
    first = pair.stream(QUESTION, max_tokens=12)
    reply = "".join(t.text for t in first) + first.answer.tail
    conversation = [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": reply},
        {"role": "user", "content": "And then?"},
    ]
    second = pair.stream(conversation, max_tokens=12)
    list(second)
    assert second.stats.reused_tokens > 0


def test_a_pair_loaded_again_starts_from_what_it_learnt(toy_pair, tmp_path):
    """As the window does: the adaptive controller of a pair's next session starts from the last
    one's, saved after each answer; a policy of the caller's own is not saved."""
    from app.engine.library.store import Store

    store = Store(tmp_path / "store.sqlite3")
    first = LoadedPair(toy_pair, store)
    list(first.stream(QUESTION, max_tokens=12))
    learnt = first.policy("adaptive", 4).export_state()
    assert LoadedPair(toy_pair, store).policy("adaptive", 4).export_state() == learnt
    list(first.stream(QUESTION, max_tokens=12, policy=PlainDecoding()))
    assert LoadedPair(toy_pair, store).policy("adaptive", 4).export_state() == learnt
    assert LoadedPair(toy_pair).policy("adaptive", 4).export_state() != learnt, "no memory: from nothing"


def test_an_answer_left_half_read_is_stopped_before_the_next(toy_pair):
    pair = LoadedPair(toy_pair)
    first = pair.stream(QUESTION, mode="fixed", max_tokens=40)
    next(first)
    again = pair.stream(QUESTION, mode="fixed", max_tokens=40)  # the first is abandoned mid-answer
    assert first.answer.finish_reason == "cancelled"
    assert tuple(t.id for t in again) == _plain_ids(toy_pair, QUESTION, 40)


def test_stop_ends_the_answer_and_keeps_its_tokens(toy_pair):
    answer = LoadedPair(toy_pair).stream(QUESTION, max_tokens=40)
    read = [next(answer), next(answer)]
    answer.stop()
    assert answer.answer.finish_reason == "cancelled"
    assert answer.answer.token_ids[:2] == tuple(t.id for t in read)
    assert list(answer) == []


def test_cancel_ends_the_answer_at_the_next_round(toy_pair):
    answer = LoadedPair(toy_pair).stream(QUESTION, mode="fixed", max_tokens=40)
    first = next(answer)
    answer.cancel()  # what another thread would do; the reader reads on
    rest = list(answer)
    assert answer.answer.finish_reason == "cancelled"
    assert answer.answer.token_ids == (first.id, *(t.id for t in rest))
    assert len(rest) < 39


def test_stats_wait_for_the_last_token(toy_pair):
    answer = LoadedPair(toy_pair).stream(QUESTION, max_tokens=8)
    with pytest.raises(RuntimeError, match="still streaming"):
        _ = answer.stats
    assert len(list(answer)) == answer.stats.tokens


def test_a_pair_that_cannot_speculate_says_so_before_its_first_token(toy_pair):
    main = toy_pair.main
    wrapped = LoadedModel(RecurrentLike(main.model), main.tokenizer, main.config, main.source)
    pair = LoadedPair(ModelPair(wrapped, toy_pair.draft))
    assert not pair.can_speculate, "a cache that cannot be rewound stops speculation"
    assert "cannot be rewound" in (pair.speculation_refusal or ""), "the refusal says why"
    answer = pair.stream(QUESTION, mode="fixed", max_tokens=10)
    next(answer)
    assert [n.kind for n in answer.notices] == ["notice"]
    assert {t.provenance for t in answer} == {Provenance.MAIN}


def test_an_adaptive_mode_keeps_one_controller_across_a_pairs_answers(toy_pair):
    """What the controller learnt (this machine's costs) still holds for the next answer."""
    pair = LoadedPair(toy_pair)
    assert pair.policy("adaptive", 4) is pair.policy("adaptive", 4)
    assert pair.policy("lookup", 4) is not pair.policy("adaptive", 4)


def test_bad_settings_fail_before_any_model_work(toy_pair):
    pair = LoadedPair(toy_pair)
    with pytest.raises(
        ValueError, match="unknown mode 'sometimes': choose one of off, fixed, adaptive, lookup"
    ):
        pair.stream(QUESTION, mode="sometimes")  # type: ignore[arg-type]  # a caller's typo
    with pytest.raises(ValueError, match="max_tokens"):
        pair.stream(QUESTION, max_tokens=0)
    with pytest.raises(ValueError, match="draft length"):
        pair.stream(QUESTION, mode="fixed", k=99)


def test_compatibility_accepts_the_toy_draft(toy_models):
    verdict = check_compatibility(toy_models.main, toy_models.draft)
    assert verdict.compatible, "the toy draft fits the toy main"
    assert verdict.reason == "compatible", "the reason says compatible"
    assert verdict.reasons == (), "with no warnings"


def test_compatibility_refuses_a_draft_whose_ids_mean_other_text(toy_models, toy_mismatched_draft):
    verdict = check_compatibility(toy_models.main, toy_mismatched_draft)
    assert not verdict.compatible
    assert verdict.reason.startswith("incompatible: token 300 differs")
    assert [r.code for r in verdict.reasons] == ["token_text"]
    assert verdict.to_json()["compatible"] is False


def test_compatibility_names_a_model_that_is_not_there(toy_models, tmp_path):
    with pytest.raises(FileNotFoundError, match="is not downloaded"):
        check_compatibility(toy_models.main, "nobody/no-such-model")


def test_load_pair_explains_a_missing_folder():
    from app.engine.api import ModelLoadError

    with pytest.raises(ModelLoadError, match="neither an existing folder nor a hub repo id"):
        load_pair("/no/such/folder")

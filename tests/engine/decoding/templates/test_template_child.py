"""Model-file templates render in a child with real memory and time limits (issue 29, class 7).

Text built inside Jinja's C code (`str()` of a list, `tojson`, `string`, `join`) escapes the
sandbox's size checks; the child's limits stop it, the user reads one line whichever tripped,
and the child never outlives the pair or the app.
"""

from __future__ import annotations

import os
import queue
import resource
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.engine.decoding.templates import renderer
from app.engine.decoding.templates.chat import TemplateError, format_chat, render_chat
from app.engine.decoding.templates.renderer import (
    LIMIT_MESSAGE,
    TemplateRenderer,
    close_renderers,
    live_renderer_pids,
)
from app.engine.measure.toy import CHATML_TEMPLATE

ROOT = Path(__file__).resolve().parents[4]
MESSAGES = [{"role": "user", "content": "Hi"}]
LOOP_FOREVER = "{% for i in range(10**5) %}{% for j in range(10**5) %}{% endfor %}{% endfor %}"
# grows by a megabyte per step, where the tracer sees it, and stops at a gigabyte whatever happens
GROWING = (
    "{% set ns = namespace(items=[]) %}{% for i in range(1000) %}"
    "{% set ns.items = ns.items + ['x' * 10**6] %}{% endfor %}{{ ns.items | length }}"
)


def _tokenizer(template: str) -> SimpleNamespace:
    """The least format_chat needs of a tokenizer: a template and an encoder."""
    return SimpleNamespace(chat_template=template, encode=lambda text, add_special_tokens: [1] * len(text))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended
    except OSError:
        return False


def _gone_soon(pid: int) -> bool:
    for _ in range(200):  # a bound on waiting, not a timing being measured
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def small_limit(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    close_renderers()
    monkeypatch.setattr(renderer, "MEMORY_LIMIT", 256 << 20)
    yield
    close_renderers()


@pytest.mark.parametrize(
    "template",
    [
        "{{ ['x' * 10**7] * 40 }}",
        "{{ (['x' * 10**7] * 40) | tojson }}",
        "{{ (['x' * 10**7] * 40) | string }}",
        "{{ ([{'a': 'x' * 10**7}] * 40) | join(attribute='a') }}",
    ],
)
def test_text_built_in_c_is_stopped_by_the_memory_limit(template: str, small_limit: None) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    with pytest.raises(TemplateError) as caught:
        format_chat(_tokenizer(template), MESSAGES)
    assert str(caught.value) == LIMIT_MESSAGE
    # each template builds 400 MB of text: none of it was built in this process
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before < 150 << 20


def test_a_template_that_loops_forever_is_stopped(small_limit: None) -> None:
    with pytest.raises(TemplateError) as caught:
        format_chat(_tokenizer(LOOP_FOREVER), MESSAGES, timeout=0.3)
    assert str(caught.value) == LIMIT_MESSAGE
    # the child answered its own deadline and is kept; the next render goes on
    assert format_chat(_tokenizer(CHATML_TEMPLATE), MESSAGES)


def test_a_child_that_never_answers_is_killed_at_the_time_limit() -> None:
    silent = [sys.executable, "-c", "import time; print('{\"ready\": true}', flush=True); time.sleep(600)"]
    child = TemplateRenderer(command=silent, grace=0.2)
    try:
        with pytest.raises(TemplateError, match=LIMIT_MESSAGE):
            child.render(CHATML_TEMPLATE, MESSAGES, timeout=0.1)
        assert child.stopped == 1, "the renderer was stopped once"
        assert child.pid is None, "no renderer process is left"
    finally:
        child.close()


def test_where_no_address_limit_holds_the_parent_ends_a_growing_child() -> None:
    """macOS ignores RLIMIT_AS: there the parent reads the child's memory and ends it."""
    child = TemplateRenderer(memory_limit=256 << 20, address_limit=False)
    try:
        first = child.render(CHATML_TEMPLATE, MESSAGES)
        pid = child.pid
        with pytest.raises(TemplateError, match=LIMIT_MESSAGE):
            child.render(GROWING, MESSAGES, timeout=30)
        assert child.stopped == 1, "the renderer was stopped once"
        assert pid is not None and not _alive(pid), "its process has ended"
        assert child.render(CHATML_TEMPLATE, MESSAGES) == first  # a fresh child took its place
    finally:
        child.close()


def test_normal_templates_render_as_in_process() -> None:
    tokenizer = _tokenizer(CHATML_TEMPLATE)
    ids = format_chat(tokenizer, MESSAGES)
    assert ids == [1] * len(render_chat(CHATML_TEMPLATE, MESSAGES))
    with pytest.raises(TemplateError, match="raised an error: nope"):
        format_chat(_tokenizer("{{ raise_exception('nope') }}"), MESSAGES)
    close_renderers()


def test_the_child_is_gone_after_close_and_unload(toy_models) -> None:
    from app.engine.protocol import Generate, GenerationFinished, LoadPair, PairLoaded
    from app.engine.worker import EngineWorker

    child = TemplateRenderer()
    child.render(CHATML_TEMPLATE, MESSAGES)
    pid = child.pid
    child.close()
    assert pid is not None and not _alive(pid)

    inbox: queue.Queue = queue.Queue()
    worker = EngineWorker(inbox.put)
    worker.start()

    def until(kind: type) -> None:
        while not isinstance(inbox.get(timeout=120).event, kind):
            pass

    try:
        worker.submit(LoadPair(str(toy_models.main), None, warm_up=False))
        until(PairLoaded)
        worker.submit(Generate(tuple(MESSAGES), max_tokens=2))
        until(GenerationFinished)
        [pid] = live_renderer_pids()
        worker.submit(LoadPair(str(toy_models.main), None, warm_up=False))  # unloads the first
        until(PairLoaded)
        assert not _alive(pid), "the renderer process has ended"
        assert live_renderer_pids() == [], "no renderer is left running"
        worker.submit(Generate(tuple(MESSAGES), max_tokens=2))
        until(GenerationFinished)
        [pid] = live_renderer_pids()
    finally:
        assert worker.shutdown(timeout=30)
    assert not _alive(pid), "the renderer process has ended"
    assert live_renderer_pids() == [], "no renderer is left running"


@pytest.mark.parametrize("ending", ["exit", "kill"])
def test_no_child_outlives_the_app(ending: str) -> None:
    script = textwrap.dedent(
        f"""
        import sys, time
        from types import SimpleNamespace
        from app.engine.decoding.templates.renderer import live_renderer_pids
        from app.engine.decoding.templates.chat import format_chat
        tokenizer = SimpleNamespace(chat_template={CHATML_TEMPLATE!r}, encode=lambda t, add_special_tokens: [1])
        format_chat(tokenizer, [{{"role": "user", "content": "Hi"}}])
        print(live_renderer_pids()[0], flush=True)
        if {ending!r} == "kill":
            time.sleep(600)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    app = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env)
    assert app.stdout is not None
    pid = int(app.stdout.readline())
    if ending == "kill":
        app.send_signal(signal.SIGKILL)  # no atexit: the child sees its input end
    app.wait(timeout=60)
    assert _gone_soon(pid)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "role": st.sampled_from(["system", "user", "assistant", "tool"]),
                "content": st.text(
                    st.characters(exclude_categories=()) | st.sampled_from("\ud800\udfff\x00\n")
                ),
            }
        ),
        max_size=4,
    ),
    st.booleans(),
)
def test_the_child_renders_any_messages_as_the_sandbox_does(messages: list[dict], generation: bool) -> None:
    """Whatever text the messages hold (lone surrogates, NULs, newlines), the trip through the
    child changes nothing."""
    expected = render_chat(CHATML_TEMPLATE, messages, add_generation_prompt=generation)
    got = renderer.renderer_for(CHATML_TEMPLATE).render(
        CHATML_TEMPLATE, messages, add_generation_prompt=generation
    )
    assert got == expected

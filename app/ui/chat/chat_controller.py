"""The conversation flow: send, stream, stop, regenerate, edit, switch pairs, checkpoint.

The conversation's `Transcript` (app.engine.store.transcript), which the chat view draws by
following its notifications, changes on send, edit and regenerate only through the `ChatLog`
(app.engine.store.chat_log), which commits each change before showing it: the controller never
keeps the two in step by hand. The user's turn is committed before the Generate command is
submitted, and a change that cannot be committed is reported through `failed` while the text
stays in the composer and the transcript stays as stored; the growing answer is checkpointed at
least twice a second and on every stop, so a killed app loses well under a second. Every engine
call here is a non-blocking submit or cancel.

It is one module past 400 lines because a load, a send and the stream all turn on the same state:
a load stops the answer in flight, an answer is recorded against the pair that wrote it, and a lost
machine reloads the pair mid-answer. What can stand alone already does (the live answer, the plain
baselines, the waits, the drafts, the losslessness check).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from PySide6.QtCore import QObject, QSettings, Signal

from app.engine.decoding.events import (
    EngineError,
    FinishReason,
    GenerationFinished,
    PrefillProgress,
    RoundEvent,
    TokenEvent,
    WarmUpProgress,
)
from app.engine.features.baselines import BaselineCache, context_bucket
from app.engine.features.prompt_kind import classify
from app.engine.protocol import (
    ContextOverflow,
    Generate,
    GenerationContext,
    LoadPair,
    LoadQueued,
    LoadStarted,
    PairLoaded,
    SpeculationMode,
    WorkerMessage,
)
from app.engine.store.chat_log import ChatLog
from app.engine.store.conversations import ConversationError, ConversationStore
from app.engine.store.drafts import Drafts
from app.engine.store.history import LOOKUP, RunHistory
from app.engine.store.transcript import AnswerTurn, MessageState, Role
from app.engine.store.write_failure import (
    STORAGE_ERRORS,
    answer_not_regenerated,
    answer_not_saved,
    answer_not_started,
    message_not_sent,
    settings_not_saved,
    speed_not_kept,
)
from app.ui.chat.answer_speedups import fill_transcript, fill_turns
from app.ui.chat.live_answer import Live
from app.ui.chat.settings_dialog import ChatSettings
from app.ui.chat.stats import LiveStats, StatusStrip
from app.ui.chat.tokens import Assembler
from app.ui.common.engine_bridge import EngineBridge
from app.ui.common.plain_speed import BaselineStatus, PlainBaselines
from app.ui.common.platform_words import this_machine
from app.ui.common.settings import chosen_hostfile
from app.ui.common.stats_words import pair_line
from app.ui.common.wait_progress import duration

CHECKPOINT_SECONDS = 0.5
WAITING_TO_LOAD = {  # LoadQueued.stopping: what a load waits for before it begins
    True: "Stopping the current work before loading…",
    False: "Waiting for the models being loaded to finish…",
}
CUT_AT_LENGTH = "Cut at max tokens"  # the settings field that sets it, by its name
FINISHED_STATES = {
    MessageState.COMPLETE: "Done",
    MessageState.CANCELLED: "Stopped",
    MessageState.ERROR: "Failed",
}


class ChatController(QObject):
    busy_changed = Signal(bool)
    conversations_changed = Signal()
    pair_changed = Signal(str)  # a sentence describing the loaded pair, or the load error
    notice = Signal(str)  # news the status bar may show for a while
    failed = Signal(str)  # a failure the window keeps on screen until the user dismisses it
    load_failed = Signal(str, str)  # a failed load in plain words, and its technical detail ("" if none)
    switched = Signal()  # another conversation (or the new chat) is now the current one
    baseline_status = Signal(object)  # BaselineStatus: the plain speed the dashboard compares with
    history_changed = Signal()

    def __init__(
        self,
        store: ConversationStore,
        bridge: EngineBridge,
        strip: StatusStrip,
        settings: QSettings,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.store, self.bridge, self.strip = store, bridge, strip
        self.log = ChatLog(store)
        self.transcript = self.log.transcript  # read here; changed by the log, by streaming and by loads
        self.baselines = BaselineCache()
        self.history = RunHistory(store)
        self.drafts = Drafts(store)
        self.plain = PlainBaselines(
            bridge,
            self.baselines,
            self.history,
            idle=lambda: self.live is None and self.load_request is None,
            parent=self,
        )
        self.plain.status.connect(self._plain_speed_known)  # before the dashboard hears of it
        self.plain.status.connect(self.baseline_status)
        self.plain.status.connect(lambda _s: self.history_changed.emit())
        self.conversation: int | None = None
        self.settings = settings  # read again at each load: the machines the main is split over
        defaults: Any = settings.value("defaults", {}) or {}
        self.chat_settings = ChatSettings.from_dict(dict(defaults))
        self.live: Live | None = None
        self.pair: tuple[str, str | None] | None = None
        self.mode_override: str | None = None  # "off"/"lookup" when the picker chose no draft model
        self.load_request: int | None = None
        self.loading: tuple[str, str | None] = ("", None)  # the pair being loaded, to name on failure
        self.editing: int | None = None  # key of the user message being edited
        bridge.batch.connect(self.on_batch)
        self.switched.connect(lambda: self.strip.show_answer(self.transcript.last_answer()))

    @property
    def busy(self) -> bool:
        return self.live is not None

    # -- models ---------------------------------------------------------------------------------
    def load_pair(self, main: str, draft: str | None, mode: str = "model", *, alone: bool = False) -> None:
        """Switching mid-stream saves the partial answer first, then queues the load. The main
        is split over the machines chosen in the picker unless `alone` (or none are chosen)."""
        if self.live is not None:
            self.stop()
        self.pair = None
        self.mode_override = {"plain": "off", "lookup": "lookup"}.get(mode)
        self.loading = (main, draft)
        hostfile = None if alone else chosen_hostfile(self.settings)
        self.load_request = self.bridge.submit(
            LoadPair(main, draft, hostfile=str(hostfile) if hostfile else None)
        )
        self.strip.set_state("Loading models…")
        self.strip.clear_stats()  # the last answer's numbers belong to the pair being replaced

    # -- conversations --------------------------------------------------------------------------
    def open(self, conversation_id: int) -> bool:
        if self.live is not None:
            self.stop()
        self._leave()
        try:
            c = self.store.load(conversation_id)
        except ConversationError as exc:
            self.failed.emit(f"Could not open the conversation: {exc}")
            return False
        self.conversation = c.id
        self.editing = None
        self.chat_settings = ChatSettings.from_dict(c.settings, c.system_prompt)
        self.transcript.reset(fill_turns(c.turns(), self.history, c.id))
        self.switched.emit()
        if c.damaged:
            self.notice.emit("Part of this conversation was damaged; what could be read is shown.")
        return True

    def new_conversation(self) -> None:
        if self.live is not None:
            self.stop()
        self._leave()
        self.conversation = None
        self.editing = None
        self.transcript.reset()
        self.switched.emit()
        self.conversations_changed.emit()

    def _leave(self) -> None:
        """An answer whose save failed gets one more try before it leaves the screen."""
        try:
            self.log.catch_up()
        except STORAGE_ERRORS:
            pass  # the user was told when its save failed, and the file still refuses it

    def save_settings(self, settings: ChatSettings) -> None:
        self.chat_settings = settings
        if self.conversation is not None:
            try:
                with self.store.transaction():
                    self.store.set_system_prompt(self.conversation, settings.system_prompt)
                    self.store.set_settings(self.conversation, settings.to_dict())
            except STORAGE_ERRORS as exc:
                self.failed.emit(settings_not_saved(exc, self.store.path))

    # -- turns ----------------------------------------------------------------------------------
    def send(self, text: str) -> bool:
        if self.live is not None or not text.strip():
            return False
        if self.pair is None:
            self.notice.emit("Choose a model pair first (Models ▸ Choose models…).")
            return False
        if self.editing is not None and self.transcript.find(self.editing) is not None:
            return self._resend_edit(text)
        self.editing = None  # the edited turn is gone (a regenerate removed it): a new question
        s, old = self.chat_settings, self.conversation
        try:  # a new conversation, its first turn and the draft's removal commit together or not at all
            cid, _ = self.log.ask(
                old,
                text,
                system_prompt=s.system_prompt,
                settings=s.to_dict(),
                also=lambda: self.drafts.clear(old),
            )
        except STORAGE_ERRORS as exc:
            self.failed.emit(message_not_sent(exc, self.store.path))
            return False
        if old is None:
            self.conversation = cid
            self.conversations_changed.emit()
        self._generate()
        return True  # the turn is saved even if its answer could not start: the composer may clear

    def begin_edit(self, key: int) -> str | None:
        """Returns the user text to put back in the composer."""
        if self.live is not None:
            self.stop()
        message = self.transcript.find(key)
        if message is None or message.role is not Role.USER:
            return None
        self.editing = key
        return message.text

    def cancel_edit(self) -> None:
        self.editing = None

    def _resend_edit(self, text: str) -> bool:
        key, cid = self.editing, self.conversation
        assert cid is not None and key is not None  # send() found the turn
        try:
            self.log.edit(cid, key, text, also=lambda: self.drafts.clear(cid))
        except STORAGE_ERRORS as exc:
            self.failed.emit(message_not_sent(exc, self.store.path))
            return False  # still editing, and the text stays in the box
        self.editing = None
        self._generate()
        return True

    def regenerate(self, key: int | None = None) -> bool:
        if self.pair is None or self.conversation is None:
            return False
        if self.live is not None:
            self.stop()
        try:  # the old answer's removal and the new one's start commit together or not at all
            answer = self.log.regenerate(self.conversation, key)
        except STORAGE_ERRORS as exc:
            self.failed.emit(answer_not_regenerated(exc, self.store.path))
            return False
        return answer is not None and self._generate(answer)

    def _generate(self, message: AnswerTurn | None = None) -> bool:
        """Stream an answer into `message`, or into a new one after the last turn."""
        assert self.conversation is not None and self.pair is not None
        if message is None:
            try:
                message = self.log.start_answer(self.conversation)
            except STORAGE_ERRORS as exc:
                self.failed.emit(answer_not_started(exc, self.store.path))
                return False
        s = self.chat_settings
        speculation = s.speculation_settings()
        if self.mode_override is not None:
            speculation = replace(speculation, mode=SpeculationMode(self.mode_override))
        chat = self.transcript.chat(s.system_prompt, before=self.transcript.position(message.key))
        command = Generate(chat, s.sampling(), speculation, s.max_tokens, ContextOverflow(s.overflow))
        asked = self.transcript.last_question()
        self.plain.preempt()  # a background measurement gives way to the user
        stats = LiveStats(mode=speculation.mode)  # its plain speed comes with the context size
        self.live = Live(
            self.bridge.submit(command),
            message,
            Assembler(message.answer),
            stats,
            main=self.pair[0],
            draft=self.pair[1],
            temperature=s.temperature,
            kind=classify(asked),
        )
        self.strip.set_state("Generating")
        self.strip.show_stats(replace(stats.snapshot(), draft=self.pair[1]))
        self.busy_changed.emit(True)
        return True

    def cancel_load(self) -> bool:
        """A load not yet begun is skipped; one under way stops between two groups of tensors
        and gives its memory back (a split main's cannot stop halfway: the pair it may still load
        is not used until picked again). False when no load was under way."""
        if self.load_request is None:
            return False
        self.bridge.cancel(self.load_request)
        self.load_request = None
        self.strip.set_state("No model loaded")
        self.pair_changed.emit("Loading cancelled")
        return True

    def stop(self) -> None:
        """Cancel and save what was shown; the worker's late events for it are ignored."""
        if self.live is None:
            return
        self.bridge.cancel(self.live.request)
        self._finish(self.live, MessageState.CANCELLED)

    # -- engine messages ------------------------------------------------------------------------
    def on_batch(self, batch: tuple[WorkerMessage, ...]) -> None:
        live = self.live
        for message in batch:
            event = message.event
            if message.request == self.load_request:
                self._on_load(event)
            elif live is not None and message.request == live.request:
                if isinstance(event, TokenEvent):
                    if live.stats.tokens == 0:
                        self.strip.set_state("Generating")
                    live.assembler.token(event)
                    live.stats.token(event)
                    live.ids.append(event.id)
                elif isinstance(event, RoundEvent):
                    live.assembler.round(event.accepted, event.refused_text)
                    live.stats.round(event)
                elif isinstance(event, GenerationContext):
                    live.context = event.prompt_tokens
                    plain = self.plain.reading(event.main, event.prompt_tokens)
                    live.stats.plain_speed = plain.tok_s if plain else None
                    live.stats.plain_range = (plain.low, plain.high) if plain else None
                    self.baseline_status.emit(
                        BaselineStatus(
                            event.main,
                            event.prompt_tokens,
                            live.stats.plain_speed,
                            self.plain.measuring,
                            live.request,
                            live.stats.plain_range,
                        )
                    )
                elif isinstance(event, PrefillProgress):
                    self.strip.set_state(
                        f"Reading prompt {event.done:,}/{event.total:,} · {duration(event.seconds)}"
                    )
                elif isinstance(event, GenerationFinished):
                    live.assembler.answer.add_tail(event.tail)
                    live.assembler.flush()
                    self.transcript.extend_answer(live.message, live.assembler.ready)  # shown live too
                    live.stats.finish(event)
                    cancelled = event.reason == "cancelled"
                    self._finish(live, MessageState.CANCELLED if cancelled else MessageState.COMPLETE)
                    live = None
                elif isinstance(event, EngineError) and event.kind == "notice":
                    self.notice.emit(event.message)
                elif isinstance(event, EngineError) and event.kind == "ranks_lost":
                    self._finish(live, MessageState.ERROR)
                    live = None
                    self._reload_alone(event.message)
                elif isinstance(event, EngineError):
                    self.failed.emit(f"The answer failed: {event.message}")
                    self._finish(live, MessageState.ERROR)
                    live = None
        if live is not None and self.live is live:
            self.transcript.extend_answer(live.message, live.assembler.ready)
            self.strip.show_stats(replace(live.stats.snapshot(), draft=live.draft))
            if time.monotonic() - live.last_checkpoint >= CHECKPOINT_SECONDS:
                self._checkpoint(live, MessageState.PARTIAL)

    def _on_load(self, event: object) -> None:
        if isinstance(event, PairLoaded):
            self.pair = (event.main, event.draft)
            self.load_request = None
            self.strip.set_state("Ready")
            self.pair_changed.emit(pair_line(event, self.mode_override))
            if event.speculation_refusal:
                self.notice.emit(event.speculation_refusal)
        elif isinstance(event, LoadQueued):  # what ran is stopping (or is a load that cannot)
            self.strip.set_state(WAITING_TO_LOAD[event.stopping])
        elif isinstance(event, LoadStarted):
            self.strip.set_state("Loading models…")
        elif isinstance(event, WarmUpProgress):  # a GPU builds kernels per pass shape: done once per load
            self.strip.set_state(f"Preparing speculation: compiling pass shapes {event.done}/{event.total}…")
        elif isinstance(event, EngineError) and event.kind == "notice":
            self.notice.emit(event.message)
        elif isinstance(event, EngineError):
            self.load_request = None
            self.strip.set_state("No model loaded")
            self.strip.clear_stats()
            words = event.plain or event.message  # the technical message goes behind Details
            self.pair_changed.emit(f"Could not load: {words}")
            main, helper = self.loading
            pair = f"{main} with the draft {helper}" if helper else main
            self.load_failed.emit(f"Could not load {pair}: {words}", event.message if event.plain else "")

    def _plain_speed_known(self, status: BaselineStatus) -> None:
        """A plain speed became known: the answer streaming at its context compares with it, and
        so do the shown answers whose history rows just got it."""
        live = self.live
        if status.plain_tok_s is None:
            return
        if (
            live is not None
            and live.stats.plain_speed is None
            and live.context is not None
            and (live.main, context_bucket(live.context)) == (status.main, status.bucket)
        ):
            live.stats.plain_speed = status.plain_tok_s
            live.stats.plain_range = status.plain_range
        filled = fill_transcript(self.transcript, self.history, self.conversation)
        last = self.transcript.last_answer()
        if live is None and any(turn is last for turn in filled) and self.strip.has_stats:
            self.strip.show_answer(last)

    def _reload_alone(self, why: str) -> None:
        """A machine holding part of the main stopped answering: the text so far is kept, and
        the pair is loaded on this machine alone (the machines stay chosen for the next start)."""
        (main, draft), mode = self.pair or self.loading, {"off": "plain", "lookup": "lookup"}
        self.failed.emit(
            f"The answer stopped: {why}. The text so far is kept. Loading the models on {this_machine()} alone; "
            "choose “Run the main model across machines…” in the model picker to try the machines again."
        )
        self.load_pair(main, draft, mode.get(self.mode_override or "", "model"), alone=True)

    def _record(self, live: Live, state: MessageState) -> None:
        """Keep the answer's speed in the history; plain answers are baseline evidence, and a
        speculative one at a context with no plain speed yet gets it measured once idle."""
        assert self.pair is not None and live.context is not None
        main, draft = self.pair
        s, context, rate, mode = live.stats, live.context, live.stats.stream_rate, live.stats.mode
        if mode == "off":
            label = ""
            if s.tokens >= 16 and rate > 0:
                self.plain.feed(main, context, rate)
        else:
            label = LOOKUP if mode == "lookup" or not draft else draft
        plain = self.plain.reading(main, context) if mode != "off" else None
        try:
            if (
                self.history.record(live.run(label, plain, state, self.conversation, self.plain.load()))
                is not None
            ):
                self.history_changed.emit()
        except STORAGE_ERRORS as exc:  # the answer itself is saved; only its place in the history is lost
            self.notice.emit(speed_not_kept(exc))
        # after a Stop the worker stays quiet: no measurement starts behind the user's back
        stopped = state is MessageState.CANCELLED
        if mode != "off" and plain is None and not stopped and self.plain.want(main, context):
            self.baseline_status.emit(BaselineStatus(main, context, None, True))

    def _checkpoint(self, live: Live, state: MessageState) -> None:
        """A failed save is said once per answer; the log saves it again before the next change."""
        self.transcript.checkpoint(live.message, state, live.answer_stats())
        live.last_checkpoint = time.monotonic()
        told = self.log.owed is live.message
        try:
            self.log.save_answer(live.message)
        except STORAGE_ERRORS as exc:
            if not told:
                self.failed.emit(answer_not_saved(exc, self.store.path))

    def _finish(self, live: Live, state: MessageState) -> None:
        """Saved before it is drawn: rendering a long answer as markdown takes a while."""
        self.live = None
        live.assembler.flush()
        self._checkpoint(live, state)
        stats = live.message.stats
        self.transcript.finish_answer(live.message, state, stats)
        if self.pair is not None and live.context is not None and state is not MessageState.ERROR:
            self._record(live, state)
        cut = state is MessageState.COMPLETE and stats.finish_reason == FinishReason.LENGTH
        # an answer cut at the length limit is not done: it says so, and how to get more
        self.strip.set_state(CUT_AT_LENGTH if cut else FINISHED_STATES.get(state, state.value))
        self.strip.show_stats(stats)
        self.busy_changed.emit(False)
        self.conversations_changed.emit()

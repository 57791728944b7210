"""The main window: sidebar, pair bar, transcript or welcome panel, composer, status strip, menus."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, QSettings, Qt
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QPushButton,
    QSplitter,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from app import PRODUCT_NAME
from app.engine.library.discovery import Sources
from app.engine.library.recommended import RecommendedPair
from app.engine.store import write_failure
from app.engine.store.conversations import ConversationError, ConversationStore
from app.engine.worker import remembering_worker
from app.ui.arena.arena import ArenaDialog
from app.ui.chat.chat_controller import ChatController
from app.ui.chat.chat_view import ChatView
from app.ui.chat.chat_waits import ChatWaits
from app.ui.chat.composer import Composer
from app.ui.chat.composer_drafts import DraftKeeper
from app.ui.chat.empty_states import WELCOME, EmptyChat, NeedModelsBar, pane_state
from app.ui.chat.lossless_view import LosslessChecker
from app.ui.chat.preset_link import PresetLink
from app.ui.chat.settings_dialog import SettingsDialog
from app.ui.chat.sidebar import Sidebar
from app.ui.chat.stats import StatusStrip
from app.ui.chat.text.render import Options
from app.ui.common.background import BackgroundTasks
from app.ui.common.engine_bridge import EngineBridge, EngineFactory
from app.ui.common.error_banner import ErrorBanner, reason, show_error_dialog
from app.ui.common.settings import app_settings
from app.ui.common.theme import current_theme
from app.ui.common.wait_progress import WaitPanel
from app.ui.dashboard.dashboard import Dashboard
from app.ui.library.model_library import ModelLibrary
from app.ui.library.welcome import WelcomePanel
from app.ui.picker.new_models import NewModels
from app.ui.picker.picker import PickerDialog
from app.ui.server.serving import ServerSwitch
from app.ui.window import window_state as state
from app.ui.window.appearance import Appearance
from app.ui.window.chat_actions import ChatActions
from app.ui.window.last_load import LastLoadBar, follow_loads, note_attempt, start_pair
from app.ui.window.menus import Commands, build_menus
from app.ui.window.recovery_notice import show_recovery
from app.ui.window.store_notice import StoreNotice


class MainWindow(ChatActions):
    def __init__(
        self,
        *,
        engine_factory: EngineFactory = remembering_worker,
        store: ConversationStore | None = None,
        settings: QSettings | None = None,
        sources: Sources | None = None,
        restore_pair: bool = True,
        quit_wait: float = 5.0,
    ) -> None:
        super().__init__()
        self.quit_wait = quit_wait  # seconds the close waits for the worker to reach a safe point
        self.setWindowTitle(PRODUCT_NAME)
        self.settings = settings or app_settings()
        self.store = store or ConversationStore()
        self.banner = ErrorBanner()  # failures stay here until dismissed; the status bar forgets
        self.last_load = LastLoadBar(self.settings)  # a pair whose last load did not finish
        self.error_box: QMessageBox | None = None  # the last failed export's message
        self.background = BackgroundTasks(self, lambda exc: self.report_error(f"A task failed: {exc}"))
        self.bridge = EngineBridge(engine_factory, parent=self)
        self.composer, self.strip = Composer(), StatusStrip()
        self.sidebar, self.welcome = Sidebar(), WelcomePanel()
        self.empty, self.need_models = EmptyChat(), NeedModelsBar()
        self.appearance = Appearance(self.settings, self)
        self.controller = ChatController(self.store, self.bridge, self.strip, self.settings, self)
        self.view = ChatView(self.controller.transcript)
        self.waits = WaitPanel(self.settings)  # long waits, with time, estimate and Cancel
        self.library = ModelLibrary(self.settings, self.background, self.waits, self, sources)
        self.chat_waits = ChatWaits(self.controller, self.waits, self)
        self.drafts = DraftKeeper(self.composer.editor, self.controller, self)
        self.presets = PresetLink(self.composer, self.controller, self.settings)
        self.pair_label, self.pair_button = QLabel("No models loaded"), QPushButton("Choose models…")
        self.dashboard = Dashboard(self, history=self.controller.history)
        self.checker = LosslessChecker(self.controller, self)
        self.arena: ArenaDialog | None = None
        self.new_models = NewModels(self.load_pair, lambda: self.controller.pair, self)
        self._build()
        self.serving = ServerSwitch(
            self, self.settings, self.controller, self.bridge.engine, self.report_error
        )
        self.library.scanned.connect(self.serving.library_scanned)
        self.toggles = build_menus(
            self.menuBar(), self._commands(), self.dashboard, self.serving, self.appearance
        )
        self._wire()
        state.restore_window(self, self.splitter, self.settings)
        self.refresh_sidebar()
        if (cid := state.conversation_to_reopen(self.settings, self.store)) is not None:
            self.controller.open(cid)
            self.refresh_sidebar()
        self.recovery_notice = show_recovery(self, self.store.recovery)
        refusals = (self.controller.failed, self.drafts.failed)  # a refused save brings back Retry
        self.store_notice = StoreNotice(self, self.store, refusals)
        self.store_notice.reopened.connect(self.refresh_sidebar)
        self.view.set_options(
            Options(
                bool(self.settings.value("view/highlight", True, type=bool)),
                bool(self.settings.value("view/rejected", False, type=bool)),
            )
        )
        self.toggles.highlight.setChecked(self.view.options.highlight)
        self.toggles.rejected.setChecked(self.view.options.show_rejected)
        self.strip.set_refused_on_hover(self.view.options.show_rejected)
        self.toggles.measure_on_battery.setChecked(
            bool(self.settings.value("plain/measure_on_battery", False, type=bool))
        )
        self.library.scan()
        if restore_pair:
            start_pair(self.settings, self.last_load, self.load_pair)

    # -- layout ---------------------------------------------------------------------------------
    def _build(self) -> None:
        bar = QWidget()
        row = QHBoxLayout(bar)
        row.setContentsMargins(10, 6, 10, 6)
        row.addWidget(QLabel("<b>Models:</b>"))
        row.addWidget(self.pair_label, 1)
        row.addWidget(self.pair_button)
        self.stack = QStackedWidget()
        self.stack.addWidget(self.view)
        self.stack.addWidget(self.welcome)
        self.stack.addWidget(self.empty)
        right = QWidget()
        column = QVBoxLayout(right)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        for widget, stretch in (
            (bar, 0),
            (self.banner, 0),
            (self.last_load, 0),
            (self.stack, 1),
            (self.need_models, 0),
            (self.composer, 0),
            (self.waits, 0),
            (self.strip, 0),
        ):
            column.addWidget(widget, stretch)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(self.sidebar)
        self.splitter.addWidget(right)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([240, 860])
        self.setCentralWidget(self.splitter)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.dashboard)
        self.dashboard.hide()

    def _wire(self) -> None:
        c = self.controller
        self.composer.send.connect(self._send)
        self.composer.stop.connect(self._stop)
        c.busy_changed.connect(self.composer.set_busy)
        c.busy_changed.connect(self._follow_generation)
        self.bridge.batch.connect(self.dashboard.on_batch)
        c.baseline_status.connect(self.dashboard.set_baseline)
        c.history_changed.connect(self.dashboard.history.refresh)
        c.conversations_changed.connect(self.refresh_sidebar)
        for changed in (c.switched, c.conversations_changed):
            changed.connect(lambda: state.remember_conversation(self.settings, self.controller.conversation))
        c.pair_changed.connect(self.pair_label.setText)
        c.notice.connect(lambda text: self.statusBar().showMessage(text, 8000))
        c.failed.connect(self.report_error)
        c.load_failed.connect(self.report_error)
        self.drafts.failed.connect(self.report_error)
        self.pair_button.clicked.connect(self.choose_models)
        self.sidebar.new_requested.connect(c.new_conversation)
        self.sidebar.selected.connect(c.open)
        self.sidebar.search_changed.connect(lambda *_: self.refresh_sidebar())
        self.sidebar.rename_requested.connect(self.rename_conversation)
        self.sidebar.delete_requested.connect(self.delete_conversation)
        self.view.action.connect(self._on_message_action)
        for source in (self.welcome, self.empty, self.need_models):  # every "Choose models…" button
            source.choose.connect(self.choose_models)
        c.pair_changed.connect(lambda _text: self.show_pane())
        follow_loads(c, self.settings)
        self.last_load.load.connect(self.load_pair)
        c.transcript.observers.append(lambda *_: self.show_pane())
        for part in (self.view, self.empty, self.need_models, self.welcome, self.banner, self.strip):
            self.appearance.changed.connect(part.set_theme)
        self.appearance.changed.connect(self.last_load.set_theme)
        self.welcome.import_gguf.connect(self.library.import_gguf)
        self.welcome.add_folder.connect(self.library.add_folder)
        self.library.scanned.connect(self._on_scanned)
        self.library.failed.connect(self.report_error)
        self.library.status.connect(self.statusBar().showMessage)
        self.library.import_status.connect(self._show_import)
        self.library.imported.connect(self.new_models.arrived)
        self.welcome.download.connect(self._download_pair)

    def _commands(self) -> Commands:
        """What the menus run."""
        return Commands(
            new_chat=self.controller.new_conversation,
            export=self.export,
            import_gguf=self.library.import_gguf,
            add_folder=self.library.add_folder,
            quit=self.close,
            regenerate=lambda: self.regenerate(None),
            stop=self.controller.stop,
            edit_settings=self.edit_settings,
            check_answer=self.check_answer,
            choose_models=self.choose_models,
            open_arena=self.open_arena,
            set_highlight=self.set_highlight,
            set_rejected=self.set_rejected,
            show_conversations=self.sidebar.setVisible,
            set_measure_on_battery=self.set_measure_on_battery,
        )

    # -- actions --------------------------------------------------------------------------------
    def report_error(self, text: str, detail: str = "") -> None:
        """A failed action, kept on screen until the user dismisses it; `detail` behind Details."""
        self.banner.show_error(text, detail)

    def _follow_generation(self, busy: bool) -> None:
        """Point the dashboard at the generation that just started."""
        live = self.controller.live
        if busy and live is not None:
            self.dashboard.follow(live.request, live.stats.plain_speed, live.current_stats)

    def refresh_sidebar(self) -> None:
        self.sidebar.set_conversations(
            self.store.list(self.sidebar.search.text()), self.controller.conversation
        )

    def rename_conversation(self, cid: int, title: str) -> None:
        try:
            self.store.rename(cid, title)
        except write_failure.STORAGE_ERRORS as exc:
            self.controller.failed.emit(f"The conversation was not renamed: {write_failure.reason(exc)}.")
        self.refresh_sidebar()

    def delete_conversation(self, cid: int) -> None:
        if cid == self.controller.conversation:
            self.controller.new_conversation()
        try:
            self.store.delete(cid)
        except write_failure.STORAGE_ERRORS as exc:
            self.controller.failed.emit(f"The conversation was not deleted: {write_failure.reason(exc)}.")
        self.refresh_sidebar()

    def set_highlight(self, on: bool) -> None:
        self.settings.setValue("view/highlight", on)
        self.view.set_options(Options(on, self.view.options.show_rejected))

    def set_measure_on_battery(self, on: bool) -> None:
        self.settings.setValue("plain/measure_on_battery", on)
        self.controller.plain.measure_on_battery = on

    def set_rejected(self, on: bool) -> None:
        self.settings.setValue("view/rejected", on)
        self.view.set_options(Options(self.view.options.highlight, on))
        self.strip.set_refused_on_hover(on)

    def edit_settings(self) -> None:
        dialog = SettingsDialog(self.controller.chat_settings, self)
        if dialog.exec():
            self.controller.save_settings(dialog.value())
            self.settings.setValue("defaults", dialog.value().to_dict())
            self.presets.show()

    def export(self, kind: str) -> None:
        cid = self.controller.conversation
        if cid is None:
            self.statusBar().showMessage("Nothing to export yet", 4000)
            return
        path, _ = QFileDialog.getSaveFileName(self, "Export conversation", f"conversation.{kind}")
        if not path:
            return
        try:
            text = self.store.export_markdown(cid) if kind == "md" else self.store.export_json(cid)
            Path(path).write_text(text, encoding="utf-8")
        except (OSError, ConversationError) as exc:
            self.error_box = show_error_dialog(
                self,
                "Conversation not exported",
                f"Could not export the conversation to {path}: {reason(exc)}.",
            )

    # -- models ---------------------------------------------------------------------------------
    def _on_scanned(self, result: object) -> None:
        if not isinstance(result, Exception):
            self.show_pane()

    def show_pane(self) -> None:  # the welcome, an empty state with its next step, or the chat
        pane = pane_state(self.library.has_models, self.controller)
        self.need_models.setVisible(not self.need_models.isHidden() and self.controller.pair is None)
        self.empty.show_state(pane)
        self.stack.setCurrentWidget({None: self.view, WELCOME: self.welcome}.get(pane, self.empty))

    def picker(self) -> PickerDialog:
        dialog = PickerDialog(
            self.library.sources, settings=self.settings, loaded=self.controller.pair, parent=self
        )
        dialog.import_requested.connect(self.library.start_import)
        dialog.sources_changed.connect(self.library.use_sources)
        dialog.downloads.failed.connect(self.report_error)
        self.new_models.follow(dialog, self.controller.pair[0] if self.controller.pair else None)
        dialog.measure_requested.connect(lambda main, _: self._measure_pair(dialog, main))
        return dialog

    def _measure_pair(self, dialog: PickerDialog, main: str) -> None:
        """The picker is modal, so it closes before the arena can take input."""
        dialog.reject()
        self.open_arena().select_main(main)

    def choose_models(self) -> None:
        dialog = self.picker()
        if dialog.exec() and dialog.picked is not None:
            p = dialog.picked
            self.load_pair(p.main, p.draft, p.mode)
        self.library.scan()

    def open_arena(self) -> ArenaDialog:
        """One arena window, kept between openings so a run survives hiding it."""
        if self.arena is None:
            pair = self.controller.pair
            self.arena = ArenaDialog(
                self.bridge,
                self.library.sources,
                self.settings,
                main=pair[0] if pair else None,
                blocked=self._arena_blocked,
                parent=self,
            )
            self.arena.apply.connect(self.load_pair)
            self.arena.resize(980, 680)
        else:
            self.arena.sources = self.library.sources
            self.arena.select_main(self.controller.pair[0] if self.controller.pair else None)
        self.arena.show()
        self.arena.raise_()
        return self.arena

    def _download_pair(self, pair: RecommendedPair) -> None:
        dialog = self.picker()
        dialog.downloads.enqueue([pair.main_repo, pair.draft_repo])
        if dialog.exec() and dialog.picked is not None:
            self.load_pair(dialog.picked.main, dialog.picked.draft, dialog.picked.mode)
        self.library.scan()

    def load_pair(self, main: str, draft: str | None, mode: str = "model") -> None:
        note_attempt(self.settings, main, draft, mode)  # the next start loads it once it has loaded
        self.last_load.hide()
        self.pair_label.setText("Loading…")
        self.dashboard.clear()  # its charts were the replaced pair's
        self.controller.load_pair(main, draft, mode)
        self.show_pane()

    def _show_import(self, text: str) -> None:
        self.welcome.status.setText(text)

    # -- lifecycle ------------------------------------------------------------------------------
    def changeEvent(self, e: QEvent) -> None:
        if e.type() in (QEvent.Type.PaletteChange, QEvent.Type.ThemeChange) and hasattr(self, "view"):
            self.view.set_theme(current_theme())
        super().changeEvent(e)

    def closeEvent(self, e: QCloseEvent) -> None:
        """Save the composer's draft and the partial answer, cancel the worker, and let it stop (it
        checks between rounds); background tasks (scans, tokenizer loads, an import) are dropped, so
        none reports to a window being torn down. The window is hidden first: the wait
        (`quit_wait`) is the app's, not the user's."""
        state.save_window(self, self.splitter, self.settings)
        self.hide()
        self.drafts.save()
        self.controller.stop()
        self.serving.stop(remember=False)  # the next start serves again if it served now
        self.bridge.shutdown(wait=self.quit_wait)
        self.background.shutdown()
        super().closeEvent(e)

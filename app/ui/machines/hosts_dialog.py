"""Run the main model across several machines: list the machines, test them, see each one's share.

The connection test runs off the GUI thread (app.ui.common.background) and fills the table as each
machine answers. The choice is kept in the settings, where the chat's load reads it
(app.ui.common.settings).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QRadioButton,
    QVBoxLayout,
    QWidget,
)

from app.engine.distributed.hosts import (
    Hostfile,
    HostfileError,
    LocalAddress,
    default_hostfile_path,
    local_addresses,
    parse_host_lines,
    read_hostfile,
    write_hostfile,
)
from app.engine.distributed.memory_split import HostShare, ModelShape, model_shape, split_fit
from app.engine.distributed.probe import (
    TIMEOUT,
    HostInfo,
    ProbeResult,
    Runner,
    first_machine_note,
    local_info,
    probe_hosts,
    ssh_runner,
)
from app.engine.library.facts import ModelFacts
from app.ui.common.background import BackgroundTasks, Job
from app.ui.common.platform_words import capital, machine, machines, on_a_mac, this_machine
from app.ui.common.settings import HOSTFILE_KEY
from app.ui.common.theme import current_theme
from app.ui.machines.hosts_table import HostsTable, link_words, summary

TYPED_KEY = "machines/typed"  # the machines as last typed
SOURCE_KEY = "machines/source"  # the hostfile last chosen, when one was


def intro_words() -> str:
    here, each = this_machine(), machine()
    return (
        f"A main model too large for {here} can run split across several {machines()}: each holds "
        "part of it, and they talk on every word, so connect them with a Thunderbolt cable or your "
        f"home network. The draft model stays on {here}. Each {each} needs SpecChat installed in "
        "the same place and must accept ssh from this one without a password."
    )


def placeholder() -> str:
    first, second = ("this-mac", "studio") if on_a_mac() else ("this-pc", "workstation")
    return (
        f"One {machine()} per line: its name, then its address. {capital(this_machine())} first."
        f"\n{first}.local 169.254.10.1\n{second}.local 169.254.10.2"
    )


class HostsDialog(QDialog):
    """Accepting it stores the machines in `settings` (see `chosen_hostfile`)."""

    def __init__(
        self,
        settings: QSettings,
        main: ModelFacts | None = None,
        draft: ModelFacts | None = None,
        context: int = 4096,
        *,
        runner: Runner = ssh_runner,
        script: str | None = None,
        addresses: list[LocalAddress] | None = None,
        shape: ModelShape | None = None,
        timeout: float = TIMEOUT,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Run the main model across machines")
        self.settings, self.main, self.draft, self.context = settings, main, draft, context
        self.runner, self.script, self.timeout, self.shape = runner, script, timeout, shape
        self.names: list[str] = []  # the table's machines, in rank order
        self.results: list[ProbeResult | None] = []
        self.tested: Hostfile | None = None  # the machines the table's results are for
        self.job: Job[ProbeResult] | None = None
        self.background = BackgroundTasks(self, self._failed)

        intro = QLabel(intro_words())
        intro.setWordWrap(True)
        self.typed_choice, self.file_choice = (
            QRadioButton("Type the machines"),
            QRadioButton("Use a hostfile"),
        )
        self.typed = QPlainTextEdit()
        self.typed.setPlaceholderText(placeholder())
        self.typed.setMaximumHeight(90)
        self.path = QLineEdit()
        self.path.setPlaceholderText("An mlx.launch hostfile (JSON)")
        self.browse = QPushButton("Choose…")
        self.address = QComboBox()
        self.warning, self.problem, self.status, self.verdict = QLabel(), QLabel(), QLabel(""), QLabel("")
        for label in (self.warning, self.problem, self.status, self.verdict):
            label.setWordWrap(True)
        self.verdict.hide()  # the test's verdict, shown once a test ends
        theme = current_theme()
        self.warning.setStyleSheet(
            f"background: {theme.warning_bg.name()}; color: {theme.warning_text.name()}; padding: 6px;"
        )
        self.problem.setStyleSheet(f"color: {theme.error_text.name()};")
        self.progress = QProgressBar()
        self.progress.setVisible(False)
        self.table = HostsTable()
        self.fit_note = QLabel("")
        self.fit_note.setWordWrap(True)
        self.test_button = QPushButton("Test connection")
        self.use_button = QPushButton("Use these machines")
        self.alone_button = QPushButton(f"Run on {this_machine()} only")
        self.cancel_button = QPushButton("Cancel")
        self.test_button.setDefault(True)  # Enter tests; the others never take Enter
        for button in (self.use_button, self.alone_button, self.cancel_button, self.browse):
            button.setAutoDefault(False)

        file_row = QHBoxLayout()
        file_row.addWidget(self.path, 1)
        file_row.addWidget(self.browse)
        address_row = QHBoxLayout()
        address_row.addWidget(QLabel(f"{capital(this_machine())} connects over:"))
        address_row.addWidget(self.address, 1)
        test_row = QHBoxLayout()
        test_row.addWidget(self.test_button)
        test_row.addWidget(self.progress)
        test_row.addWidget(self.status, 1)
        buttons = QHBoxLayout()
        buttons.addWidget(self.alone_button)
        buttons.addStretch(1)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.use_button)
        layout = QVBoxLayout(self)
        for part in (intro, self.typed_choice, self.typed, self.file_choice):
            layout.addWidget(part)
        layout.addLayout(file_row)
        layout.addLayout(address_row)
        layout.addWidget(self.warning)
        layout.addWidget(self.problem)
        layout.addLayout(test_row)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.verdict)
        layout.addWidget(self.fit_note)
        layout.addLayout(buttons)

        self._fill_addresses(addresses)
        self._restore()
        self.typed_choice.toggled.connect(lambda *_: self._changed())
        self.typed.textChanged.connect(self._changed)
        self.path.textChanged.connect(self._changed)
        self.address.currentIndexChanged.connect(lambda *_: self._changed())
        self.browse.clicked.connect(self._choose_file)
        self.test_button.clicked.connect(self.test)
        self.use_button.clicked.connect(self._use)
        self.alone_button.clicked.connect(self._alone)
        self.cancel_button.clicked.connect(self.reject)
        self._changed()
        if self.shape is None and main is not None:
            facts = main
            self.background.run(lambda: model_shape(Path(facts.path), facts), self._on_shape)

    # -- the machines ----------------------------------------------------------------------
    def _fill_addresses(self, addresses: list[LocalAddress] | None) -> None:
        self.address.addItem(f"As listed for {this_machine()}", None)
        for a in addresses if addresses is not None else local_addresses():
            self.address.addItem(f"{a.ip} on {a.interface} — {link_words(a.ip)}", a.ip)

    def _restore(self) -> None:
        self.typed.setPlainText(str(self.settings.value(TYPED_KEY, "") or ""))
        source = str(self.settings.value(SOURCE_KEY, "") or "")
        self.path.setText(source)
        (self.file_choice if source else self.typed_choice).setChecked(True)

    def _choose_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Choose a hostfile", "", "Hostfiles (*.json);;All files (*)"
        )
        if path:
            self.path.setText(path)
            self.file_choice.setChecked(True)

    def hostfile(self) -> Hostfile:
        """The machines as entered, with this machine's chosen address; raises HostfileError."""
        if self.typed_choice.isChecked():
            hostfile = parse_host_lines(self.typed.toPlainText())
        elif not self.path.text().strip():
            raise HostfileError("Choose a hostfile, or type the machines.")
        else:
            hostfile = read_hostfile(Path(self.path.text().strip()).expanduser())
        ip = self.address.currentData()
        return hostfile.with_local_ip(ip) if ip else hostfile

    def _changed(self) -> None:
        """Any edit makes the last test stale: its results no longer describe these machines."""
        self.typed.setEnabled(self.typed_choice.isChecked())
        self.path.setEnabled(self.file_choice.isChecked())
        try:
            hostfile: Hostfile | None = self.hostfile()
            self.problem.setText("")
        except HostfileError as exc:
            hostfile = None
            self.problem.setText(str(exc))
        self.problem.setVisible(bool(self.problem.text()))
        public = hostfile.public_warning() if hostfile else None
        self.warning.setText(f"⚠ {public}" if public else "")
        self.warning.setVisible(bool(public))
        self.test_button.setEnabled(hostfile is not None)
        if hostfile != self.tested:
            if self.job is not None:
                self.job.drop()
                self.job = None
            self.tested = None
            self.use_button.setEnabled(False)
            self.progress.setVisible(False)
            self.status.setText("")
            self.verdict.hide()
            self._show_hosts([h.ssh for h in hostfile.hosts] if hostfile else [])

    def _show_hosts(self, names: list[str], waiting: str = "Not tested yet") -> None:
        self.names, self.results = names, [None] * len(names)
        self.table.show_hosts(names, waiting)
        self._show_fit()

    # -- the test --------------------------------------------------------------------------
    def test(self) -> None:
        try:
            hostfile = self.hostfile()
        except HostfileError as exc:
            self.problem.setText(str(exc))
            return
        if self.job is not None:
            self.job.drop()
        names = [h.ssh for h in hostfile.hosts]
        self.tested = hostfile
        self._show_hosts(names, "Waiting for an answer…")
        self.use_button.setEnabled(False)
        self.progress.setRange(0, len(names))
        self.progress.setValue(0)
        self.progress.setVisible(True)
        self.verdict.hide()
        self.status.setText(f"Testing {len(names)} machine(s)… (at most {self.timeout:g} s)")
        runner, script, timeout = self.runner, self.script, self.timeout

        def work(job: Job[ProbeResult]) -> tuple[HostInfo, list[ProbeResult]]:
            here = local_info()
            return here, probe_hosts(
                names, runner=runner, script=script, timeout=timeout, here=here, on_result=job.report
            )

        self.job = self.background.start(work, self._on_tested, progress=self._on_result)

    def _on_result(self, result: ProbeResult) -> None:
        if result.host not in self.names:
            return
        row = self.names.index(result.host)
        self.results[row] = result
        self.table.show_result(row, result)
        answered = sum(r is not None for r in self.results)
        self.progress.setValue(answered)
        self.status.setText(f"{answered} of {len(self.results)} machine(s) answered…")
        self._show_fit()

    def _on_tested(self, outcome: tuple[HostInfo, list[ProbeResult]]) -> None:
        here, results = outcome
        self.job = None
        for result in results:
            self._on_result(result)
        self.progress.setVisible(False)
        self.status.setText(f"Tested {len(results)} machine(s).")
        note = first_machine_note(here, results)
        self.verdict.setText(summary(results, self.shares(), note))
        self.verdict.show()
        # the note is advice, and memory is told here, not refused: other apps may be closed
        # before the load, which weighs each part against what is free then
        self.use_button.setEnabled(all(r.ok for r in results))

    def _failed(self, exc: Exception) -> None:
        self.job = None
        self.progress.setVisible(False)
        self.status.setText(f"The test could not run: {exc}")

    # -- memory ----------------------------------------------------------------------------
    def _on_shape(self, shape: ModelShape) -> None:
        self.shape = shape
        self._show_fit()

    def shares(self) -> list[HostShare]:
        if self.main is None or self.shape is None:
            return []
        hosts = [
            (name, r.info.free_memory if r and r.info else None) for name, r in zip(self.names, self.results)
        ]
        return split_fit(self.main, self.shape, hosts, self.context, self.draft) if hosts else []

    def _show_fit(self) -> None:
        if self.main is None:
            self.fit_note.setText("Choose a main model to see whether its parts fit.")
            return
        shares = self.shares()
        self.table.show_fit(shares)
        if shares:
            self.fit_note.setText(
                f"<b>{self.main.name}</b> at {self.context:,} tokens, split across {len(shares)} machines: "
                f"each holds a part; {this_machine()} also runs the draft. Hover a row for the sums."
            )
        else:
            self.fit_note.setText(f"<b>{self.main.name}</b>: reading its size…")

    # -- the choice ------------------------------------------------------------------------
    def _use(self) -> None:
        if self.tested is None:
            return
        path = default_hostfile_path()
        write_hostfile(self.tested, path)  # with the chosen local address; a chosen file is left as is
        self.settings.setValue(HOSTFILE_KEY, str(path))
        self.settings.setValue(TYPED_KEY, self.typed.toPlainText())
        self.settings.setValue(SOURCE_KEY, self.path.text().strip() if self.file_choice.isChecked() else "")
        self.settings.sync()
        self.accept()

    def _alone(self) -> None:
        self.settings.setValue(HOSTFILE_KEY, "")
        self.settings.sync()
        self.accept()

"""Where the local server listens: its port, and whether other computers may use it.

Kept in the app's settings (`server/...`); the switch itself lives in app/ui/server/serving.py. Letting
other computers in needs an API key, generated here once and shown with a copy button, because
anyone on the network who can reach the port could otherwise use the models.
"""

from __future__ import annotations

import secrets
import socket
from dataclasses import dataclass

from PySide6.QtCore import QSettings
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QWidget,
)

DEFAULT_PORT = 8080
LOOPBACK, EVERYWHERE = "127.0.0.1", "0.0.0.0"
PORT, NETWORK, KEY, ON = "server/port", "server/network", "server/api_key", "server/on"
NETWORK_WARNING = (
    "Other computers on your network can use your models through this port. Only programs given "
    "the API key are let in; share it only with people you trust. The connection is not "
    "encrypted, so use this on a network you trust."
)


@dataclass(frozen=True, slots=True)
class ServerPlace:
    """Where to listen. `port_chosen`: the user set the port (a taken one is then an error, not a
    reason to move to the next free one)."""

    host: str = LOOPBACK
    port: int = DEFAULT_PORT
    port_chosen: bool = False
    api_key: str | None = None

    @property
    def network(self) -> bool:
        return self.host != LOOPBACK


def read_place(settings: QSettings) -> ServerPlace:
    """The saved place; a damaged value falls back to the default."""
    raw = settings.value(PORT)
    try:
        port = int(str(raw)) if raw is not None else DEFAULT_PORT
    except ValueError:
        port, raw = DEFAULT_PORT, None
    if not 1 <= port <= 65535:
        port, raw = DEFAULT_PORT, None
    network = bool(settings.value(NETWORK, False, type=bool))
    key = str(settings.value(KEY, "") or "") or None
    if network and key is None:  # the network is never opened without a key
        network = False
    return ServerPlace(EVERYWHERE if network else LOOPBACK, port, raw is not None, key if network else None)


def save_place(settings: QSettings, place: ServerPlace, key: str | None = None) -> None:
    """`key`: the key to keep even while the network is off, so turning it on reuses it."""
    settings.setValue(PORT, place.port)
    settings.setValue(NETWORK, place.network)
    if place.api_key or key:
        settings.setValue(KEY, place.api_key or key)


def port_free(host: str, port: int) -> bool:
    """Whether nothing listens on `port` now (a check, not a promise: the server's start decides)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def next_free_port(host: str, start: int, tries: int = 50) -> int | None:
    """The first free port from `start` on, or None when the next `tries` are all taken."""
    for port in range(start, min(start + tries, 65536)):
        if port_free(host, port):
            return port
    return None


def new_key() -> str:
    return secrets.token_urlsafe(24)


class ServerDialog(QDialog):
    """The port, the network switch with its warning, and the key with a Copy button."""

    def __init__(self, place: ServerPlace, stored_key: str | None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Server settings")
        self.port = QSpinBox(minimum=1024, maximum=65535, value=max(place.port, 1024))
        self.port.setToolTip("Programs on this computer reach SpecChat at http://127.0.0.1:<port>/v1")
        self.network = QCheckBox("Allow other computers on the network")
        self.network.setChecked(place.network)
        self.key = QLineEdit(place.api_key or stored_key or new_key())
        self.key.setReadOnly(True)
        self.key.setMinimumWidth(self.key.fontMetrics().horizontalAdvance("M" * 26))
        self.copy = QPushButton("Copy")
        self.copy.setToolTip("Copy the key: other programs send it as their API key")
        self.copy.clicked.connect(lambda: QGuiApplication.clipboard().setText(self.key.text()))
        self.new = QPushButton("New key")
        self.new.setToolTip("Make a new key: programs using the old one are no longer let in")
        self.new.clicked.connect(lambda: self.key.setText(new_key()))
        key_row = QWidget()
        row = QHBoxLayout(key_row)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.key, 1)
        row.addWidget(self.copy)
        row.addWidget(self.new)
        self.warning = QLabel(NETWORK_WARNING, wordWrap=True)
        self.warning.setStyleSheet("color: #b35c00")
        self.note = QLabel(
            "Changes apply the next time the server is turned on.",
            wordWrap=True,
        )
        form = QFormLayout(self)
        form.addRow("Port", self.port)
        form.addRow("", self.network)
        form.addRow("API key", key_row)
        form.addRow("", self.warning)
        form.addRow("", self.note)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)
        self.network.toggled.connect(self._show_network)
        self._show_network(place.network)

    def _show_network(self, on: bool) -> None:
        for part in (self.key, self.copy, self.new, self.warning):
            part.setVisible(on)
        self.adjustSize()

    def value(self) -> ServerPlace:
        on = self.network.isChecked()
        return ServerPlace(
            EVERYWHERE if on else LOOPBACK, self.port.value(), True, self.key.text() if on else None
        )

    def stored_key(self) -> str:
        """The key shown, kept even while the network is off, so turning it on again reuses it."""
        return self.key.text()

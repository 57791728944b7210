"""Screenshots of running the main model across machines: the connection test with one Mac
answering, one refusing ssh and one on other versions, each Mac's share of a 70B main; and the
warning for a connection that is not private. The machines' answers are scripted, like the
synthetic engine's, so the pictures are the same on every computer."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QApplication, QWidget

if TYPE_CHECKING:
    from app.engine.library.facts import ModelFacts

Wait = Callable[..., bool]
Save = Callable[[QApplication, QWidget, Path], Path]
GIB = 2**30


def _answers() -> dict[str, str]:
    """What each scripted machine prints: this Mac's versions, or older ones on the mini."""
    from app.engine.distributed.probe import local_info

    here = local_info()
    mac = replace(here, platform="Darwin 24.6.0 arm64", python="3.11.9")
    return {
        "this-mac.local": json.dumps(replace(mac, free_memory=52 * GIB, total_memory=64 * GIB).to_json()),
        "mac-mini.local": json.dumps(
            replace(
                mac, hostname="mac-mini", mlx_version="0.26.1", free_memory=19 * GIB, total_memory=24 * GIB
            ).to_json()
        ),
    }


def _runner(host: str, script: str) -> list[str]:
    answer = _answers().get(host)
    if answer is None:  # what ssh prints for a Mac with Remote Login turned off
        return [
            "sh",
            "-c",
            f"echo {shlex.quote(f'ssh: connect to host {host} port 22: Connection refused')} >&2; exit 255",
        ]
    return ["echo", answer]


def _main() -> tuple[ModelFacts, ModelFacts]:
    """A 70B main and a 1B draft as the library would describe them (sizes as on disk)."""
    from app.engine.library.facts import ModelFacts

    main = ModelFacts(
        path="/models/Llama-3.3-70B-Instruct-4bit",
        name="Llama-3.3-70B-Instruct-4bit",
        source="user",
        fingerprint="shot",
        architecture="llama",
        params=70_550_000_000,
        bits=4,
        size_bytes=39_700_000_000,
        context_length=131072,
        vocab_size=128256,
        vocab_fingerprint=None,
        vision=False,
        trim="full",
        sliding_window=None,
        kv_bytes_per_token=2 * 80 * 8 * 128 * 2,
    )
    draft = replace(
        main,
        path="/models/Llama-3.2-1B-Instruct-4bit",
        name="Llama-3.2-1B-Instruct-4bit",
        params=1_240_000_000,
        size_bytes=700_000_000,
        kv_bytes_per_token=2 * 16 * 8 * 64 * 2,
    )
    return main, draft


def render_hosts(app: QApplication, home: Path, out: Path, wait: Wait, save: Save) -> None:
    from app.engine.distributed.hosts import LocalAddress
    from app.engine.distributed.memory_split import ModelShape
    from app.ui.machines.hosts_dialog import HostsDialog

    main, draft = _main()
    addresses = [LocalAddress("bridge0", "169.254.10.1"), LocalAddress("en0", "192.168.1.23")]
    settings = QSettings(str(home / "machines.ini"), QSettings.Format.IniFormat)
    dialog = HostsDialog(
        settings,
        main,
        draft,
        8192,
        runner=_runner,
        addresses=addresses,
        shape=ModelShape(39_700_000_000, 2_100_000_000, 8),
    )
    dialog.typed.setPlainText(
        "this-mac.local 169.254.10.1\nmac-studio.local 169.254.10.2\nmac-mini.local 169.254.10.3"
    )
    dialog.address.setCurrentIndex(1)
    dialog.resize(980, 620)
    dialog.show()
    dialog.test()
    wait(app, lambda: dialog.job is None, 30)
    save(app, dialog, out / "machines-connection-test.png")
    dialog.typed.setPlainText("this-mac.local 192.168.1.23\nmac-studio.example.net 203.0.113.40")
    dialog.address.setCurrentIndex(0)
    save(app, dialog, out / "machines-not-private.png")
    dialog.close()

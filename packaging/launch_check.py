"""Launch SpecChat as a user does and end it as a user does; exit 0 only if all went right.

    python packaging/launch_check.py [--xvfb] [--stay SECONDS] [--home DIR] -- COMMAND...

COMMAND (for example `.venv/bin/python -m app`, or the bundle's executable) runs with no
arguments over a fresh data folder, offscreen or on a real X server under `xvfb-run`. The check
passes when the app prints its ready line (written from its running event loop once the window
is exposed and the first library scan has answered), is still up `--stay` seconds later, and
exits 0 within 5 s of SIGTERM with the window's geometry saved. It prints one line starting
LAUNCH_OK or LAUNCH_FAIL. Only the standard library is used, so it runs beside a frozen bundle.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

READY_PREFIX = "specchat: ready"  # app/ui/launch.py prints it; kept here so no app import is needed
READY_WITHIN_S = 60.0
EXIT_WITHIN_S = 5.0


class LaunchFailure(Exception):
    pass


def check(command: list[str], home: Path, *, xvfb: bool, stay: float) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("QT_QPA_PLATFORM", "DISPLAY")}
    env.update(SPECCHAT_HOME=str(home), HF_HUB_OFFLINE="1")
    if xvfb:  # a real X server: Qt picks its xcb plugin as on a Linux desktop
        command = ["xvfb-run", "--auto-servernum", "--server-args=-screen 0 1280x900x24", *command]
    else:
        env["QT_QPA_PLATFORM"] = "offscreen"
    if Path(command[0]).exists():  # a path relative to the caller, who runs it from elsewhere
        command = [str(Path(command[0]).absolute()), *command[1:]]  # not resolve(): keep a venv's link
    log = home / "launch-stderr.txt"
    with log.open("wb") as err:
        # its own session, so whatever xvfb-run starts can be found and ended with it
        try:
            process = subprocess.Popen(
                command, cwd=home, env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True
            )
        except OSError as exc:
            raise LaunchFailure(f"could not start {command[0]}: {exc.strerror}") from None
        try:
            ready = _wait_for_ready(process, log)
            time.sleep(stay)
            if process.poll() is not None:
                raise LaunchFailure(f"the app exited with status {process.returncode} after start-up")
            asked = time.monotonic()
            os.kill(_app_pid(process) if xvfb else process.pid, signal.SIGTERM)
            try:
                status = process.wait(timeout=EXIT_WITHIN_S + 5)
            except subprocess.TimeoutExpired:
                raise LaunchFailure("the app did not exit within 10 s of SIGTERM") from None
            took = time.monotonic() - asked
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    text = log.read_text(encoding="utf-8", errors="replace")
    if "Traceback" in text:
        raise LaunchFailure("a traceback was printed")
    if status != 0:
        raise LaunchFailure(f"exit status {status} after SIGTERM")
    if took >= EXIT_WITHIN_S:
        raise LaunchFailure(f"the app took {took:.1f} s to quit after SIGTERM")
    settings = home / "settings.ini"
    if not settings.is_file() or "geometry=" not in settings.read_text(encoding="utf-8", errors="replace"):
        raise LaunchFailure("the window's geometry was not saved on quit")
    return f"{ready.strip()} | quit in {took:.2f} s"


def _wait_for_ready(process: subprocess.Popen[bytes], log: Path) -> str:
    deadline = time.monotonic() + READY_WITHIN_S
    while time.monotonic() < deadline:
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith(READY_PREFIX):
                return line
        if process.poll() is not None:
            raise LaunchFailure(f"the app exited with status {process.returncode} before its window was up")
        time.sleep(0.2)
    raise LaunchFailure(f"no ready line within {READY_WITHIN_S:.0f} s")


def _app_pid(process: subprocess.Popen[bytes]) -> int:
    """The app under xvfb-run: the newest process of the session that is neither the script nor
    the X server (xvfb-run's shell forwards no signal)."""
    ours = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == process.pid:
            continue
        try:
            if os.getsid(int(entry.name)) != process.pid:
                continue
            name = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if name not in ("Xvfb", "xvfb-run", "sh", "bash", "xauth"):
            ours.append(int(entry.name))
    if not ours:
        raise LaunchFailure("the app's process was not found under xvfb-run")
    return max(ours)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--xvfb", action="store_true", help="run on a real X server under xvfb-run")
    parser.add_argument("--stay", type=float, default=20.0, help="seconds the app must stay up (20)")
    parser.add_argument("--home", type=Path, help="the data folder (default: a fresh temporary one)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the app to launch, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("name the app to launch after --")
    home = args.home or Path(tempfile.mkdtemp(prefix="specchat-launch-"))
    home.mkdir(parents=True, exist_ok=True)
    try:
        line = check(command, home, xvfb=args.xvfb, stay=args.stay)
    except LaunchFailure as exc:
        log = home / "launch-stderr.txt"
        tail = log.read_text(encoding="utf-8", errors="replace")[-4000:] if log.is_file() else ""
        print(f"LAUNCH_FAIL {exc}\n{tail}", file=sys.stderr)
        return 1
    print(f"LAUNCH_OK {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The connection test, run for real on this machine (no ssh) and against runners that fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from app import __version__
from app.engine.distributed.probe import (
    HostInfo,
    ProbeResult,
    first_machine_note,
    local_info,
    parse_vm_stat,
    probe_hosts,
    probe_script,
    ssh_runner,
)
from app.engine.platform_words import this_machine

ROOT = Path(__file__).resolve().parents[3]


def local_runner(host: str, script: str) -> list[str]:
    """Runs the very script ssh would run, in a local shell."""
    return ["bash", "-c", script]


def failing_ssh(host: str, script: str) -> list[str]:
    return ["bash", "-c", f"echo 'ssh: connect to host {host} port 22: Connection refused' >&2; exit 255"]


def script() -> str:
    return probe_script(sys.executable, str(ROOT))


def test_probe_host_prints_one_json_line_about_this_machine():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-m", "app", "probe-host"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=True,
    ).stdout
    assert len(out.strip().splitlines()) == 1
    info = HostInfo.from_json(json.loads(out))
    assert info.specchat_version == __version__
    assert 0 < info.free_memory <= info.total_memory


def test_probe_host_is_hidden_from_help(capsys):
    import pytest

    from app.cli import main

    with pytest.raises(SystemExit):
        main(["--help"])
    assert "probe-host" not in capsys.readouterr().out


def test_a_reachable_machine_reports_its_versions_and_memory():
    seen = []
    [result] = probe_hosts(
        ["localhost"], runner=local_runner, script=script(), timeout=60, on_result=seen.append
    )
    assert result.reachable, "this machine answers"
    assert result.ok, "its versions match"
    assert result.problem is None, "no problem is reported"
    assert result.info is not None and result.info.specchat_version == __version__
    assert result.info.mlx_version == local_info().mlx_version
    assert seen == [result]


def test_failures_keep_their_reason_and_order():
    def runner(host: str, s: str) -> list[str]:
        return {"up": local_runner, "down": failing_ssh}[host](host, s)

    seen = []
    up, down = probe_hosts(["up", "down"], runner=runner, script=script(), timeout=60, on_result=seen.append)
    assert (up.host, up.ok) == ("up", True)
    assert (down.host, down.reachable) == ("down", False)
    assert down.problem is not None and "Connection refused" in down.problem
    assert "ssh" in down.problem
    assert sorted(r.host for r in seen) == ["down", "up"]


def test_ssh_runs_without_prompts_and_127_0_0_1_runs_here():
    argv = ssh_runner("studio.local", "echo hi")
    assert argv[0] == "ssh", "the probe runs ssh"
    assert argv[-2:] == ["studio.local", "echo hi"], "ssh runs the command on the named machine"
    assert "BatchMode=yes" in argv, "ssh never stops to ask for a password"
    assert ssh_runner("127.0.0.1", "echo hi") == ["bash", "-c", "echo hi"]  # as mlx.launch does
    [result] = probe_hosts(["127.0.0.1"], script=script(), timeout=60)  # the default runner, no ssh
    assert result.ok


def test_other_failures_quote_what_the_machine_said():
    [result] = probe_hosts(["mac"], runner=lambda h, s: ["bash", "-c", "echo boom >&2; exit 3"])
    assert result.problem == "The test program failed there (exit 3): boom"


def test_the_probe_finds_specchat_where_the_launcher_puts_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # as on a machine where this folder exists but holds no app
    [result] = probe_hosts(["mac"], runner=local_runner, script=probe_script(sys.executable, str(ROOT)))
    assert result.ok  # found through PYTHONPATH, as the ranks are
    if Path("/usr/bin/python3").exists():  # a Python that has no SpecChat installed
        bare = probe_script("/usr/bin/python3", str(tmp_path))
        [result] = probe_hosts(["mac"], runner=local_runner, script=bare, timeout=60)
        assert result.problem is not None and "not installed" in result.problem
        assert "No module named app" in result.problem


def test_a_machine_without_specchat_says_so():
    [result] = probe_hosts(["mac"], runner=local_runner, script="exec /no/such/python -m app probe-host")
    assert result.problem is not None and "not installed" in result.problem


def test_an_older_specchat_without_the_test_says_update(tmp_path):
    old = tmp_path / "old"
    (old / "app").mkdir(parents=True)
    (old / "app" / "__main__.py").write_text(
        "import argparse\np = argparse.ArgumentParser()\n"
        "p.add_subparsers(dest='c').add_parser('generate')\np.parse_args()\n"
    )
    script = f"cd {old}; exec env -u PYTHONPATH {sys.executable} -m app probe-host"
    [result] = probe_hosts(["mac"], runner=local_runner, script=script, timeout=60)
    assert result.problem is not None and "older version" in result.problem


def test_a_machine_that_does_not_answer_in_time_times_out():
    [result] = probe_hosts(["mac"], runner=lambda h, s: ["sleep", "30"], timeout=0.5)
    assert result.problem is not None and "No answer within 0.5 s" in result.problem


def test_a_garbled_reply_is_not_taken_for_an_answer():
    for reply in ("hello", '{"hostname": "x"}', "[1, 2]"):
        [result] = probe_hosts(["mac"], runner=lambda h, s, r=reply: ["echo", r])
        assert not result.reachable
        assert result.problem is not None and result.problem.startswith("It answered something unexpected")


def test_a_missing_ssh_program_is_said():
    [result] = probe_hosts(["mac"], runner=lambda h, s: ["/no/such/ssh", h])
    assert result.problem is not None and result.problem.startswith("Could not start /no/such/ssh")


def test_different_versions_are_refused_naming_both():
    here = replace(local_info(), mlx_version="0.99.0", specchat_version="9.9.9")
    [result] = probe_hosts(["localhost"], runner=local_runner, script=script(), timeout=60, here=here)
    assert result.reachable, "a machine with other versions answers"
    assert not result.ok, "the other versions make it not ok"
    theirs = local_info().mlx_version
    assert result.mismatch is not None
    assert f"MLX {theirs} there but 0.99.0 on {this_machine()}" in result.mismatch
    assert f"SpecChat {__version__} there but 9.9.9 on {this_machine()}" in result.mismatch
    assert result.differs == ("MLX", "SpecChat")
    here = replace(local_info(), mlx_version=None)
    [result] = probe_hosts(["localhost"], runner=local_runner, script=script(), timeout=60, here=here)
    assert result.differs == ("MLX",), "only MLX differs"
    assert result.mismatch is not None, "the mismatch is said in words"
    assert (
        f"MLX {theirs} there but missing on {this_machine()}" in result.mismatch
        and "SpecChat" not in result.mismatch
    )


def test_vm_stat_counts_free_inactive_and_purgeable_pages():
    text = (
        "Mach Virtual Memory Statistics: (page size of 16384 bytes)\n"
        "Pages free:                               10000.\n"
        "Pages active:                            500000.\n"
        "Pages inactive:                           20000.\n"
        "Pages speculative:                         3000.\n"
        "Pages wired down:                        100000.\n"
        "Pages purgeable:                           1000.\n"
    )
    assert parse_vm_stat(text) == (10000 + 20000 + 3000 + 1000) * 16384


def test_the_first_machine_should_be_this_one():
    here = replace(local_info(), hostname="this-mac")
    answer = ProbeResult("a", replace(here, hostname="This-Mac.local"))
    assert first_machine_note(here, [answer]) is None  # the same Mac under its .local name
    assert first_machine_note(here, [ProbeResult("a", None, "down")]) is None
    note = first_machine_note(here, [ProbeResult("a", replace(here, hostname="studio"))])
    assert note is not None and f"answered as studio, but {this_machine()} is this-mac" in note


def test_a_long_reply_is_read_whole_after_other_output():
    info = replace(local_info(), hostname="m" * 300)  # longer than any quoted error line
    reply = "Last login: today\n" + json.dumps(info.to_json()) + "\n"
    [result] = probe_hosts(["mac"], runner=lambda h, s: ["printf", "%s", reply])
    assert result.ok, "a login banner before the answer is skipped"
    assert result.info == info, "the machine's facts are read"


def test_a_long_list_is_asked_a_few_machines_at_a_time(monkeypatch):
    import threading
    import time

    from app.engine.distributed import probe

    running, most, lock = 0, 0, threading.Lock()

    def slow(host: str, runner, script: str, timeout: float) -> ProbeResult:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.05)
        with lock:
            running -= 1
        return ProbeResult(host, None, "asleep")

    monkeypatch.setattr(probe, "probe_host", slow)
    hosts = [f"m{i}" for i in range(40)]
    results = probe_hosts(hosts, here=local_info(), script="true")
    assert [r.host for r in results] == hosts
    assert most == probe.AT_ONCE

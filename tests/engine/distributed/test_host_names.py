"""Machine names that may reach ssh: host names, addresses and user@host; anything ssh could read
as an option, or a shell could read as a command, is refused in one line."""

from __future__ import annotations

import string
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.engine.distributed.host_names import host_name_problem, is_ip_address
from app.engine.distributed.probe import probe_host, probe_hosts, ssh_runner

SAFE = set(string.ascii_letters + string.digits + "._-@:%")
label = st.from_regex(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,20}[A-Za-z0-9_])?", fullmatch=True)
host = st.lists(label, min_size=1, max_size=4).map(".".join)
user = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,15}", fullmatch=True)
address = st.one_of(st.ip_addresses().map(str), st.ip_addresses(v=6).map(lambda a: f"{a}%bridge0"))


@given(st.one_of(host, address, st.tuples(user, st.one_of(host, address)).map("@".join)))
def test_host_names_addresses_and_user_at_host_are_accepted(name):
    assert host_name_problem(name) is None


@given(st.text(max_size=60))
def test_an_accepted_name_is_never_an_option_nor_holds_shell_characters(text):
    if host_name_problem(text) is None:
        assert not text.startswith("-") and "@-" not in text
        assert set(text) <= SAFE and text


@given(st.text(max_size=60))
def test_every_refusal_is_one_line_naming_what_to_use(text):
    problem = host_name_problem(text)
    if problem is not None:
        assert "\n" not in problem and "\r" not in problem
        assert "is not a machine name ssh can use" in problem and "studio.local" in problem


@given(st.text(min_size=1, max_size=30).map(lambda t: "-" + t))
def test_a_name_starting_with_a_dash_is_refused(text):
    problem = host_name_problem(text)
    assert problem is not None and ("starts with '-'" in problem or "holds" in problem)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("-oProxyCommand=touch /tmp/x", "starts with '-', which ssh would read as an option"),
        ("-oProxyCommand=id", "starts with '-'"),
        ("root@-oProxyCommand=id", "starts with '-'"),
        ("mac;rm -rf ~", "holds ';'"),
        ("$(id).local", "holds '$'"),
        ("`id`", "holds '`'"),
        ("mac local", "holds ' '"),
        ("mac|id", "holds '|'"),
        ("mac\nid", "holds '\\n'"),
        ("fe80::1%$(id)", "holds '$'"),
        ("@studio", "the part before '@' is not a user name"),
        ("a" * 300, "longer than 253 characters"),
        ("", "it is empty"),
    ],
)
def test_each_refusal_says_why(name, why):
    problem = host_name_problem(name)
    assert problem is not None and why in problem, problem


def test_an_interface_after_an_address_must_be_a_name():
    assert is_ip_address("fe80::1%bridge0") and is_ip_address("10.0.0.1")
    assert not is_ip_address("fe80::1%a b") and not is_ip_address("10.0.0.1%en0")


def test_ssh_is_told_that_the_machine_is_no_option():
    argv = ssh_runner("user@studio.local", "echo hi")
    assert argv[-3:] == ["--", "user@studio.local", "echo hi"]


def test_the_connection_test_never_hands_a_bad_name_to_ssh(tmp_path):
    marker = tmp_path / "ran"
    started: list[list[str]] = []

    def runner(name: str, script: str) -> list[str]:
        started.append([name])
        return ["touch", str(marker)]

    result = probe_host(f"-oProxyCommand=touch {marker}", runner, "true", timeout=5)
    assert not result.reachable, "a host name starting with '-' is not reachable"
    assert result.problem is not None and "starts with '-'" in result.problem, (
        "the problem says the name starts with '-'"
    )
    assert started == [], "no ssh is started for it"
    assert not marker.exists(), "no command ran"
    [listed] = probe_hosts(["a;b"], runner=runner, script="true", timeout=5)
    assert listed.problem is not None and "holds ';'" in listed.problem, "a host name with ';' is refused"
    assert started == [], "no ssh is started for it"


def test_ssh_itself_reads_the_name_after_dashes_as_a_machine(tmp_path):
    """What `--` buys on any ssh: an option-shaped name is looked up as a host, never obeyed."""
    marker = tmp_path / "ran"
    argv = [
        "ssh",
        "-o",
        "BatchMode=yes",
        "-o",
        "ConnectTimeout=2",
        "--",
        f"-oProxyCommand=touch {marker}",
        "true",
    ]
    try:
        subprocess.run(argv, capture_output=True, timeout=20, check=False)
    except FileNotFoundError:
        pytest.skip("no ssh here")
    assert not marker.exists()

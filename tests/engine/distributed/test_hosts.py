"""Reading mlx.launch hostfiles, the typed machine list, and telling private links apart."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.engine.distributed.host_names import host_name_problem
from app.engine.distributed.hosts import (
    MAX_ADDRESSES,
    MAX_HOSTFILE_BYTES,
    MAX_MACHINES,
    NOT_PRIVATE,
    HostEntry,
    HostfileError,
    is_private_link,
    parse_host_lines,
    parse_hostfile,
    parse_ifconfig,
    parse_ip_addr,
    read_hostfile,
    write_hostfile,
)

GOOD = [{"ssh": "mac-a.local", "ips": ["169.254.1.1"]}, {"ssh": "mac-b.local", "ips": ["169.254.1.2"]}]


def test_reads_the_list_form_and_the_object_form(tmp_path):
    listed = tmp_path / "list.json"
    listed.write_text(json.dumps(GOOD))
    wrapped = tmp_path / "object.json"
    wrapped.write_text(json.dumps({"backend": "ring", "envs": ["A=1"], "hosts": GOOD}))
    a, b = read_hostfile(listed), read_hostfile(wrapped)
    assert (
        a.hosts
        == b.hosts
        == (
            HostEntry("mac-a.local", ("169.254.1.1",)),
            HostEntry("mac-b.local", ("169.254.1.2",)),
        )
    )
    assert (b.backend, b.envs) == ("ring", ("A=1",))


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{not json", "not valid JSON"),
        ("[]", "names no machines"),
        ('{"hosts": []}', "names no machines"),
        ('{"nothing": 1}', "must hold a list"),
        ('"mac"', "must hold a list"),
        (json.dumps([GOOD[0], GOOD[0]]), "names mac-a.local twice"),
        (json.dumps([GOOD[0], {"ssh": "MAC-A.local", "ips": ["10.0.0.2"]}]), "twice"),
        (json.dumps([{"ssh": "", "ips": ["10.0.0.1"]}]), "machine 1 has no ssh name"),
        (json.dumps([GOOD[0], {"ssh": "  ", "ips": ["10.0.0.1"]}]), "machine 2 has no ssh name"),
        (json.dumps([{"ips": ["10.0.0.1"]}]), "has no ssh name"),
        (json.dumps([{"ssh": "mac"}]), "mac has no IP address"),
        (json.dumps([{"ssh": "mac", "ips": ["mac.local"]}]), "'mac.local' (mac) is not an IP address"),
        (json.dumps([{"ssh": "mac", "ips": "10.0.0.1"}]), "must be a list of addresses"),
        (json.dumps(["mac"]), "must be an object"),
    ],
)
def test_every_bad_hostfile_says_what_is_wrong(tmp_path, text, words):
    path = tmp_path / "hosts.json"
    path.write_text(text)
    with pytest.raises(HostfileError, match=words.replace("(", r"\(").replace(")", r"\)")):
        read_hostfile(path)


def test_a_missing_hostfile_is_named(tmp_path):
    with pytest.raises(HostfileError, match=r"nowhere\.json does not exist"):
        read_hostfile(tmp_path / "nowhere.json")


def test_typed_lines_become_a_hostfile_that_round_trips(tmp_path):
    typed = "mac-a.local 169.254.1.1   # this Mac\n\n  mac-b.local 169.254.1.2 10.0.0.2\n192.168.1.9\n"
    hostfile = parse_host_lines(typed)
    assert [h.ssh for h in hostfile.hosts] == ["mac-a.local", "mac-b.local", "192.168.1.9"]
    assert hostfile.hosts[1].ips == ("169.254.1.2", "10.0.0.2")
    assert hostfile.hosts[2].ips == ("192.168.1.9",)  # an address alone is both names
    path = write_hostfile(hostfile, tmp_path / "deep" / "hostfile.json")
    assert read_hostfile(path) == hostfile
    assert json.loads(path.read_text())["hosts"][0] == {"ssh": "mac-a.local", "ips": ["169.254.1.1"]}


def test_typed_lines_are_checked_too():
    with pytest.raises(HostfileError, match="names no machines"):
        parse_host_lines("  \n# only a comment\n")
    with pytest.raises(HostfileError, match="mac-b has no IP address"):
        parse_host_lines("mac-a 10.0.0.1\nmac-b\n")


def test_choosing_this_macs_address_replaces_only_the_first_machines():
    hostfile = parse_host_lines("a 192.168.1.2 10.0.0.1\nb 10.0.0.2")
    chosen = hostfile.with_local_ip("169.254.7.7")
    assert [h.ips for h in chosen.hosts] == [("169.254.7.7",), ("10.0.0.2",)]


@pytest.mark.parametrize(
    ("ip", "private"),
    [
        ("10.1.2.3", True),
        ("172.16.0.1", True),
        ("172.31.255.255", True),
        ("172.32.0.1", False),
        ("192.168.0.10", True),
        ("169.254.33.1", True),  # a Thunderbolt bridge
        ("127.0.0.1", True),
        ("::1", True),
        ("fd12:3456::1", True),
        ("fe80::1%bridge0", True),
        ("8.8.8.8", False),
        ("100.64.0.1", False),  # carrier-grade NAT is shared with strangers
        ("2001:db8::1", False),
        ("not-an-ip", False),
    ],
)
def test_private_links(ip, private):
    assert is_private_link(ip) is private


def test_public_ips_are_listed_for_the_warning():
    hostfile = parse_host_lines("a 169.254.1.1\nb 203.0.113.5")
    assert hostfile.public_links() == [("b", "203.0.113.5")]


MAC_IFCONFIG = """lo0: flags=8049<UP,LOOPBACK,RUNNING,MULTICAST> mtu 16384
\tinet 127.0.0.1 netmask 0xff000000
\tinet6 ::1 prefixlen 128
en0: flags=8863<UP,BROADCAST,SMART,RUNNING,SIMPLEX,MULTICAST> mtu 1500
\tether 3c:22:fb:00:00:01
\tinet6 fe80::1c3a:5b1f:fe00:1%en0 prefixlen 64 secured scopeid 0x6
\tinet 192.168.1.23 netmask 0xffffff00 broadcast 192.168.1.255
bridge0: flags=8863<UP,BROADCAST,SMART,RUNNING,SIMPLEX,MULTICAST> mtu 1500
\tinet 169.254.20.4 netmask 0xffff0000 broadcast 169.254.255.255
"""


def test_reads_macos_ifconfig():
    found = [(a.interface, a.ip) for a in parse_ifconfig(MAC_IFCONFIG)]
    assert ("en0", "192.168.1.23") in found and ("bridge0", "169.254.20.4") in found
    assert ("lo0", "127.0.0.1") in found and ("en0", "fe80::1c3a:5b1f:fe00:1%en0") in found
    assert len(found) == 5


def test_reads_linux_ip_addr():
    text = (
        "1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever\n"
        "2: eth0    inet 203.0.113.7/24 brd 203.0.113.255 scope global eth0\n"
        "2: eth0    inet6 fe80::1/64 scope link\n"
    )
    assert [(a.interface, a.ip, a.private) for a in parse_ip_addr(text)] == [
        ("lo", "127.0.0.1", True),
        ("eth0", "203.0.113.7", False),
        ("eth0", "fe80::1", True),
    ]


# -- size, shape and names, checked before anything else ------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(["ssh", "ips", "hosts", "envs", "backend", "x"]), inner, max_size=4)
    ),
    max_leaves=30,
)


@given(json_values)
@settings(max_examples=300)
def test_any_json_is_a_machine_list_or_says_what_is_wrong(value):
    try:
        hostfile = parse_hostfile(json.dumps(value))
    except HostfileError as exc:
        assert "\n" not in str(exc)
        return
    assert 1 <= len(hostfile.hosts) <= MAX_MACHINES
    assert [h.ssh for h in hostfile.hosts if host_name_problem(h.ssh)] == [], "every name is one ssh can use"
    assert [h.ssh for h in hostfile.hosts if not h.ips] == [], "every machine has an address"


@given(st.text(max_size=200))
def test_any_text_is_a_machine_list_or_says_what_is_wrong(text):
    for parse in (parse_hostfile, parse_host_lines):
        try:
            hostfile = parse(text)
        except HostfileError:
            continue
        assert all(host_name_problem(h.ssh) is None for h in hostfile.hosts)


@given(st.integers(min_value=1_000, max_value=200_000), st.sampled_from("[{"))
@settings(max_examples=10, deadline=None)
def test_deep_nesting_is_refused_in_words(depth, opener):
    closer = "]" if opener == "[" else "}"
    text = (opener + ('"a":' if opener == "{" else "")) * depth + "1" + closer * depth
    with pytest.raises(HostfileError):
        parse_hostfile(text)


def test_a_deeply_nested_file_says_so(tmp_path):
    path = tmp_path / "hosts.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(HostfileError, match="nested too deeply to be a machine list"):
        read_hostfile(path)


def test_a_huge_machine_list_is_refused_without_reading_it_all(tmp_path, monkeypatch):
    path = tmp_path / "hosts.json"
    many = [
        {"ssh": f"m{i}.local", "ips": [f"10.{i // 65536}.{i // 256 % 256}.{i % 256}"]} for i in range(200_000)
    ]
    path.write_text(json.dumps(many))
    monkeypatch.setattr("json.loads", lambda *a, **k: pytest.fail("the whole file was parsed"))
    with pytest.raises(
        HostfileError, match=f"at most {MAX_HOSTFILE_BYTES // 1024} KB and {MAX_MACHINES} machines"
    ):
        read_hostfile(path)


def test_more_machines_than_can_share_a_model_are_refused():
    many = [{"ssh": f"m{i}", "ips": [f"10.0.{i // 256}.{i % 256}"]} for i in range(MAX_MACHINES + 1)]
    with pytest.raises(HostfileError, match=f"lists {MAX_MACHINES + 1} machines; at most {MAX_MACHINES}"):
        parse_hostfile(json.dumps(many))
    assert len(parse_hostfile(json.dumps(many[:MAX_MACHINES])).hosts) == MAX_MACHINES
    typed = "\n".join(f"m{i} 10.0.{i // 256}.{i % 256}" for i in range(MAX_MACHINES + 1))
    with pytest.raises(HostfileError, match=f"more than {MAX_MACHINES} machines"):
        parse_host_lines(typed)
    with pytest.raises(HostfileError, match="at most"):
        parse_host_lines("m 10.0.0.1\n" * 100_000)


def test_too_many_addresses_or_settings_are_refused():
    ips = [f"10.0.0.{i}" for i in range(MAX_ADDRESSES + 1)]
    with pytest.raises(HostfileError, match=f"at most {MAX_ADDRESSES}"):
        parse_hostfile(json.dumps([{"ssh": "a", "ips": ips}]))
    with pytest.raises(HostfileError, match="'envs' must be"):
        parse_hostfile(json.dumps({"envs": [["A=1"]], "hosts": GOOD}))


@pytest.mark.parametrize("name", ["-oProxyCommand=touch /tmp/x", "a;b", "$(id)", "root@-x", "a`b`"])
def test_a_name_ssh_could_misread_is_refused_in_a_file_and_typed(name):
    with pytest.raises(HostfileError, match="is not a machine name ssh can use") as in_file:
        parse_hostfile(json.dumps([{"ssh": name, "ips": ["10.0.0.1"]}, GOOD[1]]))
    assert "machine 1" in str(in_file.value), "the error names the machine's place in the file"
    assert "\n" not in str(in_file.value), "the error is one line"
    with pytest.raises(HostfileError, match="is not a machine name ssh can use"):
        parse_host_lines(f"{name.replace(' ', '')} 10.0.0.1\nb 10.0.0.2")


def test_an_address_with_a_command_for_an_interface_is_refused():
    with pytest.raises(HostfileError, match="is not an IP address"):
        parse_hostfile(json.dumps([{"ssh": "a", "ips": ["fe80::1%$(id)"]}]))


def test_the_public_warning_names_each_open_address():
    warning = parse_host_lines("a 169.254.1.1\nb 203.0.113.5").public_warning()
    assert warning is not None and warning.startswith(NOT_PRIVATE), (
        "a hub on a public address gets the not-private warning"
    )
    assert "(b at 203.0.113.5)" in warning, "the warning names the machine and its address"
    assert parse_host_lines("a 169.254.1.1\nb 10.0.0.2").public_warning() is None

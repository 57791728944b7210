"""Reading mlx.launch hostfiles, the typed machine list, and telling private links apart."""

from __future__ import annotations

import json

import pytest

from app.engine.distributed.hosts import (
    HostEntry,
    HostfileError,
    is_private_link,
    parse_host_lines,
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

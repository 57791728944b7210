"""An offline download says so in words at once, after one connection attempt and no retries."""

from __future__ import annotations

import socket

import pytest
from huggingface_hub import HfApi

from app.engine.library import download as download_module
from app.engine.library import reachability
from app.engine.library.download import DownloadError, download

OFFLINE = "You appear to be offline: SpecChat could not reach huggingface.co."


@pytest.fixture
def no_network(monkeypatch):
    """Every connection fails as it does with no network: the name does not resolve."""
    calls: list[tuple[str, int]] = []

    def refuse(address, timeout=None, *args, **kwargs):
        calls.append(address)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "create_connection", refuse)
    return calls


def test_an_offline_download_says_so_after_a_single_attempt(no_network, monkeypatch, tmp_path):
    listed: list[str] = []
    monkeypatch.setattr(HfApi, "model_info", lambda self, repo_id, **kw: listed.append(repo_id))
    with pytest.raises(DownloadError) as refused:
        download("mlx-community/some-model", endpoint="https://huggingface.co", root=tmp_path)
    assert str(refused.value) == OFFLINE
    assert no_network == [("huggingface.co", 443)]  # one quick try: no retry loop
    assert listed == []  # the hub's client (with its own retries) was never reached
    assert not any(tmp_path.iterdir())


def test_losing_the_network_after_the_check_is_worded_the_same(monkeypatch, tmp_path):
    import requests

    monkeypatch.setattr(download_module, "unreachable", lambda endpoint: None)

    def drop(*_args, **_kwargs):
        raise requests.exceptions.ConnectionError(OSError(101, "Network is unreachable"))

    monkeypatch.setattr(HfApi, "model_info", drop)
    with pytest.raises(DownloadError) as refused:
        download("mlx-community/some-model", endpoint="https://huggingface.co", root=tmp_path)
    assert str(refused.value) == OFFLINE
    assert "errno" not in str(refused.value).lower() and "101" not in str(refused.value)


def test_a_reachable_hub_is_not_called_offline():
    assert reachability.unreachable("https://huggingface.co", connect=lambda a, t: None) is None
    assert reachability.hub_host("http://127.0.0.1:8123") == ("127.0.0.1", 8123)

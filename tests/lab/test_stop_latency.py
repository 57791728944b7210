"""The Stop-latency measurement runs end to end on the toy pair and prints its three rows."""

from __future__ import annotations

import re

from lab.stop_latency import main


def test_stop_latency_prints_a_row_per_case(toy_models, capsys):
    assert main(["--main", str(toy_models.main), "--prompt-words", "300", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    for case in ("Stop while reading the prompt", "Stop while answering", "a new load while answering"):
        assert re.search(rf"{case}\s+median \d+\.\d\d, max \d+\.\d\d\s+max \d+\.\d\d", out), out

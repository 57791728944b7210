"""The read-passes benchmark at the CPU-sized pair: a row per model and length, ratios that
follow from its own times."""

from __future__ import annotations

from lab.gpu.read_passes import main


def test_every_model_and_length_gets_exact_and_padded_times_and_their_ratio(capsys) -> None:
    assert main(["--pair", "tiny", "--lengths", "17,45", "--context", "40", "--repeat", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("device: ") and "context: 40 tokens" in lines[0]
    rows = [line.split() for line in lines[2:]]
    assert [(r[0], r[1], r[2], r[4]) for r in rows] == [
        ("draft", "17", "16+1", "32"),
        ("draft", "45", "32+9+4", "64"),
        ("main", "17", "16+1", "32"),
        ("main", "45", "32+9+4", "64"),
    ]
    for _, _, _, exact_ms, _, padded_ms, ratio_text in rows:
        exact, padded, ratio = float(exact_ms), float(padded_ms), float(ratio_text)
        assert exact > 0 and padded > 0
        # the times are printed to 0.1 ms, the ratio to 0.01, from the unrounded times
        assert abs(ratio - padded / exact) <= 0.01 + ratio * (0.05 / exact + 0.05 / padded)

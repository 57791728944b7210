"""Replay: record answers once, then price plain, fixed k and adaptive over them under a cost
model, without timing noise (`python -m lab.replay`)."""

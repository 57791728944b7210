"""The adaptive draft-length controller: its cost model, estimates, confidence link, probing,
saved state and the warm-up that compiles the shapes it plays; and the oracle's best fixed k in
hindsight, which the arena and telemetry report."""

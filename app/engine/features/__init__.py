"""Measurements the app itself runs for the user: the draft arena, the losslessness check, the
plain-speed baselines, telemetry and the prompt-kind classifier, with the timed run and the
built-in prompts the arena shares with the benchmark. The worker may import these."""

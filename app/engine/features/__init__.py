"""Measurements the app itself runs for the user: the draft arena, the losslessness check, the
plain-speed baselines, telemetry and the prompt-kind classifier. The worker may import these."""

"""The benchmark's oracle, under the name measurement code has always used.

The calculation lives in policy/hindsight.py because the app's arena and telemetry report it
too, and the app never imports measure/.
"""

from app.engine.policy.hindsight import Oracle, RoundRecord, best_fixed

__all__ = ["Oracle", "RoundRecord", "best_fixed"]

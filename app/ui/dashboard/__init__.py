"""The speedup dashboard: this answer's numbers, the session's history, and its charts."""

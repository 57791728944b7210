"""Durable storage in SQLite: conversations and the per-pair history of answers."""

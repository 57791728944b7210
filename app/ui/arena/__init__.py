"""The draft arena: every candidate draft raced against the loaded main on a set of prompts."""

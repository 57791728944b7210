"""Serving the loaded pair to other programs (the OpenAI API switch, its settings and its log).
It builds on the chat: it serves the chat's loaded pair and shows served answers in the chat's view."""

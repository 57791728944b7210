"""The model library: discovery, model facts, draft compatibility, memory fit and downloads.

Everything here is synchronous, Qt-free and reads only metadata files (never weights, never code).
"""

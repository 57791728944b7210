"""SpecChat's OpenAI-compatible local API: aiohttp on a loop and thread of its own.

No Qt here: the window and `python -m app serve` both drive it through `ServerRunner`, over an
engine worker's `submit`/`cancel`. The engine never imports this package."""

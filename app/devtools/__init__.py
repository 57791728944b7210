"""Developer tools that drive the real window: a fake engine, the screenshot script and the UI
benchmark. The app never imports them; tests and `python -m app ui-bench/--screenshot` do."""

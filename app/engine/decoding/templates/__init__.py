"""Chat templates: formatting a conversation for a model (`chat.py`), and rendering a model
file's own template in a limited child process (`renderer.py`, `render_child.py`, `sandbox.py`),
where a hostile or broken template cannot hang or exhaust the app."""

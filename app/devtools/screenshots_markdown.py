"""Screenshots of markdown drawn while an answer streams: bold and a list already rendered with an
open code block growing under them, then the same answer stopped inside that code block.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import QApplication, QWidget

Wait = Callable[..., bool]
Save = Callable[[QApplication, QWidget, Path], Path]

ANSWER = """To reverse a string in Python you **slice it with a step of -1**. Three things to know:

- it works on any *sequence*, lists included;
- it makes a new string, the original is untouched;
- `reversed()` gives an iterator instead.

```python
def reverse(text: str) -> str:
    \"\"\"Return text backwards.\"\"\"
    return text[::-1]


def is_palindrome(text: str) -> bool:
    cleaned = "".join(c.lower() for c in text if c.isalnum())
    return cleaned == reverse(cleaned)


print(reverse("speculative"))
print(is_palindrome("A man, a plan, a canal: Panama"))
```

Both run in linear time.
"""
SCRIPT = re.findall(r"\s*\S+|\s+", ANSWER)


def render_markdown(app: QApplication, home: Path, out: Path, wait: Wait, save: Save) -> None:
    from app.devtools.fake_engine import FakeEngine
    from app.devtools.fake_window import fake_window
    from app.ui.chat.settings_dialog import ChatSettings

    window = fake_window(home / "markdown", lambda emit: FakeEngine(emit, rate=40.0, script=SCRIPT))
    window.load_pair("/models/Qwen2.5-7B-Instruct-4bit", "/models/Qwen2.5-0.5B-Instruct-4bit")
    wait(app, lambda: window.controller.pair is not None, 10)
    window.controller.chat_settings = ChatSettings(max_tokens=len(SCRIPT))
    window.controller.send("How do I reverse a string in Python?")
    inside_code = SCRIPT.index("\n\n\ndef") + 4  # a few lines into the second function

    def streamed() -> int:
        live = window.controller.live
        return live.stats.tokens if live is not None else 0

    wait(app, lambda: streamed() > inside_code, 30)
    save(app, window, out / "markdown-while-streaming.png")
    window.controller.stop()
    wait(app, lambda: not window.controller.busy, 10)
    save(app, window, out / "markdown-stopped-in-code.png")
    window.close()

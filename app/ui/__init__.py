"""All Qt code lives here.

PySide6 is pinned to 6.11.3: 6.12.0's void methods drop a reference to None on each call,
which kills a long-running window on Python 3.11 ("none_dealloc"); tests/ui/test_qt_binding.py
guards the pin.
"""

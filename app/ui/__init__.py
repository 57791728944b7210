"""All Qt code lives here."""

import sys

if sys.version_info < (3, 12):
    # shiboken6 6.12.0 returns None from void methods (setProperty, setBackground, insertText…)
    # without taking a reference, which only Python ≥ 3.12's immortal None tolerates. On 3.11
    # every such call drops None's count by one and a long-running window dies with
    # "none_dealloc". Give None a reference count no session can exhaust, as 3.12 does.
    import ctypes

    ctypes.c_ssize_t.from_address(id(None)).value += 1 << 48

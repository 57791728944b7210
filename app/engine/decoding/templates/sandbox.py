"""The guarded Jinja environment chat templates render in (see templates.py for why).

Jinja's `ImmutableSandboxedEnvironment` blocks attribute escapes and mutation; on top of it this
bounds what one operation can produce: a size cap on `*`, `**`, `+` and `%` results (one C call
such as `'x' * 10**10` never returns to the tracer that enforces the deadline), and on padding
filters and methods. The environment mirrors what transformers gives Hub templates, without
calling transformers.
"""

from __future__ import annotations

import json
import operator
import re
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any, ClassVar

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.utils
from jinja2.compiler import CodeGenerator, Frame
from jinja2.sandbox import ImmutableSandboxedEnvironment

MAX_TEXT = 16 * 2**20  # largest string/list one operation, or the whole output, may produce
MAX_INT_BITS = 1 << 16  # largest integer `**` / `*` may produce


class TemplateError(Exception):
    """The chat template failed: it did not compile, raised, ran too long or grew too large."""


class TemplateLimitError(TemplateError):
    """The chat template ran into a limit on time or memory (not a bug in it, nor an escape)."""


class TooLarge(jinja2.exceptions.SecurityError):
    """A size guard refused a value; told apart from escapes so it reads as a memory limit."""


class _GenerationTag(jinja2.ext.Extension):
    """Accept `{% generation %}...{% endgeneration %}` (used by some Hub templates) as a no-op."""

    tags = {"generation"}  # noqa: RUF012  # jinja2 declares it a per-instance set

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.Scope(body).set_lineno(lineno)


class _Namespace(jinja2.utils.Namespace):
    """`namespace()` that refuses underscore names, so templates cannot plant dunders."""

    def __init__(*args: Any, **kwargs: Any) -> None:  # same signature trick as Jinja's
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _check_public(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        _check_public(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)


def _check_public(name: object) -> None:
    if isinstance(name, str) and name.startswith("_"):
        raise jinja2.exceptions.SecurityError(f"namespace attribute {name!r} is not allowed")


def _sized(value: Any) -> Any:
    if isinstance(value, (str, bytes, list, tuple)) and len(value) > MAX_TEXT:
        raise TooLarge("the template built a value that is too large")
    return value


def _guarded_mul(left: Any, right: Any) -> Any:
    if isinstance(left, int) and isinstance(right, (str, bytes, list, tuple)):
        left, right = right, left
    if isinstance(left, (str, bytes, list, tuple)) and isinstance(right, int):
        if len(left) * max(right, 0) > MAX_TEXT:
            raise TooLarge("the template repeats a value too many times")
    elif isinstance(left, int) and isinstance(right, int):
        if abs(left).bit_length() + abs(right).bit_length() > MAX_INT_BITS:
            raise TooLarge("the template multiplies numbers that are too large")
    return operator.mul(left, right)


def _guarded_pow(left: Any, right: Any) -> Any:
    if isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1:
        if abs(left).bit_length() * right > MAX_INT_BITS:
            raise TooLarge("the template computes a power that is too large")
    return operator.pow(left, right)


def _guarded_add(left: Any, right: Any) -> Any:
    if isinstance(left, (str, bytes, list, tuple)) and isinstance(right, (str, bytes, list, tuple)):
        if len(left) + len(right) > MAX_TEXT:
            raise TooLarge("the template built a value that is too large")
    return operator.add(left, right)


def _guarded_mod(left: Any, right: Any) -> Any:
    if isinstance(left, (str, bytes)):
        args = right if isinstance(right, tuple) else (right,)
        if any(isinstance(a, int) and abs(a) > MAX_TEXT for a in args):
            raise TooLarge("the template formats with a width that is too large")
        _check_format(left)
    return _sized(operator.mod(left, right))


_PADDING_METHODS = {"ljust", "rjust", "center", "zfill", "expandtabs"}
_HUGE_WIDTH = re.compile(r"\d{9,}")


def _check_format(fmt: Any) -> None:
    if isinstance(fmt, str) and _HUGE_WIDTH.search(fmt):
        raise TooLarge("the template formats with a width that is too large")


def _check_replace(text: Any, old: Any, new: Any) -> None:
    if isinstance(text, str) and isinstance(old, str) and isinstance(new, str) and len(new) > len(old):
        hits = len(text) + 1 if not old else text.count(old)
        if len(text) + hits * (len(new) - len(old)) > MAX_TEXT:
            raise TooLarge("the template built a value that is too large")


def _check_join(items: Any, separator: Any = "") -> None:
    if isinstance(items, (list, tuple)):
        total = len(items) * len(str(separator))
        for item in items:  # stop at the first overflow: the list may be long
            total += len(item) if isinstance(item, str) else 0
            if total > MAX_TEXT:
                raise TooLarge("the template built a value that is too large")


class _GuardedCodeGenerator(CodeGenerator):
    """Route `a ~ b` through a size check: Jinja compiles it to a direct join, not a binop."""

    def visit_Concat(self, node: jinja2.nodes.Concat, frame: Frame) -> None:
        self.write("environment.checked_size(")
        super().visit_Concat(node, frame)
        self.write(")")


class _GuardedEnvironment(ImmutableSandboxedEnvironment):
    """The sandbox with the size guards wired into operators and method calls."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})
    _binops: ClassVar[dict[str, Callable[[Any, Any], Any]]] = {
        "*": _guarded_mul,
        "**": _guarded_pow,
        "+": _guarded_add,
        "%": _guarded_mod,
    }

    code_generator_class = _GuardedCodeGenerator

    @staticmethod
    def checked_size(value: Any) -> Any:
        return _sized(value)

    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        # Fail loudly instead of printing "" so a probing template is reported, not ignored.
        raise jinja2.exceptions.SecurityError(
            f"access to attribute {attribute!r} of {type(obj).__name__!r} object is unsafe"
        )

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        return self._binops[operator](left, right)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        name = getattr(__obj, "__name__", "")
        # The sandbox hands out str.format wrapped in a plain function; look through it.
        owner = getattr(getattr(__obj, "__wrapped__", __obj), "__self__", None)
        if isinstance(owner, (str, bytes)) and name in _PADDING_METHODS:
            if any(isinstance(a, int) and a > MAX_TEXT for a in (*args, *kwargs.values())):
                raise TooLarge(f"the template pads with {name}() too far")
        if isinstance(owner, str) and name in ("format", "format_map"):
            _check_format(owner)
        if isinstance(owner, str) and name == "replace" and len(args) >= 2:
            _check_replace(owner, args[0], args[1])
        if isinstance(owner, str) and name == "join" and args:
            _check_join(list(args[0]) if isinstance(args[0], (list, tuple)) else args[0], owner)
        return _sized(ImmutableSandboxedEnvironment.call(__self, __context, __obj, *args, **kwargs))


def _checked_format_filter(format_filter: Callable[..., Any]) -> Callable[..., Any]:
    def guarded(value: Any, *args: Any, **kwargs: Any) -> Any:
        _check_format(value)
        if any(isinstance(a, int) and abs(a) > MAX_TEXT for a in (*args, *kwargs.values())):
            raise TooLarge("the template formats with a width that is too large")
        return _sized(format_filter(value, *args, **kwargs))

    return guarded


def _raise_exception(message: object) -> None:
    raise jinja2.exceptions.TemplateError(str(message))


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: Any = None,
    separators: Any = None,
    sort_keys: bool = False,
) -> str:
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _guard_filter(filter_fn: Callable[..., Any], width_arg: int) -> Callable[..., Any]:
    def guarded(*args: Any, **kwargs: Any) -> Any:
        widths = list(args[width_arg : width_arg + 1]) + [kwargs.get("width")]
        lines = str(args[0]).count("\n") + 1 if args else 1
        for w in widths:
            if (isinstance(w, int) and w > MAX_TEXT) or (isinstance(w, str) and len(w) * lines > MAX_TEXT):
                raise TooLarge("the template pads too far")
        return filter_fn(*args, **kwargs)

    return guarded


def _guarded_join(join: Callable[..., Any]) -> Callable[..., Any]:
    def guarded(eval_ctx: Any, value: Any, d: str = "", attribute: Any = None) -> Any:
        if attribute is None:
            _check_join(value, d)
        return _sized(join(eval_ctx, value, d, attribute))

    return jinja2.pass_eval_context(guarded)


def _guarded_replace(replace: Callable[..., Any]) -> Callable[..., Any]:
    def guarded(eval_ctx: Any, s: Any, old: Any, new: Any, count: Any = None) -> Any:
        _check_replace(str(s), str(old), str(new))
        return replace(eval_ctx, s, old, new, count)

    return jinja2.pass_eval_context(guarded)


def _make_environment() -> _GuardedEnvironment:
    env = _GuardedEnvironment(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[_GenerationTag, jinja2.ext.loopcontrols],
    )
    env.filters["tojson"] = _tojson
    env.filters["center"] = _guard_filter(env.filters["center"], 1)
    env.filters["indent"] = _guard_filter(env.filters["indent"], 1)
    env.filters["join"] = _guarded_join(env.filters["join"])
    env.filters["replace"] = _guarded_replace(env.filters["replace"])
    env.filters["format"] = _checked_format_filter(env.filters["format"])
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["namespace"] = _Namespace
    env.globals["dict"] = lambda *args, **kwargs: dict(*args, **kwargs)
    return env


_ENV = _make_environment()
_COMPILE_LOCK = threading.Lock()
_CACHE: dict[str, jinja2.Template] = {}


def compile_template(template: str) -> jinja2.Template:
    """The template compiled in the guarded environment (kept for the next answer)."""
    with _COMPILE_LOCK:
        compiled = _CACHE.get(template)
        if compiled is None:
            try:
                compiled = _ENV.from_string(template)
            except jinja2.exceptions.TemplateSyntaxError as error:
                raise TemplateError(
                    f"the chat template does not compile: {error.message} (line {error.lineno})"
                ) from None
            if len(_CACHE) > 32:
                _CACHE.clear()
            _CACHE[template] = compiled
        return compiled

"""A Python ``re`` pattern (a str pattern, as the compiler sees it) translated to a Java
pattern that matches what Python's does, for the plugin's ``__mws_python_re_*`` functions.

Python parses the pattern (``re._parser``, CPython's own parser, so the syntax and its errors
are Python's); the translation walks the parsed tree with a whitelist and refuses any other
construct, naming it. Java's engine then does the matching one step at a time as sre does,
which holds only where each step means the same in both, so:

- every one-character item (a literal under ``re.IGNORECASE``, ``.``, ``[...]``, ``\\d``,
  ``\\w``, ``\\s`` and their negations) becomes the explicit set of code points that Python's
  own ``re`` matches with it, under the flags in force where it stands: Java's ``\\w``, its
  case folding and its Unicode version are never relied on (a set that is Python's ``\\w``,
  ``\\d``, ``\\s`` or a complement is a token the plugin spells out from its own tables of
  the same Unicode version: ``\\w`` is 7 KB of ranges);
- the anchors become what sre tests: ``^`` (``\\A``, or after any ``\\n`` under
  ``re.MULTILINE``, the end too), ``$`` (the end or before a final ``\\n``; before any ``\\n``
  under ``re.MULTILINE``), ``\\Z`` (Java's ``\\z``), ``\\b`` and ``\\B`` by Python's ``\\w``
  (neither matches in an empty string, as in CPython 3.11);
- a repeat of something that may match empty (``(a?)*``, ``(|x)+``), where the engines stop
  iterating differently, is refused, and so is a backreference under ``re.IGNORECASE``
  (Java compares cases otherwise), ``(?>...)``, possessive repeats, ``(?(1)a|b)``,
  ``re.ASCII`` and ``re.LOCALE``.

Python's groups are Java's, numbered the same (names stay here: Java's are stricter).
"""

import functools
import re
import sys
import unicodedata
from dataclasses import dataclass
from typing import Any, List, Tuple

try:  # CPython's own parser
    from re import _constants as C  # type: ignore[attr-defined]
    from re import _parser as P  # type: ignore[attr-defined]
except ImportError:  # Python 3.10: the same modules before their rename
    import sre_constants as C
    import sre_parse as P

__all__ = ["Translated", "RegexRefused", "translate", "ALLOWED_FLAGS", "PARSER"]

#: CPython's pattern parser (``re._parser``; ``sre_parse`` before 3.11).
PARSER = P

#: The flags a translated pattern may carry (``re.UNICODE`` is every str pattern's;
#: ``re.VERBOSE`` only changes how Python parses it).
ALLOWED_FLAGS = re.IGNORECASE | re.MULTILINE | re.DOTALL | re.VERBOSE | re.UNICODE

#: Starts every translation: no match starts between a surrogate pair's halves, where Java's
#: search would try (it steps by UTF-16 unit): after a high surrogate, read as one unit.
_GUARD = "(?<![\\x{d800}-\\x{dbff}])"

_NEWLINE = "\\x{a}"


class RegexRefused(Exception):
    """A pattern (or a part of it) with no exact translation: ``construct`` names it."""

    def __init__(self, construct: str, way_out: str = "") -> None:
        super().__init__(construct)
        self.construct = construct
        self.way_out = way_out


@dataclass(frozen=True)
class Translated:
    """A Python pattern and its Java translation: ``groups`` its number of groups,
    ``names`` its named groups' numbers, ``compiled`` Python's own compiled pattern (for
    ``re.sub``'s replacement templates)."""

    java: str
    groups: int
    names: Tuple[Tuple[str, int], ...]
    compiled: "re.Pattern[str]"


def translate(pattern: str, flags: int = 0) -> Translated:
    """``pattern`` under ``flags`` as a Java pattern; RegexRefused where it has none, and
    Python's own ``re.error`` where Python refuses the pattern."""
    if flags & ~ALLOWED_FLAGS:
        raise RegexRefused(
            f"flags {re.RegexFlag(flags & ~ALLOWED_FLAGS)!r}",
            "use re.IGNORECASE, re.MULTILINE, re.DOTALL or re.VERBOSE",
        )
    compiled = re.compile(pattern, flags)
    parsed = P.parse(pattern, flags)
    _check_flags(parsed.state.flags)
    body = _sequence(list(parsed), parsed.state.flags, lookbehind=False)
    names = tuple(sorted(parsed.state.groupdict.items(), key=lambda item: item[1]))
    return Translated(_GUARD + body, parsed.state.groups - 1, names, compiled)


def _check_flags(flags: int) -> None:
    if flags & ~ALLOWED_FLAGS:
        extra = re.RegexFlag(flags & ~ALLOWED_FLAGS)
        raise RegexRefused(f"the flag {extra!r}", "use re.IGNORECASE, re.MULTILINE or re.DOTALL")


def _sequence(items: List[Tuple[Any, Any]], flags: int, lookbehind: bool) -> str:
    return "".join(_item(op, av, flags, lookbehind) for op, av in items)


def _item(op: Any, av: Any, flags: int, lookbehind: bool) -> str:
    if op is C.LITERAL and not flags & re.IGNORECASE:
        return _char(av)
    if op in (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN):
        return _one_char(_source(op, av), flags & (re.IGNORECASE | re.DOTALL))
    if op is C.BRANCH:
        return "(?:" + "|".join(_sequence(list(b), flags, lookbehind) for b in av[1]) + ")"
    if op is C.SUBPATTERN:
        group, add, remove, inner = av
        _check_flags(add)
        inner_flags = (flags | add) & ~remove
        body = _sequence(list(inner), inner_flags, lookbehind)
        return f"(?:{body})" if group is None else f"({body})"
    if op in (C.MAX_REPEAT, C.MIN_REPEAT):
        low, high, inner = av
        if inner.getwidth()[0] == 0:
            raise RegexRefused(
                "a repeat of something that may match an empty string",
                "make the repeated part match at least one character",
            )
        if high != C.MAXREPEAT and high >= 1 << 31:
            raise RegexRefused(f"a repeat count of {high}", "use a count below 2**31")
        bound = f"{{{low},}}" if high == C.MAXREPEAT else f"{{{low},{high}}}"
        lazy = "?" if op is C.MIN_REPEAT else ""
        return f"(?:{_sequence(list(inner), flags, lookbehind)}){bound}{lazy}"
    if op is C.AT:
        return _anchor(av, flags)
    if op is C.GROUPREF:
        if flags & re.IGNORECASE:
            raise RegexRefused(
                "a backreference under re.IGNORECASE", "compare the groups after matching"
            )
        if lookbehind:
            raise RegexRefused("a backreference in a lookbehind")
        return f"(?:\\{av})"
    if op in (C.ASSERT, C.ASSERT_NOT):
        direction, inner = av
        behind = direction < 0
        body = _sequence(list(inner), flags, lookbehind or behind)
        if behind:
            return _behind(op is C.ASSERT, body)
        return f"(?{'=' if op is C.ASSERT else '!'}{body})"
    raise RegexRefused(_NAMES.get(str(op), str(op).lower().replace("_", " ")))


_NAMES = {
    "POSSESSIVE_REPEAT": "a possessive repeat (*+, ++, ?+)",
    "ATOMIC_GROUP": "an atomic group (?>...)",
    "GROUPREF_EXISTS": "a conditional group (?(1)...|...)",
}


def _anchor(at: Any, flags: int) -> str:
    multiline = bool(flags & re.MULTILINE)
    if at is C.AT_BEGINNING:
        return f"(?:\\A|(?<={_NEWLINE}))" if multiline else "\\A"
    if at is C.AT_BEGINNING_STRING:
        return "\\A"
    if at is C.AT_END:
        return f"(?={_NEWLINE}|\\z)" if multiline else f"(?={_NEWLINE}?\\z)"
    if at is C.AT_END_STRING:
        return "\\z"
    word = _one_char("\\w", 0)
    after, not_after = _behind(True, word), _behind(False, word)
    # A word character on one side only.
    if at is C.AT_BOUNDARY:
        return f"(?!\\A\\z)(?:{after}|(?={word}))(?:{not_after}|(?!{word}))"
    # The same on both sides: a word character on neither, or on each.
    if at is C.AT_NON_BOUNDARY:
        return f"(?!\\A\\z)(?:{not_after}|(?={word}))(?:{after}|(?!{word}))"
    raise RegexRefused(f"the anchor {at}")


def _behind(positive: bool, body: str) -> str:
    """A lookbehind. Java reads a lookbehind's characters as code points only where a literal
    supplementary character stands in it (else a UTF-16 unit each: the low half of a pair): one
    stands here in an alternative that never matches."""
    return f"(?<{'=' if positive else '!'}(?:{body}|(?!)\U0010ffff))"


def _source(op: Any, av: Any) -> str:
    """A one-character item as Python pattern text, for Python's ``re`` to enumerate."""
    if op is C.LITERAL:
        return re.escape(chr(av))
    if op is C.NOT_LITERAL:
        return f"[^{re.escape(chr(av))}]"
    if op is C.ANY:
        return "."
    parts: List[str] = []
    for kind, value in av:
        if kind is C.NEGATE:
            parts.insert(0, "^")
        elif kind is C.LITERAL:
            parts.append(re.escape(chr(value)))
        elif kind is C.RANGE:
            parts.append(f"{re.escape(chr(value[0]))}-{re.escape(chr(value[1]))}")
        elif kind is C.CATEGORY:
            parts.append(_CATEGORIES[str(value)])
        else:
            raise RegexRefused(f"{kind} in a character class")
    return "[" + "".join(parts) + "]"


_CATEGORIES = {
    "CATEGORY_DIGIT": "\\d",
    "CATEGORY_NOT_DIGIT": "\\D",
    "CATEGORY_SPACE": "\\s",
    "CATEGORY_NOT_SPACE": "\\S",
    "CATEGORY_WORD": "\\w",
    "CATEGORY_NOT_WORD": "\\W",
}


def _char(cp: int) -> str:
    """One code point, as a Java pattern matches it literally."""
    if cp < 128 and chr(cp).isalnum():
        return chr(cp)
    if cp >= 0x10000:
        return chr(cp)
    return f"\\x{{{cp:x}}}"


#: Every code point but the surrogates, in order: what Python's ``re`` is asked about.
@functools.lru_cache(maxsize=1)
def _all_code_points() -> str:
    return "".join(map(chr, range(0xD800))) + "".join(map(chr, range(0xE000, sys.maxunicode + 1)))


#: The Unicode version of the plugin's tables (``PythonUnicode``, dev/gen_python_unicode.py),
#: whose ``\\w`` the plugin spells out for the tokens below.
_PLUGIN_UNICODE = "14.0.0"
#: What the plugin replaces by its class of Python's ``\\w``, ``\\d``, ``\\s`` or their
#: complements (``\\w`` is some 7 KB of ranges): written once in the plugin rather than in
#: every plan (``PythonRegex.Classes``).
_TOKENS = {
    "\\w": "\\p{MwsPythonWord}",
    "\\W": "\\P{MwsPythonWord}",
    "\\d": "\\p{MwsPythonDigit}",
    "\\D": "\\P{MwsPythonDigit}",
    "\\s": "\\p{MwsPythonSpace}",
    "\\S": "\\P{MwsPythonSpace}",
}


@functools.lru_cache(maxsize=256)
def _one_char(source: str, flags: int) -> str:
    """The Java class of the code points Python's ``source`` (one character) matches under
    ``flags``: where this Python's Unicode is the plugin's, the plugin's token of the same
    set (``[\\d]``, ``[^\\W]`` and ``\\d`` all are ``\\d``), else its ranges."""
    ranges = _ranges(source, flags)
    if unicodedata.unidata_version == _PLUGIN_UNICODE:
        for category, token in _TOKENS.items():
            if ranges == _ranges(category, 0):
                return token
    if not ranges:
        return "(?!)"
    parts = [_char(a) if a == b else f"{_char(a)}-{_char(b)}" for a, b in ranges]
    return "[" + "".join(parts) + "]"


@functools.lru_cache(maxsize=256)
def _ranges(source: str, flags: int) -> Tuple[Tuple[int, int], ...]:
    """The code points Python's ``source`` (one character) matches under ``flags``, as
    ranges: runs of consecutive code points found by Python's ``re`` itself."""
    text = _all_code_points()
    ranges: List[Tuple[int, int]] = []
    for run in re.finditer(f"(?:{source})+", text, flags):
        first, last = _code_point(run.start()), _code_point(run.end() - 1)
        if first < 0xD800 <= last:
            ranges += [(first, 0xD7FF), (0xE000, last)]
        else:
            ranges.append((first, last))
    return tuple(ranges)


def _code_point(index: int) -> int:
    return index if index < 0xD800 else index + 0x800

"""The plugin's ``__mws_python_re_*`` functions over patterns translated by
``mapwithstate.pyfunc.regex_syntax``, against Python's own ``re``: a table of patterns (classes
of every kind, anchors under each flag, word boundaries, lookarounds, backreferences, lazy
repeats, empty matches, case-insensitive literals that fold outside ASCII) crossed with
strings (empty, newlines where ``$`` looks, digits of other scripts, non-ASCII letters and
spaces, characters beyond the BMP) in one query: match, search, fullmatch (groups and code
point spans), findall, split and sub, each as Python gives it.
"""
import re

from pyspark.sql import functions as F

from mapwithstate.pyfunc.regex_syntax import translate

PATTERNS = [
    (r"(?P<level>[A-Z]+) (?P<code>\d{3}) (.*)", 0),
    (r"\d+", 0), (r"\w+", 0), (r"\s+", 0), (r"[^\W\d_]+", 0), (r"\S+?", 0), (r"\D\W", 0),
    (r"^\w*$", 0), (r"^\w*$", re.M), (r"a$", 0), (r"$", 0), (r"$", re.M), (r"^", re.M),
    (r"\Aa|a\Z", 0), (r".", 0), (r".+", re.S), (r"\bx\b", 0), (r"\B", 0), (r"\b", 0),
    (r"x*", 0), (r"|x", 0), (r"(a)|(b)", 0), (r"(?:(a)|b)+", 0), (r"(\w)\1", 0),
    (r"(?P<q>['\"]).*?(?P=q)", 0), (r"(?<=a)b", 0), (r"(?<!a)b", 0), (r"\w(?=\d)", 0),
    (r"k", re.I), (r"straße", re.I), (r"[a-zé]+", re.I), (r"(?i:s)S", 0), (r"error|fail", re.I),
    (r"[,;]\s*", 0), (r"a{2,3}?", 0), (r"(a|ab)(c|bcd)(d*)", 0), (r"[😀-🙏]", 0), (r"🙂", 0),
    (r"[^a]", 0), (r"\x00|\n", 0), (r"(?x) a  b  # comment", 0), (r"(?s:.)\Z", 0),
    (r"(?<=\w)_", 0), (r"(?<![😀-🙏])x", 0),
]
STRINGS = ["", "a", "ab", "ERROR 404 not found", "x", "x\n", "\nx\n", "a\nb\n", "aab", "ba",
           "٣٤5", "\u00a0 \u2028\t", "Straße STRASSE", "\u212a k K", "ſ s", "İi",
           "🙂x🙂", "😀a😎", "it's \"q\" 'x'", "aa bb cc", "ab,c; d", "abcd", "é_1 x2 日本",
           "x x x", "\x00", "🙂 x 𝐀_1", "😀x𝐀x"]


def python_results(pattern, s):
    def match(m):
        if m is None:
            return None
        n = m.re.groups
        return ([m.group(i) for i in range(n + 1)],
                [p for i in range(n + 1) for p in m.span(i)])

    findall = [list(f) if isinstance(f, tuple) else [f] for f in pattern.findall(s)]
    return (match(pattern.match(s)), match(pattern.search(s)), match(pattern.fullmatch(s)),
            findall, pattern.split(s), pattern.split(s, 2),
            pattern.sub(r"<\g<0>>", s), pattern.sub("-", s, 2))


def server_results(row):
    def match(m):
        return None if m is None else (list(m["g"]), list(m["p"]))

    return (match(row[0]), match(row[1]), match(row[2]),
            [list(f) for f in row[3]], list(row[4]), list(row[5]), row[6], row[7])


def test_patterns_match_as_python_does(spark):
    cases = [(source, flags, s) for source, flags in PATTERNS for s in STRINGS]
    expected = [python_results(re.compile(source, flags), s) for source, flags, s in cases]
    # Each translation (a few KB apiece) once in the plan, picked per row by its index.
    javas = F.array(*[F.lit(translate(source, flags).java) for source, flags in PATTERNS])
    df = spark.createDataFrame(
        [(i, s) for i in range(len(PATTERNS)) for s in STRINGS], "i INT, s STRING"
    ).select(F.element_at(javas, F.col("i") + 1).alias("java"), "s")
    p, s = F.col("java"), F.col("s")

    def re_function(name, *args):
        return F.call_function(f"__mws_python_re_{name}", p, s, *args)

    whole = F.array(F.lit("<"), F.lit("0"), F.lit(">"))
    got = df.select(
        re_function("match"), re_function("search"), re_function("fullmatch"),
        re_function("findall"), re_function("split", F.lit(0)), re_function("split", F.lit(2)),
        re_function("sub", whole, F.lit(0)), re_function("sub", F.array(F.lit("-")), F.lit(2)),
    ).collect()
    wrong = [(c, e, server_results(g)) for c, e, g in zip(cases, expected, got, strict=True)
             if server_results(g) != e]
    assert not wrong, f"{len(wrong)} of {len(cases)} differ, e.g. " + "; ".join(
        f"{c[0]!r} (flags {c[1]}) on {c[2]!r}: Python {e}, server {g}" for c, e, g in wrong[:6])

"""``min``, ``max`` and ``sorted`` with Python's order.

Python's ``max`` keeps the first of equal items (a later one replaces the best so far only
where strictly greater) and compares ``key(item)`` where a ``key=`` is given; NaN never
replaces nor is replaced; ``default=`` is returned for an empty iterable instead of raising
ValueError. ``sorted`` is stable, ``reverse=True`` too (equal items keep their input order,
``-0.0`` and ``0.0`` among them), ints and floats compare by their exact values. Python's
order of a list holding NaN is whatever its merge sort leaves (NaN compares false with
everything); rather than reproduce that, sorting two or more floats one of which is NaN fails
the query with NotImplementedError, naming the function and line.
"""

import ast
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Tuple

from pyspark.sql import Column
from pyspark.sql import functions as F

from mapwithstate.pyfunc import operators
from mapwithstate.pyfunc.pytypes import PyType
from mapwithstate.pyfunc.values import Value, literal

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Interpreter

__all__ = [
    "fold",
    "list_min_max",
    "min_max_with_keywords",
    "sort_by_keywords",
    "sorted_by",
    "sorted_list",
    "sorted_with_key",
]

# The name a key= lambda's items are bound to while the lambda is compiled over them.
_ITEMS = "__mws_key_items"


def fold(
    it: "Interpreter",
    node: ast.AST,
    candidates: List[Value],
    largest: bool,
    key: Optional[ast.Lambda] = None,
) -> Value:
    """Python's max/min of values in order (``max(a, b, c, key=...)``): a later one replaces
    the best so far only when its key is strictly greater (smaller), so the first of equals
    wins and NaN never replaces; of an int and a float the result is whichever wins (an
    int-or-float value). Each key is computed, then compared, item by item, as Python does."""
    from mapwithstate.pyfunc.paths import merge_values

    op = ast.Gt() if largest else ast.Lt()
    best = candidates[0]
    best_key = _key_of(it, key, best)
    for candidate in candidates[1:]:
        candidate_key = _key_of(it, key, candidate)
        test = operators.compare(it.ctx, node, op, candidate_key, best_key).column
        merged = merge_values(test, candidate, best)
        merged_key = merged if key is None else merge_values(test, candidate_key, best_key)
        if merged is None or merged_key is None:
            raise it.ctx.refuse(
                node,
                "min/max of values of different types",
                "Python raises TypeError comparing them"
                if key is None
                else "the items, and their keys, must each have one type",
            )
        best, best_key = merged, merged_key
    return best


def _key_of(it: "Interpreter", key: Optional[ast.Lambda], item: Value) -> Value:
    """``key(item)``: the lambda's body with its parameter bound to ``item``."""
    if key is None:
        return item
    saved = dict(it.path.env)
    it.path.env[key.args.args[0].arg] = item
    try:
        return it.value(key.body)
    finally:
        it.path.env = saved


def _keys_of(it: "Interpreter", key: ast.Lambda, items: Value) -> Value:
    """``[key(x) for x in items]``: the lambda compiled as that comprehension, whose
    elements' failures fail the query as a comprehension's do."""
    from mapwithstate.pyfunc.sequences import comprehension

    target = ast.Name(id=key.args.args[0].arg, ctx=ast.Store())
    source = ast.Name(id=_ITEMS, ctx=ast.Load())
    generator = ast.comprehension(target=target, iter=source, ifs=[], is_async=0)
    listed = ast.ListComp(elt=key.body, generators=[generator])
    for made in (target, source, generator, listed):
        ast.copy_location(made, key)
    it.path.env[_ITEMS] = items
    try:
        return comprehension(it, listed)
    finally:
        it.path.env.pop(_ITEMS, None)


def _better(
    it: "Interpreter", node: ast.AST, largest: bool, key_type: PyType, x: Column, best: Column
) -> Column:
    """Whether the key ``x`` replaces the key ``best`` (neither None): strictly greater
    (smaller), NaN never."""
    op = ast.Gt() if largest else ast.Lt()
    return _unchecked(
        it,
        lambda: (
            operators.compare(
                it.ctx, node, op, Value(x, key_type, False), Value(best, key_type, False)
            ).column
        ),
    )


def _unchecked(it: "Interpreter", compare: Callable[[], Column]) -> Column:
    """``compare()`` inside a lambda of Spark's: the failures it would add (a tuple's
    elements that are None) were checked over the whole list beforehand."""
    saved = it.ctx.failures
    it.ctx.failures = []
    try:
        return compare()
    finally:
        it.ctx.failures = saved


def _tuple_keys(it: "Interpreter", node: ast.AST, name: str, key_type: PyType) -> None:
    """Refuses tuple keys holding tuples or lists (whose Nones the checks do not reach)."""
    if key_type.kind == "tuple" and any(t.kind in ("tuple", "list") for t in key_type.args):
        raise it.ctx.refuse(
            node,
            f"{name}() comparing tuples that hold {', '.join(map(str, key_type.args))}",
            "compare by a key of flat tuples: key=lambda x: (x[0][0], x[1])",
        )


def _unordered(key_type: PyType, a: Column, b: Column) -> Column:
    """Whether Python's comparison of the keys ``a`` and ``b`` (neither null) raises:
    tuples whose deciding elements are one None and one not."""
    if key_type.kind != "tuple":
        return F.lit(False)
    from mapwithstate.pyfunc.tuples import undecided_by_none

    return undecided_by_none(a, b, key_type)


def list_min_max(
    it: "Interpreter",
    node: ast.AST,
    values: Value,
    largest: bool,
    key: Optional[ast.Lambda] = None,
    default: Optional[Value] = None,
) -> Value:
    """``max(values, key=..., default=...)`` of a list (``key`` and ``default`` optional):
    the first item whose key is largest, in one pass over the list."""
    from mapwithstate.pyfunc.paths import merge_values

    name = "max" if largest else "min"
    values = operators.none_check(it.ctx, node, values, "'NoneType' object is not iterable")
    if values.type.kind != "list":
        raise it.ctx.refuse(node, f"{name}() of a {values.type}", f"{name}() of a list")
    element = values.type.args[0]
    array = values.column
    empty = F.size(array) == F.lit(0)
    if element.kind == "none":
        if default is not None:
            # An empty list, or a list of Nones whose first item is the answer.
            merged = merge_values(empty, default, Value(F.lit(None), element, True))
            assert merged is not None  # None joins any type
            return merged
        raise it.ctx.refuse(
            node,
            f"{name}() of an empty list",
            f"Python raises ValueError: {name}() arg is an empty sequence",
        )
    if default is None:
        it.ctx.check(node, empty, "ValueError", f"{name}() arg is an empty sequence")
    keys = values if key is None else _keys_of(it, key, values)
    key_type = keys.type.args[0]
    it.ctx.check(
        node,
        (F.size(array) > 1) & F.exists(keys.column, lambda e: e.isNull()),
        "TypeError",
        f"'{'>' if largest else '<'}' not supported between instances of 'NoneType' "
        f"and '{key_type}'",
    )
    rest = F.slice(array, 2, F.greatest(F.size(array) - 1, F.lit(0)))
    _tuple_keys(it, node, name, key_type)
    if key_type.kind == "tuple":
        # Python compares each item with the best so far: where that comparison reaches a
        # None element against another value, it raises TypeError.
        pairs = F.zip_with(
            array,
            keys.column,
            lambda x, k: F.struct(x.alias("v"), k.alias("k"), F.lit(False).alias("e")),
        )
        folded = F.aggregate(
            F.slice(pairs, 2, F.greatest(F.size(pairs) - 1, F.lit(0))),
            F.try_element_at(pairs, F.lit(1)),
            lambda best, p: F.struct(
                F.when(
                    _better(it, node, largest, key_type, p.getField("k"), best.getField("k")),
                    p.getField("v"),
                )
                .otherwise(best.getField("v"))
                .alias("v"),
                F.when(
                    _better(it, node, largest, key_type, p.getField("k"), best.getField("k")),
                    p.getField("k"),
                )
                .otherwise(best.getField("k"))
                .alias("k"),
                (
                    best.getField("e") | _unordered(key_type, p.getField("k"), best.getField("k"))
                ).alias("e"),
            ),
        )
        it.ctx.check(
            node,
            F.coalesce(folded.getField("e"), F.lit(False)),
            "TypeError",
            f"'{'>' if largest else '<'}' not supported between instances of 'NoneType' and "
            "another element of a tuple",
        )
        column = folded.getField("v")
    elif key is None:
        column = F.aggregate(
            rest,
            F.try_element_at(array, F.lit(1)),
            lambda best, x: F.when(_better(it, node, largest, key_type, x, best), x).otherwise(
                best
            ),
        )
    else:
        pairs = F.zip_with(array, keys.column, lambda x, k: F.struct(x.alias("v"), k.alias("k")))
        column = F.aggregate(
            F.slice(pairs, 2, F.greatest(F.size(pairs) - 1, F.lit(0))),
            F.try_element_at(pairs, F.lit(1)),
            lambda best, p: F.when(
                _better(it, node, largest, key_type, p.getField("k"), best.getField("k")), p
            ).otherwise(best),
        ).getField("v")
    best = Value(column, element, True)
    if default is None:
        return best
    merged = merge_values(empty, default, best)
    if merged is None:
        raise it.ctx.refuse(
            node,
            f"{name}(default=<{default.type}>) of a list of {element}",
            "give a default of the items' type, or None",
        )
    return merged


def _keywords(
    it: "Interpreter", node: ast.Call, name: str, allowed: Tuple[str, ...]
) -> Dict[str, ast.expr]:
    """The call's keywords (``allowed`` only), by name, as expressions."""
    if any(k.arg is None for k in node.keywords) or any(
        isinstance(a, ast.Starred) for a in node.args
    ):
        raise it.ctx.refuse(node, "*args or **kwargs in a call", "pass arguments one by one")
    keywords = {k.arg: k.value for k in node.keywords if k.arg is not None}
    unknown = sorted(set(keywords) - set(allowed))
    if unknown:
        raise it.ctx.refuse(
            node,
            f"{name}() with {', '.join(unknown)}=",
            f"Python raises TypeError: {name}() takes the keywords {' and '.join(allowed)}",
        )
    return keywords


def _key_lambda(it: "Interpreter", name: str, key: Optional[ast.expr]) -> Optional[ast.Lambda]:
    """A ``key=`` argument: a one-parameter lambda, or None (``key=None`` too). A function
    named instead (``key=len``, ``key=counts.get``, ``key=str.lower``) is the lambda calling
    it."""
    if key is None or (isinstance(key, ast.Constant) and key.value is None):
        return None
    if isinstance(key, (ast.Name, ast.Attribute)):
        return _calling_lambda(key)
    getter = _getter_lambda(it, key)
    if getter is not None:
        return getter
    arguments = key.args if isinstance(key, ast.Lambda) else None
    if (
        not isinstance(key, ast.Lambda)
        or arguments is None
        or len(arguments.args) != 1
        or arguments.posonlyargs
        or arguments.kwonlyargs
        or arguments.vararg
        or arguments.kwarg
        or arguments.defaults
    ):
        raise it.ctx.refuse(
            key,
            f"{name}(key=<not a one-parameter lambda>)",
            "write key=lambda x: <an expression of x>",
        )
    return key


def _getter_lambda(it: "Interpreter", key: ast.expr) -> Optional[ast.Lambda]:
    """``operator.itemgetter(i[, j])`` as ``lambda x: x[i]`` (``(x[i], x[j])``) and
    ``operator.attrgetter("a")`` as ``lambda x: x.a``, their arguments constants."""
    import operator

    if not isinstance(key, ast.Call) or key.keywords or not key.args:
        return None
    func = key.func
    if isinstance(func, ast.Name):
        found = it.ctx.source.lookup(func.id) if func.id not in it.path.env else None
    elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        found = getattr(it.ctx.source.lookup(func.value.id), func.attr, None)
    else:
        return None
    if found is not operator.itemgetter and found is not operator.attrgetter:
        return None
    if not all(isinstance(a, ast.Constant) for a in key.args):
        raise it.ctx.refuse(
            key, f"{found.__name__}() of a value", "write its arguments as literals"
        )
    parameter = "__mws_key"
    parts: List[ast.expr] = []
    for argument in key.args:
        assert isinstance(argument, ast.Constant)
        item = ast.Name(id=parameter, ctx=ast.Load())
        if found is operator.itemgetter:
            parts.append(ast.Subscript(value=item, slice=argument, ctx=ast.Load()))
        elif isinstance(argument.value, str) and argument.value.isidentifier():
            parts.append(ast.Attribute(value=item, attr=argument.value, ctx=ast.Load()))
        else:
            raise it.ctx.refuse(key, "attrgetter() of a dotted name", "key=lambda x: x.a.b")
    body = parts[0] if len(parts) == 1 else ast.Tuple(elts=parts, ctx=ast.Load())
    arguments = ast.arguments(
        posonlyargs=[], args=[ast.arg(arg=parameter)], kwonlyargs=[], kw_defaults=[], defaults=[]
    )
    lambda_ = ast.Lambda(args=arguments, body=body)
    for node in ast.walk(lambda_):
        if not hasattr(node, "lineno"):
            ast.copy_location(node, key)
    return lambda_


def _calling_lambda(function: ast.expr) -> ast.Lambda:
    """``lambda x: function(x)``; for ``str.method``, ``lambda x: x.method()``."""
    parameter = "__mws_key"
    argument = ast.Name(id=parameter, ctx=ast.Load())
    if (
        isinstance(function, ast.Attribute)
        and isinstance(function.value, ast.Name)
        and function.value.id == "str"
    ):
        call = ast.Call(
            func=ast.Attribute(value=argument, attr=function.attr, ctx=ast.Load()),
            args=[],
            keywords=[],
        )
    else:
        call = ast.Call(func=function, args=[argument], keywords=[])
    arguments = ast.arguments(
        posonlyargs=[],
        args=[ast.arg(arg=parameter)],
        kwonlyargs=[],
        kw_defaults=[],
        defaults=[],
    )
    lambda_ = ast.Lambda(args=arguments, body=call)
    for node in ast.walk(lambda_):
        if node is not function and not hasattr(node, "lineno"):
            ast.copy_location(node, function)
    return lambda_


def _iterable(
    it: "Interpreter",
    node: ast.expr,
    comprehension: Callable[..., Value],
    order_free: bool = False,
) -> Value:
    """An iterable argument as a list: a generator (over a list, or over ``rows``, whose
    items are collected in record order) is compiled as the list comprehension; ``rows``
    itself as its records in record order (``max(rows, key=lambda r: r.ts)``)."""
    from mapwithstate.pyfunc.sequences import is_rows

    if is_rows(it, node):
        from mapwithstate.pyfunc.aggregates import rows_records

        return rows_records(it, node)[0]
    if isinstance(node, ast.GeneratorExp):
        listed = ast.copy_location(ast.ListComp(elt=node.elt, generators=node.generators), node)
        return comprehension(it, listed, order_free=order_free)
    from mapwithstate.pyfunc.iteration import iterated

    return iterated(it, node, it.value(node), "an ordering", order_free)


def min_max_with_keywords(it: "Interpreter", node: ast.Call, largest: bool) -> Value:
    """``min``/``max`` with ``key=`` (a one-parameter lambda, or None) and ``default=`` (for
    one iterable: a list, a comprehension, or a generator over ``rows``, whose items are
    then collected in record order)."""
    from mapwithstate.pyfunc.sequences import comprehension

    name = "max" if largest else "min"
    keywords = _keywords(it, node, name, ("key", "default"))
    key = _key_lambda(it, name, keywords.get("key"))
    if not node.args:
        raise it.ctx.refuse(
            node,
            f"{name}() of nothing",
            f"Python raises TypeError: {name} expected at least 1 argument, got 0",
        )
    if len(node.args) > 1:
        if "default" in keywords:
            raise it.ctx.refuse(
                node,
                f"{name}(a, b, ..., default=...)",
                f"Python raises TypeError: Cannot specify a default for {name}() with "
                "multiple positional arguments",
            )
        return fold(it, node, [it.value(a) for a in node.args], largest, key)
    _keyed_if_rows(it, node, name, key)
    # Without a key, no tie between a set's elements can show its order.
    values = _iterable(it, node.args[0], comprehension, order_free=key is None)
    default = it.value(keywords["default"]) if "default" in keywords else None
    return list_min_max(it, node, values, largest, key, default)


def sorted_list(
    it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    """``sorted(values, reverse=...)`` of a list."""
    unknown = set(kwargs) - {"reverse"}
    if unknown or len(args) != 1:
        raise it.ctx.refuse(
            node,
            f"sorted() with {len(args)} argument(s)"
            + (f" and {', '.join(sorted(unknown))}=" if unknown else ""),
            "sorted() takes 1 argument(s), keywords key, reverse",
        )
    from mapwithstate.pyfunc.iteration import iterated

    values = iterated(it, node.args[0], args[0], "sorted()", order_free=True)
    return _sort(it, node, values, kwargs.get("reverse", literal(False)), None)


def sorted_with_key(it: "Interpreter", node: ast.Call) -> Value:
    """``sorted(values, key=lambda x: ..., reverse=...)``: ``values`` a list, a comprehension
    or a generator over ``rows``."""
    from mapwithstate.pyfunc.sequences import comprehension

    keywords = _keywords(it, node, "sorted", ("key", "reverse"))
    if len(node.args) != 1:
        raise it.ctx.refuse(
            node,
            f"sorted() with {len(node.args)} argument(s)",
            "sorted() takes 1 argument(s), keywords key, reverse",
        )
    key = _key_lambda(it, "sorted", keywords.get("key"))
    _keyed_if_rows(it, node, "sorted", key)
    values = _iterable(it, node.args[0], comprehension)
    return sort_by_keywords(it, node, "sorted", values)


def sorted_by(
    it: "Interpreter",
    node: ast.Call,
    name: str,
    iterable: ast.expr,
    key: Optional[ast.expr],
    reverse: bool,
) -> Value:
    """``sorted(iterable, key=key, reverse=reverse)`` for a library function Python defines by it
    (``heapq.nsmallest``): ``key`` an expression of the call (a lambda, a function's name or
    None), the records compared by it only, as :func:`sorted_with_key` takes them."""
    from mapwithstate.pyfunc.sequences import comprehension, is_rows

    lambda_ = _key_lambda(it, name, key)
    if lambda_ is None and is_rows(it, iterable):
        raise it.ctx.refuse(
            node,
            f"{name}(rows) without key=",
            f"compare records by a column: {name}(..., rows, key=lambda r: r.<column>)",
        )
    return _sort(it, node, _iterable(it, iterable, comprehension), literal(reverse), lambda_)


def sort_by_keywords(it: "Interpreter", node: ast.Call, name: str, values: Value) -> Value:
    """``values`` (a list) sorted as the call's ``key=`` and ``reverse=`` say: ``sorted()``'s
    and ``list.sort()``'s order."""
    keywords = _keywords(it, node, name, ("key", "reverse"))
    key = _key_lambda(it, name, keywords.get("key"))
    reverse = it.value(keywords["reverse"]) if "reverse" in keywords else literal(False)
    return _sort(it, node, values, reverse, key)


def _keyed_if_rows(it: "Interpreter", node: ast.Call, name: str, key: Optional[ast.Lambda]) -> None:
    """Whole records are compared by a key only: Python compares two rows as tuples of all
    their columns, the key's first, which no state function means."""
    from mapwithstate.pyfunc.sequences import is_rows

    if key is None and is_rows(it, node.args[0]):
        raise it.ctx.refuse(
            node,
            f"{name}(rows) without key=",
            f"compare records by a column: {name}(rows, key=lambda r: r.<column>)",
        )


def _sort(
    it: "Interpreter", node: ast.Call, values: Value, reverse: Value, key: Optional[ast.Lambda]
) -> Value:
    """Python's stable sort of a list, by ``key(item)`` where a key is given: ints, strings and
    the like by Spark's ``sort_array`` (which is Python's order for them) without a key;
    floats, ints mixed with floats, and keys by Python's comparisons in Spark's ``array_sort``
    with a comparator (Java's TimSort, stable as Python's sort is)."""
    values = operators.none_check(it.ctx, node, values, "'NoneType' object is not iterable")
    if values.type.kind != "list":
        raise it.ctx.refuse(node, f"sorted() of a {values.type}", "sorted() of a list")
    if not reverse.is_const:
        raise it.ctx.refuse(node, "sorted(reverse=<not a literal>)", "write True or False")
    element = values.type.args[0]
    if element.kind == "none":
        return values
    keys = values if key is None else _keys_of(it, key, values)
    key_type = keys.type.args[0]
    several = F.size(values.column) > 1
    it.ctx.check(
        node,
        several & F.exists(keys.column, lambda e: e.isNull()),
        "TypeError",
        f"'<' not supported between instances of 'NoneType' and '{key_type}'",
    )
    _tuple_keys(it, node, "sorted", key_type)
    if key is None and key_type.kind not in ("float", "num", "tuple"):
        return Value(F.sort_array(values.column, asc=not reverse.const), values.type, False)
    if key_type.kind == "tuple":
        # Sorting must order every two keys that agree up to a None element against another
        # value: Python's sort compares such a pair (or one like it), and raises.
        it.ctx.check(
            node,
            several
            & F.exists(
                keys.column,
                lambda a: F.exists(keys.column, lambda b: _unordered(key_type, a, b)),
            ),
            "TypeError",
            "'<' not supported between instances of 'NoneType' and another element of a tuple",
        )
    floats = [
        i
        for i, t in enumerate(key_type.args if key_type.kind == "tuple" else [key_type])
        if t.kind in ("float", "num")
    ]
    if floats:

        def nan(e: Column) -> Column:
            from mapwithstate.pyfunc.pytypes import tuple_field

            test: Column = F.lit(False)
            for i in floats:
                t = key_type.args[i] if key_type.kind == "tuple" else key_type
                x = e.getField(tuple_field(i)) if key_type.kind == "tuple" else e
                x = x if t.kind == "float" else x.getField("f")
                test = test | F.coalesce(F.isnan(x), F.lit(False))
            return test

        it.ctx.check(
            node,
            several & F.exists(keys.column, nan),
            "NotImplementedError",
            "sorted() of a list holding NaN: Python's order of it is ill-defined (NaN compares "
            "false with everything); filter NaN out first",
        )
    lower, higher = (1, -1) if reverse.const else (-1, 1)

    def less(a: Column, b: Column) -> Column:
        return _unchecked(
            it,
            lambda: (
                operators.compare(
                    it.ctx, node, ast.Lt(), Value(a, key_type, False), Value(b, key_type, False)
                ).column
            ),
        )

    def compare(a: Column, b: Column) -> Column:
        if key is not None:
            a, b = a.getField("k"), b.getField("k")
        return F.when(less(a, b), F.lit(lower)).when(less(b, a), F.lit(higher)).otherwise(F.lit(0))

    if key is None:
        return Value(F.array_sort(values.column, compare), values.type, False)
    pairs = F.zip_with(
        values.column, keys.column, lambda x, k: F.struct(x.alias("v"), k.alias("k"))
    )
    ordered = F.transform(F.array_sort(pairs, compare), lambda p: p.getField("v"))
    return Value(ordered, values.type, False)

"""Every way the Python state-function compiler refuses a function: a ``mws.CompileError``
raised by ``map_with_state`` / ``map_groups_with_state`` before any request is sent, naming
the source file, line and column, the construct, and the way out."""
import inspect
from datetime import date, datetime, timedelta

import math
import bisect
import heapq
import itertools
import re
import statistics
from collections import Counter, defaultdict, deque

import pytest

import mapwithstate as mws
from mapwithstate import map_groups_with_state, map_with_state

HERE = __file__


def helper(x):
    return x


def line_of(function, text):
    lines, first = inspect.getsourcelines(function)
    return first + next(i for i, line in enumerate(lines) if text in line)


@mws.state_function("n BIGINT")
def while_loop(k, v, state):
    while v > 0:
        v -= 1


@mws.state_function("n BIGINT")
def loop_yield_from(k, v, state):
    for x in [1, 2]:
        yield from [{"k": k, "x": x}]


@mws.state_function("n BIGINT")
def loop_yields_two_types(k, v, f, state):
    for x in [1, 2]:
        yield {"k": k, "x": x}
        yield {"k": k, "x": f}


@mws.state_function("n BIGINT")
def loop_yields_an_int_for_a_float(k, v, f, state):
    yield {"k": k, "x": f}
    for x in [1, 2]:
        yield {"k": k, "x": x}


@mws.state_function("g MAP<STRING, ARRAY<BIGINT>>")
def nested_two_levels_down(k, v, state):
    g = [[[v]]]
    g[0][0].append(v)


@mws.state_function("g MAP<STRING, ARRAY<BIGINT>>")
def nested_item_kept(k, v, state):
    g = dict(state.g or {})
    inner = g.get(k)
    g[k].append(v)
    return {"k": k, "inner": inner}


@mws.state_function("g MAP<STRING, ARRAY<BIGINT>>")
def nested_state_read_after(k, v, state):
    g = dict(state.g or {})
    g.setdefault(k, []).append(v)
    return {"k": k, "old": state.g}


@mws.state_function("n BIGINT")
def nested_owner_of_shared_lists(k, v, state):
    xs = [v]
    g = [xs, xs]
    g[0].append(1)
    return {"k": k, "g": g}


@mws.state_function("g MAP<STRING, ARRAY<BIGINT>>")
def nested_item_stored_from_a_name(k, v, state):
    g = dict(state.g or {})
    ys = [v]
    g[k] = ys
    g[k].append(1)
    return {"k": k, "ys": ys}


@mws.state_function("g MAP<STRING, ARRAY<BIGINT>>")
def nested_item_repeated(k, v, state):
    g = dict(state.g or {})
    g[k] *= 2
    return {"k": k}


@mws.state_function("n BIGINT")
def walrus_read_after_comprehension(k, v, state):
    ys = [y for x in [v, 1] if (y := x)]
    return {"k": k, "ys": ys, "y": y}


@mws.state_function("n BIGINT")
def walrus_in_a_lambda(k, v, state):
    return {"k": k, "top": max([v, 1], key=lambda x: (y := x) + y)}


@mws.state_function("n BIGINT")
def loop_else_unassigned_at_a_break(k, v, state):
    for x in [1, 2]:
        if x == v:
            break
    else:
        found = 0
    return {"k": k, "found": found}


@mws.state_function("n BIGINT")
def loop_else_not_assigning(k, v, state):
    for x in [1, 2]:
        if x == v:
            found = x
            break
    else:
        v = 0
    return {"k": k, "found": found}


@mws.state_function("n BIGINT")
def loop_changes_type(k, v, state):
    label = 0
    for x in [1, 2]:
        label = str(x)
    return {"k": k, "label": label}


@mws.state_function("n BIGINT")
def loop_over_an_int(k, v, state):
    for c in v:
        v += c


@mws.state_function("n BIGINT")
def str_encode(k, v, state):
    return {"k": k, "size": len(k.encode())}


@mws.state_function("n BIGINT")
def maketrans_of_a_parameter(k, v, state):
    return {"k": k, "t": k.translate(str.maketrans(k, "ab"))}


@mws.state_function("n BIGINT")
def translate_by_str_keys(k, v, state):
    return {"k": k, "t": k.translate({"a": "b"})}


@mws.state_function("n BIGINT")
def maketrans_of_unequal_lengths(k, v, state):
    return {"k": k, "t": k.translate(str.maketrans("ab", "x"))}


@mws.state_function("n BIGINT")
def unpack_a_character(k, v, state):
    for a, b in k:
        v += len(a + b)


@mws.state_function("n BIGINT")
def lower_with_an_argument(k, v, state):
    return {"k": k, "lowered": k.lower("C")}


@mws.state_function("n BIGINT")
def loop_body_variable(k, v, state):
    for x in [1, 2]:
        y = x
    return {"k": k, "y": y}


@mws.state_function("n BIGINT")
def try_statement(k, v, state):
    try:
        return {"k": k}
    except ValueError:
        return None


@mws.state_function("n BIGINT")
def calls_a_function(k, v, state):
    return {"k": helper(k)}


@mws.state_function("n BIGINT")
def does_io(k, v, state):
    return {"k": open(k).read()}


@mws.state_function("n BIGINT")
def unknown_attribute(k, v, state):
    return {"k": k.missing}


@mws.state_function("n BIGINT")
def unknown_field(k, v, state):
    state.update(count=1)


@mws.state_function("n BIGINT")
def unknown_state_attribute(k, v, state):
    return {"k": state.count}


@mws.state_function("n BIGINT")
def maybe_unassigned(k, v, state):
    if v > 0:
        label = "positive"
    return {"k": label}


@mws.state_function("n BIGINT")
def round_digits(k, v, f, state):
    return {"k": round(f, k)}


@mws.state_function("n BIGINT")
def float_modular_power(k, v, f, state):
    return {"k": pow(f, 2, 5)}


@mws.state_function("n BIGINT")
def bitwise_int_or_float(k, v, f, state):
    x = v if v > 0 else f
    return {"k": x & 1}


@mws.state_function("n BIGINT")
def max_key_not_a_lambda(k, v, f, state):
    return {"k": max([v, 1], key=lambda a, b: a)}


@mws.state_function("n BIGINT")
def max_of_several_with_default(k, v, f, state):
    return {"k": max(v, 1, default=0)}


@mws.state_function("n BIGINT")
def sorted_reverse_not_a_literal(k, v, f, state):
    return {"k": sorted([v, 1], reverse=v > 0)}


@mws.state_function("n BIGINT")
def two_types(k, v, state):
    x = "a" if v > 0 else 1
    return {"k": x}


@mws.state_function("n BIGINT")
def returns_a_number(k, v, state):
    return 5


@mws.state_function("n BIGINT")
def different_keys(k, v, state):
    if v > 0:
        return {"k": k}
    return {"key": k}


@mws.state_function("n BIGINT")
def unknown_name(k, v, state):
    return {"k": undefined_thing}  # noqa: F821


@mws.state_function("n BIGINT")
def wrong_state_type(k, v, state):
    state.update(n="text")


@mws.state_function("n BIGINT")
def rows_misused(k, rows, state):
    return {"k": rows[0]}


@mws.state_function("n BIGINT")
def state_field_item(k, v, state):
    state.n[0] += 1


@mws.state_function("n BIGINT")
def aliased_list(k, v, state):
    xs = [1, 2]
    ys = xs
    xs[0] += 1
    return {"k": k, "ys": ys}


@mws.state_function("n BIGINT")
def tuple_item(k, v, state):
    t = (1, v)
    t[0] += 1


@mws.state_function("n BIGINT")
def emits_a_tuple(k, v, state):
    pair = (k, v)
    return {"k": k, "pair": pair}


@mws.state_function("n BIGINT")
def unpacks_three_into_two(k, v, state):
    a, b = (k, v, 1)
    return {"k": a, "v": b}


@mws.state_function("n BIGINT")
def unpacks_a_tuple_into_a_starred_target(k, v, state):
    a, *b = (k, v)
    return {"k": k, "v": a, "b": b}


@mws.state_function("n BIGINT")
def list_extended_through_an_alias(k, v, state):
    xs = [v]
    ys = xs
    xs += [1]
    return {"k": k, "n": len(ys)}


@mws.state_function("n BIGINT")
def match_of_a_class_pattern(k, v, state):
    match v:
        case int(x):
            n = x
        case _:
            n = 0
    return {"k": k, "n": n}


@mws.state_function("n BIGINT")
def match_of_a_mapping_pattern(k, v, state):
    match {"v": v}:
        case {"v": 1}:
            n = 1
        case _:
            n = 0
    return {"k": k, "n": n}


@mws.state_function("n BIGINT")
def match_of_a_capture_in_alternatives(k, v, state):
    match (v, 1):
        case (1, x) | (x, 1):
            n = x
        case _:
            n = 0
    return {"k": k, "n": n}


@mws.state_function("n BIGINT")
def local_def_of_two_statements(k, v, state):
    def twice(x):
        y = x * 2
        return y
    return {"k": k, "n": twice(v)}


@mws.state_function("n BIGINT")
def local_lambda_called_recursively(k, v, state):
    f = lambda x: f(x - 1) if x > 0 else 0  # noqa: E731
    return {"k": k, "n": f(v)}


@mws.state_function("n BIGINT")
def local_lambda_with_a_default(k, v, state):
    f = lambda x, y=1: x + y  # noqa: E731
    return {"k": k, "n": f(v)}


@mws.state_function("n BIGINT")
def local_lambda_called_with_too_many(k, v, state):
    f = lambda x: x + 1  # noqa: E731
    return {"k": k, "n": f(v, 2)}


@mws.state_function("n BIGINT")
def default_of_a_list(k, v, state, seen=[]):  # noqa: B006 (what is refused)
    seen.append(v)
    return {"k": k, "n": len(seen)}


@mws.state_function("n BIGINT")
def keyword_only_parameter(k, v, state, *, limit=3):
    return {"k": k, "n": limit}


@mws.state_function("n BIGINT")
def range_of_a_float(k, f, state):
    return {"k": k, "xs": list(range(f))}


@mws.state_function("n BIGINT")
def range_with_a_zero_step(k, v, state):
    return {"k": k, "xs": list(range(0, v, 0))}


@mws.state_function("n BIGINT")
def range_compared_with_a_list(k, v, state):
    return {"k": k, "same": range(3) == [0, 1, 2]}


@mws.state_function("n BIGINT")
def float_in_a_range(k, f, state):
    return {"k": k, "in": f in range(3)}


@mws.state_function("n BIGINT")
def zip_strict(k, v, state):
    return {"k": k, "n": len(list(zip([v], [v], strict=True)))}


@mws.state_function("n BIGINT")
def loop_over_mixed_tuple(k, v, state):
    n = 0
    for x in (k, v):
        n += len(x)


@mws.state_function("n BIGINT")
def tuple_index_not_literal(k, v, state):
    return {"k": k, "x": (k, v)[v]}


@mws.state_function("n BIGINT")
def dict_of_lists(k, v, state):
    return {"k": k, "n": len(dict([[v, v]]))}


@mws.state_function("n BIGINT")
def attribute_of_a_value(k, v, state):
    k.size += 1


@mws.state_function("n BIGINT")
def read_only_state_attribute(k, v, state):
    state.exists += 1


@mws.state_function("n BIGINT")
def slice_augmented(k, v, state):
    xs = [1, 2]
    xs[0:1] += [3]


@mws.state_function("n BIGINT")
def list_of_affixes(k, v, state):
    return {"k": k.startswith(["a", "b"])}


@mws.state_function("n BIGINT")
def timedelta_of_a_str(k, v, f, state):
    return {"k": k, "t": timedelta(seconds=k)}


@mws.state_function("n BIGINT")
def strptime_of_a_zone(k, v, f, state):
    return {"k": k, "t": datetime.strptime(k, "%Y %z")}


@mws.state_function("n BIGINT")
def strptime_of_a_format_known_at_run_time(k, v, f, state):
    return {"k": k, "t": datetime.strptime(k, k)}


@mws.state_function("n BIGINT")
def date_strptime(k, v, f, state):
    return {"k": k, "t": date.strptime(k, "%Y")}


@mws.state_function("n BIGINT")
def datetime_of_a_float(k, v, f, state):
    return {"k": k, "t": datetime(v, 1, f)}


@mws.state_function("xs ARRAY<BIGINT>")
def append_to_state_list(k, v, state):
    state.xs.append(v)


@mws.state_function("n BIGINT")
def pop_inside_an_expression(k, v, state):
    xs = [1, v]
    return {"k": k, "n": 1 + xs.pop()}


@mws.state_function("n BIGINT")
def append_to_an_alias(k, v, state):
    xs = [1, 2]
    ys = [xs, xs]
    xs.append(v)
    return {"k": k, "n": len(ys[0])}


@mws.state_function("n BIGINT")
def appended_list_changed(k, v, state):
    xs = [1, 2]
    outer = [[0]]
    outer.append(xs)
    xs.append(v)
    return {"k": k, "n": len(outer)}


@mws.state_function("n BIGINT")
def list_grown_while_iterated(k, v, state):
    xs = [1, 2]
    for x in xs:
        xs.append(x)
    return {"k": k, "n": len(xs)}


@mws.state_function("n BIGINT")
def del_of_a_slice(k, v, state):
    xs = [1, 2]
    del xs[0:1]
    return {"k": k, "n": len(xs)}


@mws.state_function("n BIGINT")
def del_of_a_name(k, v, state):
    x = v
    del x
    return {"k": k}


@mws.state_function("n BIGINT")
def sort_with_positional_argument(k, v, state):
    xs = [v, 1]
    xs.sort(True)
    return {"k": k, "xs": xs}


@mws.state_function("n BIGINT")
def append_of_another_type(k, v, state):
    xs = [v, 1]
    xs.append("a")
    return {"k": k, "xs": xs}


@mws.state_function("n BIGINT")
def dict_of_mixed_values_stored(k, v, state):
    row = {"k": k, "v": v}
    return {"k": k, "size": len(row)}


@mws.state_function("n BIGINT")
def unpacks_a_list_into_a_dict(k, v, state):
    xs = [v]
    return {"k": k, "d": {**xs, "a": 1}}


@mws.state_function("n BIGINT")
def dict_of_int_and_float_keys(k, v, f, state):
    return {"k": k, "d": {v: 1, f: 2}}


@mws.state_function("n BIGINT")
def isinstance_of_a_class_it_cannot_decide(k, v, state):
    return {"k": k, "is": isinstance(v, bytes)}


@mws.state_function("n BIGINT")
def factorial_of_a_float(k, f, state):
    return {"k": k, "n": math.factorial(f)}


@mws.state_function("n BIGINT")
def loop_over_a_set(k, v, state):
    n = 0
    for x in {v, 1}:
        n = n * 10 + x
    return {"k": k, "n": n}


@mws.state_function("n BIGINT")
def list_of_a_set(k, v, state):
    return {"k": k, "xs": list({v, 2})}


@mws.state_function("n BIGINT")
def list_comprehension_over_a_set(k, v, state):
    return {"k": k, "xs": [x * 2 for x in {v, 2}]}


@mws.state_function("n BIGINT")
def sorted_set_by_key(k, v, state):
    return {"k": k, "xs": sorted({v, 2}, key=lambda x: x % 2)}


@mws.state_function("n BIGINT")
def emits_a_set(k, v, state):
    return {"k": k, "seen": {v, 2}}


@mws.state_function("xs ARRAY<BIGINT>")
def stores_a_set(k, v, state):
    seen = set(state.xs or [])
    seen.add(v)
    state.update(xs=seen)


@mws.state_function("n BIGINT")
def str_of_a_set(k, v, state):
    return {"k": k, "s": str({v})}


@mws.state_function("n BIGINT")
def set_pop(k, v, state):
    seen = {v, 1}
    x = seen.pop()
    return {"k": k, "x": x}


@mws.state_function("n BIGINT")
def unhashable_set_element(k, v, state):
    return {"k": k, "n": len({(v, 1)[0], 2} | {[v]})}


@mws.state_function("n BIGINT")
def set_of_bools_and_ints(k, v, state):
    return {"k": k, "n": len({True, v})}


@mws.state_function("n BIGINT")
def set_changed_through_an_alias(k, v, state):
    seen = {1}
    other = seen
    seen.add(v)
    return {"k": k, "n": len(other)}


@mws.state_function("n BIGINT")
def set_of_a_str(k, v, state):
    return {"k": k, "n": len(set(k))}


@mws.state_function("info STRUCT<n: BIGINT, total: DOUBLE>")
def struct_with_an_unknown_field(k, v, state):
    state.update(info={"n": v, "count": 1})


@mws.state_function("n BIGINT")
def reads_the_clock(k, v, f, state):
    return {"k": k, "d": datetime.now()}


@mws.state_function("n BIGINT")
def raise_from(k, v, state):
    if v:
        raise ValueError("bad") from None
    return {"k": k}


@mws.state_function("xs ARRAY<BIGINT>")
def deque_sliced(k, v, state):
    d = deque(state.xs or [], maxlen=3)
    return {"k": k, "head": d[:2]}


@mws.state_function("xs ARRAY<BIGINT>")
def deque_stored(k, v, state):
    d = deque(state.xs or [], maxlen=3)
    d.append(v)
    state.update(xs=d)


@mws.state_function("xs ARRAY<BIGINT>")
def deque_maxlen_that_may_change(k, v, state):
    v = abs(v)
    d = deque(state.xs or [], maxlen=v)
    return {"k": k, "n": len(d)}


@mws.state_function("xs ARRAY<BIGINT>")
def deque_popleft_in_an_expression(k, v, state):
    d = deque(state.xs or [])
    return {"k": k, "n": 1 + d.popleft()}


@mws.state_function("m MAP<STRING, BIGINT>")
def counter_formatted(k, state):
    c = Counter(k)
    return {"k": k, "text": str(c)}


@mws.state_function("m MAP<STRING, BIGINT>")
def counter_aliased(k, state):
    c = Counter(k)
    other = c
    return {"k": k, "n": len(other)}


@mws.state_function("m MAP<STRING, BIGINT>")
def counter_reassigned(k, state):
    c = Counter(k)
    c = {}
    return {"k": k, "n": len(c)}


@mws.state_function("m MAP<STRING, BIGINT>")
def counter_emitted(k, state):
    return {"k": k, "counts": Counter(k)}


@mws.state_function("m MAP<STRING, BIGINT>")
def counter_of_floats(k, f, state):
    return {"k": k, "n": len(Counter([f, f]))}


@mws.state_function("m MAP<STRING, BIGINT>")
def defaultdict_of_a_lambda(k, state):
    d = defaultdict(lambda: 1)
    d[k] += 1
    state.update(m=d)


@mws.state_function("m MAP<STRING, BIGINT>")
def defaultdict_read_inside_an_expression(k, state):
    d = defaultdict(int)
    return {"k": k, "n": d[k] + 1}


@mws.state_function("m MAP<STRING, BIGINT>")
def statistics_of_bools(k, state):
    return {"k": k, "m": statistics.mean([k == "a", True])}


@mws.state_function("m MAP<STRING, BIGINT>")
def variance_with_a_mean(k, f, state):
    return {"k": k, "m": statistics.variance([f, 1.0], 1.0)}


@mws.state_function("xs ARRAY<BIGINT>")
def heap_pushed(k, v, state):
    xs = list(state.xs or [])
    heapq.heappush(xs, v)
    state.update(xs=xs)


@mws.state_function("xs ARRAY<BIGINT>")
def islice_of_a_run_time_bound(k, v, state):
    return {"k": k, "xs": list(itertools.islice(state.xs or [], v))}


@mws.state_function("xs ARRAY<BIGINT>")
def chain_of_strs(k, state):
    return {"k": k, "cs": list(itertools.chain(k, "x"))}


@mws.state_function("xs ARRAY<BIGINT>")
def bisect_within_bounds(k, v, state):
    return {"k": k, "i": bisect.bisect_left(state.xs or [], v, 1)}


@mws.state_function("xs ARRAY<BIGINT>")
def insort_by_key(k, v, state):
    xs = list(state.xs or [])
    bisect.insort(xs, v, key=abs)
    state.update(xs=xs)

@mws.state_function("n BIGINT")
def regex_of_a_run_time_pattern(k, state):
    return {"k": k, "m": bool(re.match(k, "abc"))}


@mws.state_function("n BIGINT")
def regex_atomic_group(k, state):
    return {"k": k, "m": bool(re.search(r"(?>a+)b", k))}


@mws.state_function("n BIGINT")
def regex_repeat_of_an_empty_match(k, state):
    return {"k": k, "m": re.findall(r"(a?)*", k)}


@mws.state_function("n BIGINT")
def regex_backreference_ignoring_case(k, state):
    return {"k": k, "m": bool(re.match(r"(a)\1", k, re.IGNORECASE))}


@mws.state_function("n BIGINT")
def regex_ascii_flag(k, state):
    return {"k": k, "m": bool(re.match(r"\w", k, re.ASCII))}


@mws.state_function("n BIGINT")
def regex_function_replacement(k, state):
    return {"k": k, "s": re.sub("a", lambda m: "b", k)}


@mws.state_function("n BIGINT")
def regex_match_emitted(k, state):
    return {"k": k, "m": re.match("a", k)}


@mws.state_function("n BIGINT")
def regex_unknown_group(k, state):
    m = re.match("(a)", k)
    return {"k": k, "g": m.group(2) if m else None}


@mws.state_function("n BIGINT")
def regex_of_an_int(k, v, state):
    return {"k": k, "m": bool(re.match("1", v))}


@mws.state_function("n BIGINT")
def regex_invalid_pattern(k, state):
    return {"k": k, "m": bool(re.search("(a", k))}


@pytest.mark.parametrize("spec, text, construct", [
    (deque_sliced, "d[:2]", "a slice of a deque"),
    (deque_stored, "xs=d", "a deque stored in the state"),
    (deque_maxlen_that_may_change, "maxlen=v", "a deque's maxlen that may change during"),
    (deque_popleft_in_an_expression, "d.popleft()", "deque.popleft() inside an expression"),
    (counter_formatted, "str(c)", "a Counter passed to str()"),
    (counter_aliased, "other = c", "a Counter assigned to another name"),
    (counter_reassigned, "c = {}", "c (a Counter) assigned another value"),
    (counter_emitted, "Counter(k)}", "a Counter used here"),
    (counter_of_floats, "Counter([f, f])", "Counter() of float items"),
    (defaultdict_of_a_lambda, "defaultdict(", "defaultdict() without one of the factories"),
    (defaultdict_read_inside_an_expression, "d[k] + 1",
     "a defaultdict's d[k] read inside an expression"),
    (statistics_of_bools, "statistics.mean", "statistics.mean() of bool items"),
    (variance_with_a_mean, "statistics.variance", "statistics.variance() with 2 argument(s)"),
    (loop_over_a_set, "for x in", "a for loop over a set"),
    (list_of_a_set, "list(", "list() over a set"),
    (list_comprehension_over_a_set, "[x * 2", "a comprehension over a set"),
    (sorted_set_by_key, "sorted(", "an ordering over a set"),
    (emits_a_set, '"seen"', "a set emitted as column 'seen'"),
    (stores_a_set, "state.update", "a set stored as state field 'xs'"),
    (str_of_a_set, "str(", "str() of a set"),
    (set_pop, "seen.pop()", "set.pop()"),
    (unhashable_set_element, "{[v]}", "a list as a set element"),
    (set_of_bools_and_ints, "{True, v}", "a set of bool and int elements"),
    (set_changed_through_an_alias, "other = seen", "seen.add() (line"),
    (set_of_a_str, "set(k)", "set() of a str"),
    (while_loop, "while v", "while loop"),
    (loop_yield_from, "yield from", "yield from in a for loop"),
    (loop_yields_two_types, "for x", "column 'x' yielded in a loop as a int and a float"),
    (loop_yields_an_int_for_a_float, "for x", "output column 'x' yielded in a loop as int"),
    (nested_two_levels_down, "g[0][0].append", "an item of an item (two levels down)"),
    (nested_item_kept, "inner = g.get(k)", "g's item kept here may be changed in place"),
    (nested_state_read_after, '"old": state.g', "state.g read after g's item was changed"),
    (nested_owner_of_shared_lists, "g = [xs, xs]", "g made of other lists' or dicts' items"),
    (nested_item_stored_from_a_name, "g[k] = ys", "an item of g that may be another name's"),
    (nested_item_repeated, "g[k] *= 2", "augmented assignment *= to an item that is a list"),
    (walrus_read_after_comprehension, "(y := x)", "a walrus in a comprehension binding 'y'"),
    (walrus_in_a_lambda, "(y := x)", "a walrus in a lambda"),
    (loop_else_unassigned_at_a_break, '"found": found', "variable 'found' may be unassigned"),
    (loop_else_not_assigning, '"found": found', "variable 'found' may be unassigned"),
    (loop_changes_type, "for x", "variable 'label' is a int before the loop's body and a str"),
    (loop_over_an_int, "for c", "a for loop over a int"),
    (str_encode, "k.encode()", "str.encode()"),
    (maketrans_of_a_parameter, "str.maketrans(k", "str.maketrans() of a value known only at run"),
    (translate_by_str_keys, "k.translate(", "translate() of a dict of str to str"),
    (maketrans_of_unequal_lengths, "str.maketrans(", "str.maketrans() of these arguments"),
    (unpack_a_character, "for a, b", "unpacking a str into 'a, b'"),
    (lower_with_an_argument, "k.lower", "lower() with 1 argument(s)"),
    (loop_body_variable, '"y": y', "variable 'y' may be unassigned"),
    (try_statement, "try:", "try statement"),
    (calls_a_function, "helper(k)", "call to helper()"),
    (does_io, "open(k)", "call to open()"),
    (unknown_attribute, "k.missing", "attribute 'missing' of a str"),
    (unknown_field, "count=1", "unknown state field 'count'"),
    (unknown_state_attribute, "state.count", "unknown state attribute 'count'"),
    (heap_pushed, "heapq.heappush", "call to heappush()"),
    (islice_of_a_run_time_bound, "itertools.islice", "islice() of a bound that is not a literal"),
    (chain_of_strs, "itertools.chain", "itertools.chain() of a str"),
    (bisect_within_bounds, "bisect.bisect_left", "bisect_left() with lo"),
    (insort_by_key, "bisect.insort", "insort() with lo, hi or key"),
    (maybe_unassigned, '{"k": label}', "variable 'label' may be unassigned"),
    (round_digits, "round(f, k)", "round() with ndigits of type str"),
    (float_modular_power, "pow(f, 2, 5)", "pow() of float, int and int"),
    (bitwise_int_or_float, "x & 1", "operator & on a value that is an int or a float"),
    (max_key_not_a_lambda, "key=lambda a, b", "max(key=<not a one-parameter lambda>)"),
    (max_of_several_with_default, "default=0", "max(a, b, ..., default=...)"),
    (sorted_reverse_not_a_literal, "reverse=", "sorted(reverse=<not a literal>)"),
    (two_types, "x = ", "conditional expression of a str and a int"),
    (returns_a_number, "return 5", "return of a int"),
    (unknown_name, "undefined_thing", "unknown name 'undefined_thing'"),
    (wrong_state_type, "state.update", "state field 'n' is int (bigint) but the value is str"),
    (state_field_item, "state.n[0]", "augmented assignment to an item of state.n"),
    (aliased_list, "ys = xs", "xs[...] += (line"),
    (tuple_item, "t = (1, v)", "item assignment to a tuple"),
    (emits_a_tuple, "return", "output column 'pair' holding a tuple"),
    (unpacks_three_into_two, "a, b =", "unpacking a tuple of 3 into 2 targets"),
    (unpacks_a_tuple_into_a_starred_target, "a, *b", "a starred target unpacking a tuple"),
    (list_extended_through_an_alias, "ys = xs", "xs += (line"),
    (match_of_a_class_pattern, "int(x)", "match with a class pattern"),
    (match_of_a_mapping_pattern, '{"v": 1}', "match with a mapping pattern"),
    (match_of_a_capture_in_alternatives, "(1, x)", "a capture inside a | pattern"),
    (local_def_of_two_statements, "def twice", "local function twice() of more than one"),
    (local_lambda_called_recursively, "f(x - 1)", "recursive call of local function"),
    (local_lambda_with_a_default, "lambda x, y=1", "a local function with *args"),
    (local_lambda_called_with_too_many, "f(v, 2)", "call of <lambda>() with 2 arguments"),
    (default_of_a_list, "seen=[]", "parameter 'seen' names no column and its default is a list"),
    (keyword_only_parameter, "def keyword_only_parameter", "keyword-only"),
    (range_of_a_float, "range(f)", "range() argument of type float"),
    (range_with_a_zero_step, "0, v, 0", "range() with a zero step"),
    (float_in_a_range, "f in range", "float in range(...)"),
    (range_compared_with_a_list, "range(3) ==", "range() used as a value"),
    (zip_strict, "zip(", "zip() with strict="),
    (loop_over_mixed_tuple, "(k, v)", "a for loop over a tuple of str, int"),
    (tuple_index_not_literal, "(k, v)[v]", "an index that is not an int literal into a tuple"),
    (dict_of_lists, "dict(", "dict() of a list of list"),
    (attribute_of_a_value, "k.size", "augmented assignment to an attribute of a str"),
    (read_only_state_attribute, "state.exists", "augmented assignment to state.exists"),
    (slice_augmented, "xs[0:1]", "augmented assignment to a slice"),
    (list_of_affixes, "k.startswith", "startswith() of a list"),
    (timedelta_of_a_str, "seconds=k", "timedelta(seconds=<str>)"),
    (strptime_of_a_zone, "%z", "strptime directive %z"),
    (strptime_of_a_format_known_at_run_time, "strptime(k, k)", "strptime() of a format known"),
    (date_strptime, "date.strptime", "unknown attribute 'strptime'"),
    (datetime_of_a_float, "datetime(v, 1, f)", "datetime(day=<float>)"),
    (append_to_state_list, "state.xs.append", "list.append() inside an expression"),
    (pop_inside_an_expression, "xs.pop()", "list.pop() inside an expression"),
    (append_to_an_alias, "ys = [xs, xs]", "xs.append() (line"),
    (appended_list_changed, "outer.append(xs)", "xs.append() (line"),
    (list_grown_while_iterated, "for x in xs", "xs.append() (line"),
    (del_of_a_slice, "del xs[0:1]", "del of a slice"),
    (del_of_a_name, "del x", "del of Name"),
    (sort_with_positional_argument, "xs.sort(True)", "list.sort() with positional arguments"),
    (append_of_another_type, 'xs.append("a")', "a str added to a list"),
    (dict_of_mixed_values_stored, "len(row)", "a dict of str and int values used as a value"),
    (unpacks_a_list_into_a_dict, "{**xs", "** of a list"),
    (dict_of_int_and_float_keys, "{v: 1", "a dict of num keys"),
    (isinstance_of_a_class_it_cannot_decide, "bytes", "isinstance() of bytes"),
    (factorial_of_a_float, "factorial(f)", "math.factorial() of a float"),
    (struct_with_an_unknown_field, '"count": 1', "unknown field(s) count for a struct"),
    (reads_the_clock, "datetime.now()", "datetime.now()"),
    (raise_from, "raise ValueError", "raise ... from ..."),
    (regex_of_a_run_time_pattern, "re.match(k", "a regular expression pattern known only at run"),
    (regex_atomic_group, "(?>a+)", "an atomic group (?>...) in the pattern"),
    (regex_repeat_of_an_empty_match, "(a?)*", "a repeat of something that may match an empty"),
    (regex_backreference_ignoring_case, "re.IGNORECASE", "a backreference under re.IGNORECASE"),
    (regex_ascii_flag, "re.ASCII", "flags re.ASCII"),
    (regex_function_replacement, "lambda m", "a replacement that is a function"),
    (regex_match_emitted, 're.match("a", k)}', "holding a re.Match"),
    (regex_unknown_group, "m.group(2)", "group 2"),
    (regex_of_an_int, 're.match("1", v)', "a regular expression applied to a int"),
    (regex_invalid_pattern, '"(a"', "re.error: missing ), unterminated subpattern"),
], ids=lambda x: getattr(getattr(x, "python", None), "__name__", None))
def test_refused_constructs_name_the_line_and_construct(spark, spec, text, construct):
    df = spark.createDataFrame([("a", 1, 1.5)], "k STRING, v BIGINT, f DOUBLE")
    with pytest.raises(mws.CompileError) as refused:
        map_with_state(df, key="k", spec=spec)
    error = refused.value
    assert (error.file, error.line) == (HERE, line_of(spec.python, text)), str(error)
    assert construct in error.construct, str(error)
    assert error.hint and str(error).startswith(f"{HERE}:{error.line}:{error.col}: ")


@mws.state_function("last STRUCT<v: BIGINT>")
def record_stored(k, rows, state):
    for r in rows:
        state.update(last=r)


@mws.state_function("n BIGINT")
def rows_max_without_key(k, rows, state):
    return {"k": k, "top": max(rows, key=None).v}


@pytest.mark.parametrize("spec, text, construct", [
    (rows_misused, "rows[0]", "a record of rows as output column 'k'"),
    (record_stored, "state.update", "a record of rows as state field 'last'"),
    (rows_max_without_key, "max(rows", "max(rows) without key="),
], ids=lambda x: getattr(getattr(x, "python", None), "__name__", None))
def test_refused_uses_of_rows_name_the_line_and_construct(spark, spec, text, construct):
    df = spark.createDataFrame([("a", 1)], "k STRING, v BIGINT")
    with pytest.raises(mws.CompileError) as refused:
        map_groups_with_state(df, key="k", spec=spec)
    assert construct in refused.value.construct
    assert refused.value.line == line_of(spec.python, text)


def test_emitted_dicts_with_different_keys(spark):
    df = spark.createDataFrame([("a", 1)], "k STRING, v BIGINT")
    with pytest.raises(mws.CompileError, match="emitted dicts with different keys"):
        map_with_state(df, key="k", spec=different_keys)


def test_a_parameter_that_names_no_column_lists_the_columns(spark):
    df = spark.createDataFrame([("a", 1)], "word STRING, v BIGINT")
    with pytest.raises(mws.CompileError) as refused:
        map_with_state(df, key="word", spec=while_loop)
    assert "parameter 'k' names no column" in str(refused.value)
    assert "word, v" in str(refused.value)


def test_rows_only_in_group_functions(spark):
    df = spark.createDataFrame([("a", 1)], "k STRING, v BIGINT")
    with pytest.raises(mws.CompileError, match="has a 'rows' parameter"):
        map_with_state(df, key="k", spec=rows_misused)
    with pytest.raises(mws.CompileError, match="has no 'rows' parameter"):
        map_groups_with_state(df, key="k", spec=while_loop)


def test_a_function_without_source_is_refused_when_decorated():
    namespace = {}
    exec("def f(k, state):\n    return None\n", namespace)
    with pytest.raises(mws.CompileError, match="has no source"):
        mws.state_function("n BIGINT")(namespace["f"])


@pytest.mark.connect_only
def test_a_function_nesting_too_deep_for_spark_connect_is_refused(spark):
    # 500 statements, each building on the last: Columns nesting past what Spark Connect
    # sends are refused, naming the function, not a protobuf DecodeError when sent.
    import linecache

    source = "def chained(k, v, state):\n    n = v\n" + "    n = n + 1\n" * 500 + \
        "    return {'k': k, 'n': n}\n"
    filename = "<chained>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {}
    exec(compile(source, filename, "exec"), namespace)
    spec = mws.state_function("n BIGINT")(namespace["chained"])
    df = spark.createDataFrame([("a", 1)], "k STRING, v BIGINT")
    with pytest.raises(mws.CompileError, match="state function chained: its Columns nest too "
                                               "deep for Spark Connect") as refused:
        map_with_state(df, key="k", spec=spec)
    assert (refused.value.file, refused.value.line) == (filename, 1)

"""mapwithstate.testing's State and call: one call of a Python state function, in plain Python
(no server)."""
from datetime import datetime, timedelta

import pytest

from mapwithstate.testing import State, call
from mapwithstate.testing.schema import state_schema

T0 = datetime(2024, 1, 1, 12, 0, 0)


def test_fields_read_none_without_a_state_and_the_new_value_after_update():
    state = State("n BIGINT, name STRING")
    assert (state.exists, state.n, state.name) == (False, None, None)
    state.update(n=1)
    assert (state.exists, state.n, state.name) == (True, 1, None)
    state.update(name="é")
    assert (state.n, state.name) == (1, "é")


def test_an_augmented_field_is_an_update_and_other_attributes_stay_read_only():
    state = State("n BIGINT, x DOUBLE", {"n": 1, "x": 0.5})
    state.n += 2
    state.x *= 3
    assert (state.n, state.x) == (3, 1.5)
    fresh = State("n BIGINT")
    with pytest.raises(TypeError):
        fresh.n += 1  # None + 1
    assert not fresh.exists
    with pytest.raises(AttributeError, match="cannot be assigned"):
        fresh.n = 4
    with pytest.raises(AttributeError, match="cannot be assigned"):
        state.exists = False


def test_the_last_of_update_and_remove_decides():
    state = State("n BIGINT", {"n": 5})
    state.remove()
    assert (state.exists, state.n) == (False, None)
    state.update(n=7)
    assert (state.exists, state.n) == (True, 7)
    result = call(lambda state: state.remove(), State("n BIGINT", {"n": 1}))
    assert result.state is None
    result = call(lambda state: (state.remove(), state.update(n=2)) and None,
                  State("n BIGINT", {"n": 1}))
    assert result.state == {"n": 2}


def test_update_converts_to_the_field_types_and_refuses_what_does_not_fit():
    state = State("n BIGINT, x DOUBLE, tags ARRAY<STRING>, m MAP<STRING, INT>")
    state.update(n=True, x=3, tags=("a",), m={"k": 1})
    assert (state.n, state.x, state.tags, state.m) == (1, 3.0, ["a"], {"k": 1})
    assert isinstance(state.x, float)
    with pytest.raises(OverflowError, match=r"state\.n: 9223372036854775808 does not fit bigint"):
        state.update(n=2 ** 63)
    with pytest.raises(TypeError, match=r"state\.x: a str \('1'\) cannot be stored as double"):
        state.update(x="1")
    with pytest.raises(TypeError, match=r"unknown field\(s\) count; the state's fields are n"):
        state.update(count=1)
    with pytest.raises(AttributeError, match="no field 'count'"):
        state.count
    with pytest.raises(AttributeError, match=r"state.update\(n=...\)"):
        state.n = 1


def test_a_field_named_like_the_states_own_attributes_is_refused():
    with pytest.raises(ValueError, match="timer clash"):
        State("timer TIMESTAMP")


def test_timers_apply_in_order_and_a_fired_timer_is_spent():
    state = State("n BIGINT", timer=T0, batch_time=T0)
    assert state.timer == T0
    state.set_timer(T0 + timedelta(seconds=5))
    state.clear_timer()
    assert state.timer is None
    untouched = call(lambda state: None, State("n BIGINT", timer=T0))
    assert (untouched.timer, untouched.timer_set) == (T0, False)
    fired = State("n BIGINT", {"n": 1}, timer=T0, timing_out=True)
    assert fired.timer == T0
    assert call(lambda state: None, fired).timer is None
    again = call(lambda state: state.set_timer(T0 + timedelta(1)),
                 State("n BIGINT", timer=T0, timing_out=True))
    assert again.timer == T0 + timedelta(1)


def test_call_binds_parameters_by_name_and_normalises_the_output():
    def emit_twice(state, word, v):
        yield {"word": word, "v": v}
        yield {"word": word, "v": -v}

    assert call(emit_twice, State("n INT"), {"v": 2, "word": "w"}).emitted == [
        {"word": "w", "v": 2}, {"word": "w", "v": -2}]
    with pytest.raises(TypeError, match="parameter 'x' names no column; the columns are v"):
        call(lambda x, state: None, State("n INT"), {"v": 1})
    with pytest.raises(TypeError, match="returned a value of type int"):
        call(lambda state: 1, State("n INT"))

    def uneven(state):
        yield {"a": 1}
        yield {"b": 1}

    with pytest.raises(ValueError, match=r"different keys: \['a'\] and \['b'\]"):
        call(uneven, State("n INT"))


def test_a_group_function_sees_rows_with_attribute_access():
    def totals(k, rows, state):
        state.update(total=(state.total or 0) + sum(r.v for r in rows))
        return {"k": k, "n": len(rows), "total": state.total}

    result = call(totals, State("total BIGINT", {"total": 10}), {"k": "a"},
                  rows=[{"k": "a", "v": 1}, {"k": "a", "v": 2}])
    assert result.emitted == [{"k": "a", "n": 2, "total": 13}]
    assert result.state == {"total": 13}
    with pytest.raises(TypeError, match="a group function"):
        call(totals, State("total BIGINT"), {"k": "a"})


def test_state_schemas_parse_without_spark():
    schema = state_schema("a BIGINT, `b c` ARRAY<STRUCT<x: INT, y: MAP<STRING, DECIMAL(5, 2)>>>")
    assert schema.simpleString() == \
        "struct<a:bigint,b c:array<struct<x:int,y:map<string,decimal(5,2)>>>>"
    with pytest.raises(ValueError, match="'BLOB' is not a data type"):
        state_schema("a BLOB")


def test_an_emitted_int_beyond_64_bits_fails_the_call():
    with pytest.raises(OverflowError, match="output column 'n': 9223372036854775808 does not"):
        call(lambda state: {"n": 2 ** 63}, State("n INT"))
    assert call(lambda state: {"n": -2 ** 63}, State("n INT")).emitted == [{"n": -2 ** 63}]

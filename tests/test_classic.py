"""What is particular to a classic session: the Column kind, mixing kinds, eager errors."""
from datetime import datetime

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

import mapwithstate as mws
from mapwithstate import StateSpec, map_with_state
from mapwithstate import functions as S
from mapwithstate.testing import replay

T0 = datetime(2026, 1, 1)
T1 = datetime(2026, 1, 1, 0, 0, 1)

pytestmark = pytest.mark.sessions("classic")


def test_state_functions_make_classic_columns_on_a_classic_session(spark):
    from pyspark.sql.classic.column import Column as ClassicColumn

    for column in (S.state("n"), S.new_state(), S.state_exists(), S.is_timing_out(),
                   S.batch_time()):
        assert isinstance(column, ClassicColumn)


def test_a_connect_column_with_a_classic_dataframe_is_a_type_error_naming_it(spark):
    from pyspark.sql.connect import functions as CF

    df = spark.createDataFrame([("a",)], "word STRING")
    spec = StateSpec.function("n BIGINT", update=CF.struct(CF.lit(1).alias("n")))
    with pytest.raises(TypeError, match=r"spec.update is a Spark Connect Column, but the "
                                        r"DataFrame is a classic one"):
        map_with_state(df, key="word", spec=spec, output="snapshots")


def test_errors_are_raised_by_map_with_state_itself(spark):
    df = spark.createDataFrame([("a",)], "word STRING")
    spec = StateSpec.function("n BIGINT", update=F.struct(F.lit(1).alias("n")))
    with pytest.raises(PySparkException, match=r"key: .*nope"):
        map_with_state(df, key="nope", spec=spec, output="snapshots")


@mws.state_function("r DOUBLE")
def rounding_and_exact_order(k, x, i, state):
    state.update(r=round(x, 2))
    return {"k": k, "r": state.r, "tens": round(x, -1), "gt": i > x, "max": str(max(i, x))}


def test_python_functions_call_the_plugins_reserved_functions_on_a_classic_session(spark):
    """round(x, n) compiles to the plugin's __mws_python_round, which the classic session's
    extensions register too; ints and floats compare exactly there as well."""
    rows = [("a", 2.675, 2 ** 53 + 1), ("b", 2.0 ** 63, 2 ** 63 - 1), ("c", 0.125, 3),
            ("d", -0.001, 3)]
    df = spark.createDataFrame(rows, "k STRING, x DOUBLE, i BIGINT")
    out = sorted((r.asDict() for r in map_with_state(df, key="k",
                                                      spec=rounding_and_exact_order).collect()),
                 key=lambda r: r["k"])
    expected = [row for batch in replay(rounding_and_exact_order,
                                        [{"k": k, "x": x, "i": i, "t": T0} for k, x, i in rows],
                                        key="k", batch_time="t") for row in batch.emitted]
    assert out == sorted(expected, key=lambda r: r["k"])
    assert [(r["r"], r["gt"], r["max"]) for r in out] == [
        (2.67, True, str(2 ** 53 + 1)), (2.0 ** 63, False, "9.223372036854776e+18"),
        (0.12, True, "3"), (-0.0, True, "3")]
    assert repr(out[3]["r"]) == "-0.0" and repr(out[3]["tens"]) == "-0.0"


def test_a_branching_function_of_40_names_compiles_and_runs_on_a_classic_session(spark, tmp_path):
    """A classic compile names a function's values as a Connect one does (copied, its plan
    tripled with each if: 1.3 MB of SQL at 4 ifs, never finishing at 39), with the plugin's
    __mws_python_let, which the classic session's extensions register. Compiled once, run
    once: the emitted n is the state, which the second batch reads."""
    from bench.named_values import branching_function

    spec = branching_function(tmp_path, 39)
    rows = [{"k": "a", "i": 7, "j": 2, "t": T0}, {"k": "b", "i": -9, "j": 4, "t": T0},
            {"k": "a", "i": 40, "j": 3, "t": T1}, {"k": "c", "i": 0, "j": -1, "t": T1}]
    df = spark.createDataFrame([tuple(r.values()) for r in rows],
                               "k STRING, i BIGINT, j BIGINT, t TIMESTAMP")
    compiled = spec.compiled(df, "k")
    assert "__mws_python_let" in str(compiled.emit)
    assert sum(len(str(c)) for c in (compiled.update, compiled.emit)) < 400_000
    out = map_with_state(df, key="k", spec=compiled, batch_time="t").collect()
    expected = [row for batch in replay(spec, rows, key="k", batch_time="t")
                for row in batch.emitted]
    assert sorted((r.asDict() for r in out), key=repr) == sorted(expected, key=repr)

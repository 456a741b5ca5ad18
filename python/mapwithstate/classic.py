"""The classic PySpark path: ``map_with_state`` on a classic DataFrame, through the JVM API.

A classic DataFrame lives in this process's JVM (py4j), so there is no Connect relation to
send: the same request is made by calling ``io.mapwithstate.MapWithState`` — the JVM API the
Connect plugin also goes through — with the Java objects behind the DataFrame and Columns. It
needs the plugin jar on the driver (``spark.jars`` / ``--jars``) and
``spark.sql.extensions=io.mapwithstate.MapWithStateExtensions``::

    spark = (SparkSession.builder.master("local[2]")
             .config("spark.jars", mws.jar_path())
             .config("spark.sql.extensions", mws.SQL_EXTENSIONS_CLASS)
             .getOrCreate())
    map_with_state(spark.createDataFrame(...), key="word", spec=spec).show()

``mapwithstate.relation.map_with_state`` dispatches here; this module is not public API.
"""
from typing import TYPE_CHECKING, List, Optional, Sequence, Union

from pyspark.sql import Column
from pyspark.sql.types import StructType

if TYPE_CHECKING:
    from py4j.java_gateway import JavaObject
    from pyspark.sql.classic.dataframe import DataFrame

    from mapwithstate.spec import StateSpec

__all__: List[str] = []

ColumnOrName = Union[str, Column]


def is_classic_dataframe(df: object) -> bool:
    """Whether ``df`` is a classic (py4j) PySpark DataFrame."""
    from pyspark.sql.classic.dataframe import DataFrame

    return isinstance(df, DataFrame)


def is_connect_dataframe(df: object) -> bool:
    """Whether ``df`` is a Spark Connect DataFrame."""
    from pyspark.sql.connect.dataframe import DataFrame

    return isinstance(df, DataFrame)


def map_with_state(
    df: "DataFrame",
    keys: Sequence[ColumnOrName],
    spec: "StateSpec",
    values: Sequence[ColumnOrName],
    batch_time: Optional[ColumnOrName],
    batch_interval: Optional[str],
    order_by: Sequence[ColumnOrName],
    output: str,
) -> "DataFrame":
    """Builds the mapWithState of a classic DataFrame on the JVM; errors in the request are
    raised here (the plan is checked as it is made), as the JVM API raises them."""
    from pyspark.sql.classic.column import _to_seq
    from pyspark.sql.classic.dataframe import DataFrame

    session = df.sparkSession
    sc = session.sparkContext
    jvm = sc._jvm
    api = _api(jvm)

    def seq(columns: Sequence[ColumnOrName], what: str) -> "JavaObject":
        return _to_seq(sc, [_java_column(jvm, c, what) for c in columns])

    jdf = api.mapWithState(
        df._jdf,
        seq(keys, "key"),
        _java_spec(jvm, spec),
        seq(values, "value"),
        _java_column(jvm, batch_time, "batch_time") if batch_time is not None else None,
        batch_interval,
        seq(order_by, "order_by"),
        output,
    )
    return DataFrame(jdf, session)


def map_groups_with_state(
    df: "DataFrame",
    keys: Sequence[ColumnOrName],
    spec: "StateSpec",
    batch_time: Optional[ColumnOrName],
    batch_interval: Optional[str],
    output: str,
) -> "DataFrame":
    """Builds the mapGroupsWithState of a classic DataFrame on the JVM, as
    :func:`map_with_state` does."""
    from pyspark.sql.classic.column import _to_seq
    from pyspark.sql.classic.dataframe import DataFrame

    session = df.sparkSession
    sc = session.sparkContext
    jvm = sc._jvm
    jdf = _api(jvm).mapGroupsWithState(
        df._jdf,
        _to_seq(sc, [_java_column(jvm, c, "key") for c in keys]),
        _java_spec(jvm, spec),
        _java_column(jvm, batch_time, "batch_time") if batch_time is not None else None,
        batch_interval,
        output,
    )
    return DataFrame(jdf, session)


def _api(jvm: "JavaObject") -> "JavaObject":
    """``io.mapwithstate.MapWithState``, or an error saying how to put it on the driver."""
    from py4j.java_gateway import JavaClass

    api = jvm.io.mapwithstate.MapWithState
    if not isinstance(api, JavaClass):
        raise RuntimeError(
            "io.mapwithstate.MapWithState is not on this Spark driver's classpath: start the "
            "session with the plugin jar (spark-submit --jars mapwithstate-assembly.jar, or "
            ".config('spark.jars', mapwithstate.jar_path())) and "
            "spark.sql.extensions=io.mapwithstate.MapWithStateExtensions")
    return api


def _java_column(jvm: "JavaObject", value: ColumnOrName, what: str) -> "JavaObject":
    from pyspark.sql.classic.column import Column as ClassicColumn

    if isinstance(value, str):
        return jvm.org.apache.spark.sql.functions.col(value)
    if isinstance(value, ClassicColumn):
        return value._jc
    if isinstance(value, Column):
        raise TypeError(
            f"{what} is a Spark Connect Column, but the DataFrame is a classic one: build it with "
            "pyspark.sql.functions (not pyspark.sql.connect.functions) while the classic "
            "session is active")
    raise TypeError(f"{what} must be a column name or a Column, got {type(value).__name__}")


def _java_spec(jvm: "JavaObject", spec: "StateSpec") -> "JavaObject":
    """The JVM ``io.mapwithstate.StateSpec`` for ``spec``."""
    from pyspark.sql.classic.dataframe import DataFrame

    columns = [None if c is None else _java_column(jvm, c, f"spec.{name}")
               for name, c in (("update", spec.update), ("remove", spec.remove),
                               ("emit", spec.emit), ("timeout_at", spec.timeout_at))]
    if isinstance(spec.state_schema, StructType):
        schema = jvm.org.apache.spark.sql.types.DataType.fromJson(spec.state_schema.json())
    else:
        schema = spec.state_schema
    java = jvm.io.mapwithstate.StateSpec.function(schema, *columns)
    if spec._initial_state is not None:
        if not isinstance(spec._initial_state, DataFrame):
            raise TypeError(
                "spec.initial_state is a Spark Connect DataFrame, but the DataFrame is a classic "
                "one: both must come from the same session")
        java = java.initialState(spec._initial_state._jdf, spec._initial_state_timeout_at)
    if spec._num_partitions is not None:
        java = java.numPartitions(spec._num_partitions)
    if spec._timeout is not None:
        java = java.timeout(spec._timeout)
    if spec._checkpoint_interval is not None:
        java = java.checkpointInterval(spec._checkpoint_interval)
    if spec._timeout_domain is not None:
        java = java.timeoutDomain(spec._timeout_domain)
    if spec._backend is not None:
        java = java.backend(spec._backend)
    return java

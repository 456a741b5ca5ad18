"""The classic PySpark path: a request on a classic DataFrame, through the JVM API.

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

``mapwithstate._request.run``, ``mapwithstate.state_reader`` and ``mapwithstate.repartition``
dispatch here; this module is
not public API.
"""

from typing import TYPE_CHECKING, Any, List, Optional, Sequence, TypeGuard

from pyspark.sql import Column
from pyspark.sql.types import StructType

from mapwithstate.spec import COLUMNS, SETTINGS, StateSpec

if TYPE_CHECKING:
    from pyspark.sql import Row
    from pyspark.sql.classic.dataframe import DataFrame
    from pyspark.sql.session import SparkSession

    from mapwithstate._request import ColumnOrName, Request, Until
    from mapwithstate.proto.state_repartition_pb2 import RepartitionState as RepartitionMessage
    from mapwithstate.state_reader import ReadMessage

__all__: List[str] = []

#: A py4j proxy of a JVM object or class (py4j ships no type information).
JavaObject = Any


def is_classic_dataframe(df: object) -> TypeGuard["DataFrame"]:
    """Whether ``df`` is a classic (py4j) PySpark DataFrame."""
    from pyspark.sql.classic.dataframe import DataFrame

    return isinstance(df, DataFrame)


def is_classic_session(spark: object) -> TypeGuard["SparkSession"]:
    """Whether ``spark`` is a classic (py4j) SparkSession (Connect's is not a subclass)."""
    from pyspark.sql.session import SparkSession

    return isinstance(spark, SparkSession)


def dataframe(df: "DataFrame", request: "Request") -> "DataFrame":
    """The DataFrame of ``request`` over the classic DataFrame ``df``, made on the JVM; errors
    in the request are raised here (the plan is checked as it is made), as the JVM API raises
    them."""
    from pyspark.sql.classic.column import _to_seq
    from pyspark.sql.classic.dataframe import DataFrame

    session = df.sparkSession
    sc = session.sparkContext
    jvm = sc._jvm
    api = jvm_api(jvm, "MapWithState")

    def seq(columns: Sequence["ColumnOrName"], what: str) -> JavaObject:
        return _to_seq(sc, [java_column(jvm, c, what) for c in columns])

    keys = seq(request.keys, "key")
    spec = _java_spec(jvm, request.spec)
    batch_time = (
        java_column(jvm, request.batch_time, "batch_time")
        if request.batch_time is not None
        else None
    )
    until = _java_timestamp(jvm, request.until) if request.until is not None else None
    if request.groups:
        jdf = api.mapGroupsWithState(
            df._jdf,
            keys,
            spec,
            batch_time,
            request.batch_interval,
            request.output,
            seq(request.order_by, "order_by"),
            until,
            request.include_timer_only_keys,
        )
    else:
        jdf = api.mapWithState(
            df._jdf,
            keys,
            spec,
            seq(request.values, "value"),
            batch_time,
            request.batch_interval,
            seq(request.order_by, "order_by"),
            request.output,
            until,
            request.include_timer_only_keys,
        )
    return DataFrame(jdf, session)


def _java_timestamp(jvm: JavaObject, value: "Until") -> JavaObject:
    """The JVM literal of a timestamp argument (a replay's ``until``, a resumed watermark): a
    string as it is (the server casts it), a datetime as the microseconds PySpark makes of it
    (a naive one in the local time zone)."""
    from pyspark.sql.types import TimestampType

    functions = jvm.org.apache.spark.sql.functions
    if isinstance(value, str):
        return functions.lit(value)
    return functions.timestamp_micros(functions.lit(TimestampType().toInternal(value)))


def read_state(spark: "SparkSession", message: "ReadMessage") -> "DataFrame":
    """The state read of ``message`` (a ``ReadState`` or ``ReadStateChanges``, as the Connect
    door sends it) through the JVM API ``io.mapwithstate.StateReader``, which plans the same
    relation; errors in the request are raised here, as the JVM API raises them."""
    from pyspark.sql.classic.dataframe import DataFrame

    jvm = spark.sparkContext._jvm
    assert jvm is not None, "a classic session has a JVM"
    api = jvm_api(jvm, "StateReader")

    def optional(field: str) -> Optional[int]:
        """A field the message may leave unset, as the API's nullable ``java.lang.Long``."""
        return getattr(message, field) if message.HasField(field) else None

    operator_id = optional("operator_id")
    if message.DESCRIPTOR.name == "ReadState":
        jdf = api.readState(
            spark._jsparkSession,
            message.checkpoint,
            optional("batch_id"),
            operator_id,
            message.in_current_schema,
            message.include_timer_only_keys,
        )
    else:
        jdf = api.readStateChanges(
            spark._jsparkSession,
            message.checkpoint,
            message.start_batch,
            optional("end_batch"),
            operator_id,
            message.in_current_schema,
        )
    return DataFrame(jdf, spark)


def repartition_state(spark: "SparkSession", message: "RepartitionMessage") -> "Row":
    """The repartition of ``message`` (as the Connect door sends it) through the JVM API
    ``io.mapwithstate.StateRepartitioner``, which runs the same rewrite; its summary row."""
    from pyspark.sql.classic.dataframe import DataFrame

    jvm = spark.sparkContext._jvm
    assert jvm is not None, "a classic session has a JVM"
    api = jvm_api(jvm, "StateRepartitioner")
    jdf = api.repartition(spark._jsparkSession, message.checkpoint, message.num_partitions)
    (summary,) = DataFrame(jdf, spark).collect()
    return summary


def jvm_api(jvm: JavaObject, name: str) -> JavaObject:
    """The JVM API object ``io.mapwithstate.<name>``, or an error saying how to put the plugin
    on the driver."""
    from py4j.java_gateway import JavaClass

    api = getattr(jvm.io.mapwithstate, name)
    if not isinstance(api, JavaClass):
        raise RuntimeError(
            f"io.mapwithstate.{name} is not on this Spark driver's classpath: start the "
            "session with the plugin jar (spark-submit --jars mapwithstate-assembly.jar, or "
            ".config('spark.jars', mapwithstate.jar_path())) and "
            "spark.sql.extensions=io.mapwithstate.MapWithStateExtensions"
        )
    return api


def java_column(jvm: JavaObject, value: "ColumnOrName", what: str) -> JavaObject:
    """The JVM Column of ``value``, or a ``TypeError`` naming ``what`` when it is a Spark
    Connect Column."""
    from pyspark.sql.classic.column import Column as ClassicColumn

    if isinstance(value, str):
        return jvm.org.apache.spark.sql.functions.col(value)
    if isinstance(value, ClassicColumn):
        return value._jc
    if isinstance(value, Column):
        raise TypeError(
            f"{what} is a Spark Connect Column, but the DataFrame is a classic one: build it with "
            "pyspark.sql.functions (not pyspark.sql.connect.functions) while the classic "
            "session is active"
        )
    raise TypeError(f"{what} must be a column name or a Column, got {type(value).__name__}")


def _java_spec(jvm: JavaObject, spec: StateSpec) -> JavaObject:
    """The JVM ``io.mapwithstate.StateSpec`` of ``spec``: its schema, its Columns, its initial
    state and every setting of the settings table, each through its JVM builder method."""
    columns = [
        None
        if getattr(spec, name) is None
        else java_column(jvm, getattr(spec, name), f"spec.{name}")
        for name in COLUMNS
    ]
    if isinstance(spec.state_schema, StructType):
        schema = jvm.org.apache.spark.sql.types.DataType.fromJson(spec.state_schema.json())
    else:
        schema = spec.state_schema
    java = jvm.io.mapwithstate.StateSpec.function(schema, *columns)
    if spec.migration is not None:
        java = java.migrate(java_column(jvm, spec.migration, "spec.migrate"))
    if spec.initial is not None:
        if not is_classic_dataframe(spec.initial.df):
            raise TypeError(
                "spec.initial_state is a Spark Connect DataFrame, but the DataFrame is a classic "
                "one: both must come from the same session"
            )
        if spec.initial.last_updated is not None:
            watermark = spec.initial.watermark
            java = java.initialState(
                spec.initial.df._jdf,
                spec.initial.timeout_at,
                spec.initial.last_updated,
                spec.initial.has_state,
                _java_timestamp(jvm, watermark) if watermark is not None else None,
            )
        else:
            java = java.initialState(spec.initial.df._jdf, spec.initial.timeout_at)
    for setting in SETTINGS.values():
        if setting.name in spec.settings:
            java = getattr(java, setting.jvm_method)(spec.settings[setting.name])
    return java

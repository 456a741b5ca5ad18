"""mapwithstate: Spark's ``mapWithState`` for Python Spark Connect clients.

Per-key state, emitted records, state snapshots, initial state and idle timeouts, executed
natively on the JVM executors by a Spark Connect plugin::

    from pyspark.sql import functions as F
    import mapwithstate as mws
    from mapwithstate import StateSpec, map_with_state, functions as S

    spark = mws.local_session()
    df = spark.createDataFrame([("a",), ("b",), ("a",)], "word STRING")
    spec = StateSpec.function("n BIGINT",
        update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + 1).alias("n")),
        emit=F.struct(F.col("word"), S.new_state("n").alias("n")))
    map_with_state(df, key="word", spec=spec).show()
"""

from mapwithstate import functions
from mapwithstate.groups import map_groups_with_state
from mapwithstate.pyfunc import CompileError, state_function
from mapwithstate.relation import map_with_state
from mapwithstate.repartition import repartition_state
from mapwithstate.server import (
    RELATION_PLUGIN_CLASS,
    SQL_EXTENSIONS_CLASS,
    LocalConnectServer,
    jar_path,
    local_session,
    package_jars,
    server_conf,
)
from mapwithstate.spec import StateSpec
from mapwithstate.state_reader import read_state, read_state_changes

__version__ = "0.1.0"

__all__ = [
    "StateSpec",
    "state_function",
    "CompileError",
    "map_with_state",
    "map_groups_with_state",
    "read_state",
    "read_state_changes",
    "repartition_state",
    "functions",
    "local_session",
    "LocalConnectServer",
    "jar_path",
    "package_jars",
    "server_conf",
    "RELATION_PLUGIN_CLASS",
    "SQL_EXTENSIONS_CLASS",
]

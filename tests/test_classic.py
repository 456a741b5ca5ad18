"""What is particular to a classic session: the Column kind, mixing kinds, eager errors."""
import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

from mapwithstate import StateSpec, map_with_state
from mapwithstate import functions as S

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

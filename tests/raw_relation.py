"""Sending a MapWithState message as raw bytes, as any Connect client could: for the tests of
what the plugin does with input it did not expect."""
from pyspark.sql.connect.dataframe import DataFrame
from pyspark.sql.connect.plan import LogicalPlan

from mapwithstate.proto import relations_pb2

TYPE_URL = "type.googleapis.com/mapwithstate.MapWithState"


class RawRelation(LogicalPlan):
    """A plan node whose relation is `payload` in `Relation.extension`, as the plugin's type."""

    def __init__(self, payload: bytes) -> None:
        super().__init__(None)
        self._payload = payload

    def plan(self, session):
        relation = self._create_proto_relation()
        relation.extension.type_url = TYPE_URL
        relation.extension.value = self._payload
        return relation


def message_of(df: DataFrame) -> relations_pb2.MapWithState:
    """The MapWithState message a map_with_state DataFrame sends."""
    relation = df._plan.plan(df.sparkSession.client)
    message = relations_pb2.MapWithState()
    assert relation.extension.Unpack(message)
    return message


def dataframe(spark, payload: bytes) -> DataFrame:
    """The DataFrame whose plan is the MapWithState in `payload`."""
    return DataFrame(RawRelation(payload), spark)


def varint(n: int) -> bytes:
    """`n` as a protobuf varint, for messages serialized by hand."""
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)

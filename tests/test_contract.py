"""The client and the plugin agree on the contract's names: the reserved state-function
columns that mapwithstate.functions builds are exactly those state_spec.proto documents (the
JVM side checks its own against the same file in MapWithStatePlannerSuite)."""
import os
import re

from mapwithstate import functions as S

PROTO = os.path.join(os.path.dirname(__file__), os.pardir, "proto", "mapwithstate", "state_spec.proto")


def test_reserved_names_are_the_documented_ones():
    with open(PROTO) as f:
        documented = set(re.findall(r"__mws_[a-z_]+", f.read()))
    assert set(S.RESERVED_COLUMNS.values()) == documented


def test_each_function_refers_to_its_reserved_column():
    built = {
        "state": S.state(), "state_exists": S.state_exists(), "is_timing_out": S.is_timing_out(),
        "batch_time": S.batch_time(), "new_state": S.new_state(),
        "timeout_at": S.timeout_at(), "watermark": S.watermark(),
    }
    for name, column in built.items():
        assert S.RESERVED_COLUMNS[name] in str(column), (name, str(column))


def test_the_settings_table_covers_the_spec_message():
    """Every field of the StateSpec message is the schema, a Column, the initial state, the
    migration or a row of the settings table both serializers iterate, so none can be
    forgotten by one."""
    from mapwithstate.proto import state_spec_pb2
    from mapwithstate.spec import COLUMNS, SETTINGS

    fields = {f.name for f in state_spec_pb2.StateSpec.DESCRIPTOR.fields}
    special = {"state_schema_ddl", "state_schema_type", "initial_state", "initial_state_timeout_at",
               "initial_state_last_updated", "initial_state_has_state", "initial_state_watermark",
               "migrate"}
    assert fields == special | set(COLUMNS) | set(SETTINGS)

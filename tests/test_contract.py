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

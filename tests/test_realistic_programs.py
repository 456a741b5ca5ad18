"""Realistic state functions (``tests/pyfuncs/programs.py``) run both ways: seeded random cases
through ``mapwithstate.testing`` and through the real server (compiled by
``mws.state_function``) give the same emitted rows and the same state after every batch; where
Python raises, the server's query fails naming the exception.
"""
import dataclasses
import os

import pytest
from hypothesis import strategies as st

import mapwithstate as mws
from differential import (
    Function,
    draw_cases,
    python_outcome,
    run_replay_in_python,
    server_outcome,
    server_replay,
    split_raising,
)
from pyfuncs import inputs
from pyfuncs.programs import PROGRAMS, Program
from test_pyfunc_differential import check_raising, check_same

CASES = int(os.environ.get("MWS_PROGRAM_CASES", "15"))
SEED = 4141



def as_function(entry: Program):
    def spec(spark, initial):
        built = mws.state_function(entry.state_schema)(entry.function)
        for method, argument in entry.settings.items():
            built = getattr(built, method)(argument)
        return built

    columns = {name: sql for name, (sql, _) in entry.columns.items()}
    record = st.fixed_dictionaries(
        {entry.key: inputs.FEW_KEYS, **{n: s for n, (_, s) in entry.columns.items()}})
    function = Function(entry.name, entry.function, spec, entry.key, columns,
                        entry.state_schema, dict(entry.settings), entry.event_time,
                        entry.delay)
    return function, inputs.batches(record, max_batches=4, max_records=6)


@pytest.mark.parametrize("name", [p.name for p in PROGRAMS])
def test_program(spark, name):
    (entry,) = [p for p in PROGRAMS if p.name == name]
    function, strategy = as_function(entry)
    cases = draw_cases(strategy, CASES, SEED)
    # The replay of every case gives the output columns; where every case runs through, it is
    # the query run too (the server analyses one plan, not two).
    everything = server_replay(spark, function, cases)
    function = dataclasses.replace(function, output_schema=everything.schema)
    passing, raising = split_raising(function, cases)
    assert passing, f"{name}: Python raises on every case: {raising[0][1]!r}"
    ours = python_outcome(run_replay_in_python(function, passing))
    emitted = everything if len(passing) == len(cases) else server_replay(spark, function, passing)
    theirs = server_outcome(emitted, server_replay(spark, function, passing, "snapshots"))
    check_same(name, ours, theirs, f"replay of {len(passing)} cases")
    check_raising(spark, function, raising,
                  lambda case: server_replay(spark, function, [case]).collect())


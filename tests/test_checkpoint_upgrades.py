"""Checkpoints written by earlier releases restart with the current code and continue exactly.

Each fixture under ``tests/fixtures/checkpoints/<release>/`` (made by
``dev/gen-checkpoint-fixture`` with that release's jar: both backends, event-time timers, an
idle timeout, map_groups_with_state, two operators in one query) is copied to a temp dir and
continued over the release's part 2 input on the current jar; every run's output rows and the
final ``read_state`` must equal what the release itself produced. A change to the state files'
format, the state's layout or the operators' numbering that the current code cannot read the
old way fails here.
"""
import json
import os
import shutil

import pytest

import mapwithstate as mws
from mapwithstate import map_with_state
from checkpoint_fixtures import (FIXTURES, continue_query, load_queries, operator_metadata,
                                 releases)
from specs import running_count
from streams import Stream

CASES = [(release, name) for release in releases()
         for name in sorted(load_queries(release).QUERIES)]


def test_every_release_has_a_fixture_of_each_kind():
    assert CASES, f"no checkpoint fixture under {FIXTURES}"
    for release in releases():
        for name in load_queries(release).QUERIES:
            root = os.path.join(FIXTURES, release, name)
            assert os.path.isdir(os.path.join(root, "checkpoint", "state")), root
            assert os.path.isfile(os.path.join(root, "expected.json")), root


@pytest.mark.parametrize("release,name", CASES, ids=[f"{r}-{n}" for r, n in CASES])
def test_a_release_checkpoint_continues_exactly(spark, tmp_path, release, name):
    checkpoint = str(tmp_path / "checkpoint")
    shutil.copytree(os.path.join(FIXTURES, release, name, "checkpoint"), checkpoint)
    with open(os.path.join(FIXTURES, release, name, "expected.json")) as f:
        expected = json.load(f)
    actual = continue_query(spark, release, name, checkpoint, str(tmp_path / "out"))
    assert len(actual["outputs"]) == len(expected["outputs"])
    for run, (got, want) in enumerate(zip(actual["outputs"], expected["outputs"], strict=True)):
        assert got == want, f"run {run} of part 2 after {release}'s checkpoint"
    assert actual["state"] == expected["state"]


def test_a_checkpoint_records_the_plugin_and_format_versions_it_was_written_with(spark, tmp_path):
    stream = Stream(str(tmp_path))
    stream.add("a", "b")
    stream.run_available_now(map_with_state(stream.read(spark), "word", running_count()))
    _, recorded = operator_metadata(stream.checkpoint)
    assert recorded["pluginVersion"] == mws.__version__
    assert recorded["formatVersion"] == "1"
    assert recorded["stateFileVersion"] == "2"


@pytest.mark.parametrize("key", ["formatVersion", "stateFileVersion"])
def test_a_checkpoint_of_a_newer_format_is_refused_naming_both_versions(spark, tmp_path, key):
    stream = Stream(str(tmp_path))
    stream.add("a")
    stream.run_available_now(map_with_state(stream.read(spark), "word", running_count()))
    path, recorded = operator_metadata(stream.checkpoint)
    recorded.update({"pluginVersion": "9.9.9", key: "99"})
    with open(path, "w") as f:
        f.write("".join(f"{k}={v}\n" for k, v in recorded.items()))
    stream.add("b")
    with pytest.raises(Exception) as restart:
        stream.run_available_now(map_with_state(stream.read(spark), "word", running_count()))
    with pytest.raises(Exception) as read:
        mws.read_state(spark, stream.checkpoint).collect()
    for failure in (restart, read):
        message = str(failure.value)
        assert "MAPWITHSTATE_CHECKPOINT_TOO_NEW" in message, message
        assert "mapwithstate 9.9.9" in message and f"{key} 99" in message, message
        assert f"this is mapwithstate {mws.__version__}" in message, message

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

from checkpoint_fixtures import FIXTURES, continue_query, load_queries, releases

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

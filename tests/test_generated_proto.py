"""The checked-in Python protobuf code is what dev/gen-proto makes from proto/ today."""
import filecmp
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECKED_IN = os.path.join(ROOT, "python", "mapwithstate", "proto")


def test_generated_python_is_up_to_date(tmp_path):
    subprocess.run([os.path.join(ROOT, "dev", "gen-proto"), "python", str(tmp_path)], check=True,
                   stdout=subprocess.DEVNULL)
    generated = sorted(f for f in os.listdir(tmp_path) if f.endswith((".py", ".pyi")))
    checked_in = sorted(f for f in os.listdir(CHECKED_IN) if f.endswith((".py", ".pyi"))
                        and f != "__init__.py")
    assert generated == checked_in, "proto modules differ: run dev/gen-proto python"
    stale = [f for f in generated
             if not filecmp.cmp(tmp_path / f, os.path.join(CHECKED_IN, f), shallow=False)]
    assert not stale, f"stale generated code {stale}: run dev/gen-proto python and commit"

"""The checked-in Python Unicode tables (``python-unicode.txt``, which the plugin's
``PythonUnicode`` reads for the str predicates and case methods) are what
dev/gen_python_unicode.py makes from this Python's str methods today."""
import os
import subprocess
import sys
import unicodedata

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLES = os.path.join(ROOT, "jvm", "src", "main", "resources", "io", "mapwithstate", "pyfunc",
                      "python-unicode.txt")


def test_the_python_unicode_tables_are_up_to_date(tmp_path):
    with open(TABLES, encoding="ascii") as f:
        checked_in = f.read()
    version = next(line.split()[1] for line in checked_in.splitlines()
                   if line.startswith("unicode "))
    if version != unicodedata.unidata_version:
        pytest.skip(f"the tables are Unicode {version}'s, this Python has "
                    f"{unicodedata.unidata_version}")
    out = tmp_path / "python-unicode.txt"
    subprocess.run([sys.executable, os.path.join(ROOT, "dev", "gen_python_unicode.py"), str(out)],
                   check=True)
    assert out.read_text(encoding="ascii") == checked_in, \
        "stale python-unicode.txt: run dev/gen_python_unicode.py and commit"

"""The spark-submit recipe of docs/classic.md, run for real on the example application.

``spark-submit`` from the installed pyspark (its package directory is a SPARK_HOME) runs
``examples/submit_app.py`` with the plugin jar and the package shipped as ``--py-files``,
and the test checks what the application printed.
"""
import os
import subprocess
import sys
import zipfile

import pyspark
import pytest

import mapwithstate as mws

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
APP = os.path.join(ROOT, "examples", "submit_app.py")
PACKAGE = os.path.join(ROOT, "python", "mapwithstate")

EXPECTED = """\
emitted a 1
emitted a 2
emitted a 3
emitted b 1
emitted c 1
state a 3
state b 1
state c 1
"""


def package_zip(tmp_path) -> str:
    """The ``mapwithstate`` package as a zip for ``--py-files``, as a cluster would get it."""
    path = str(tmp_path / "mapwithstate.zip")
    with zipfile.ZipFile(path, "w") as z:
        for directory, _, files in os.walk(PACKAGE):
            for name in files:
                if not name.endswith(".pyc"):
                    full = os.path.join(directory, name)
                    z.write(full, os.path.relpath(full, os.path.dirname(PACKAGE)))
    return path


def spark_submit(tmp_path, *target: str) -> str:
    home = os.path.dirname(os.path.abspath(pyspark.__file__))
    env = dict(os.environ, SPARK_HOME=home, PYSPARK_PYTHON=sys.executable)
    for name in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "PYTHONPATH"):
        env.pop(name, None)  # the application must not inherit this test process's session
    command = [os.path.join(home, "bin", "spark-submit"), *target,
               "--py-files", package_zip(tmp_path), APP]
    result = subprocess.run(command, env=env, cwd=str(tmp_path), capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


@pytest.mark.slow
def test_classic_application(tmp_path):
    output = spark_submit(
        tmp_path, "--master", "local[2]", "--jars", mws.jar_path(),
        "--conf", f"spark.sql.extensions={mws.SQL_EXTENSIONS_CLASS}",
        "--conf", "spark.ui.enabled=false")
    assert output == EXPECTED + "session classic\n"


@pytest.mark.slow
def test_connect_application_on_a_running_server(server, tmp_path):
    """Connect mode: the application is a client of a Connect server that has the plugin (and
    the jar and extensions: the application passes neither)."""
    output = spark_submit(tmp_path, "--remote", server.url, "--conf", "spark.api.mode=connect")
    assert output == EXPECTED + "session connect\n"

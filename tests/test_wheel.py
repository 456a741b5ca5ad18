"""The installable artifact: ``dev/build-wheel`` makes a wheel that carries the plugin jar, and a
fresh virtual environment outside the repository runs the README's example from it alone."""
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib

import mapwithstate as mws

ROOT = Path(__file__).resolve().parent.parent


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_versions_agree():
    """pyproject.toml, build.sbt (the jar's name) and ``mapwithstate.__version__`` are one."""
    sbt = re.search(r'ThisBuild / version := "([^"]+)"', (ROOT / "build.sbt").read_text())
    assert sbt, "build.sbt sets no ThisBuild / version"
    assert project()["version"] == sbt.group(1) == mws.__version__


def test_packaged_jar_comes_before_a_newer_repository_jar(tmp_path):
    """jar_path(): the jar inside the installed package wins over one built in a repository,
    even a newer one; MAPWITHSTATE_JAR wins over both."""
    import shutil

    package = tmp_path / "python" / "mapwithstate"
    shutil.copytree(ROOT / "python" / "mapwithstate", package,
                    ignore=shutil.ignore_patterns("__pycache__"))
    packaged = package / "jars" / "mapwithstate-assembly-0.1.0.jar"
    built = tmp_path / "jvm" / "target" / "scala-2.13" / "mapwithstate-assembly-0.2.0.jar"
    explicit = tmp_path / "explicit.jar"
    for jar in (packaged, built, explicit):
        jar.parent.mkdir(parents=True, exist_ok=True)
        jar.write_bytes(b"")
    os.utime(packaged, (1_000_000, 1_000_000))  # older than the repository's
    code = "import mapwithstate; print(mapwithstate.jar_path())"

    def run(**env):
        base = {k: v for k, v in os.environ.items() if k != "MAPWITHSTATE_JAR"}
        return subprocess.run([sys.executable, "-c", code], env={**base, **env}, cwd=tmp_path,
                              capture_output=True, text=True, check=True).stdout.strip()

    path = str(tmp_path / "python")
    assert run(PYTHONPATH=path) == str(packaged)
    assert run(PYTHONPATH=path, MAPWITHSTATE_JAR=str(explicit)) == str(explicit)
    packaged.unlink()
    assert os.path.realpath(run(PYTHONPATH=path)) == str(built)


def readme_example() -> str:
    """The first two ``python`` blocks of README.md, the examples a user copies: a state
    function in Python, then the same as Column algebra."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert len(blocks) >= 2, "README.md lacks its two python examples"
    return blocks[0] + "\n" + blocks[1]


def show_tables(output: str) -> list:
    """Every ``DataFrame.show()`` table in ``output``: a list of ``{column: value}`` rows each."""
    tables, block = [], []
    for line in output.splitlines() + [""]:
        if line.startswith(("+-", "|")):
            block.append(line)
            continue
        rows = [tuple(c.strip() for c in row.strip("|").split("|"))
                for row in block if row[0] == "|"]
        if rows:
            tables.append([dict(zip(rows[0], r, strict=True)) for r in rows[1:]])
        block = []
    return tables


@pytest.mark.slow
def test_wheel_installs_and_runs_the_readme_example_outside_the_repository(tmp_path):
    wheel = subprocess.run([str(ROOT / "dev" / "build-wheel")], capture_output=True, text=True,
                           check=True).stdout.strip().splitlines()[-1]
    name, version = project()["name"], project()["version"]
    assert Path(wheel).name == f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    jar = f"mapwithstate/jars/mapwithstate-assembly-{version}.jar"
    assert jar in zipfile.ZipFile(wheel).namelist()

    venv = tmp_path / "venv"
    # The environment gets no pip of its own: this process's pip installs into it
    # (``--python``), as the environment's own would. Nothing is compiled to bytecode ahead
    # (Python compiles what the example imports): pyspark alone is thousands of modules.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAPWITHSTATE_JAR", "PYTHONPATH", "VIRTUAL_ENV", "SPARK_HOME",
                        "PYTHONHOME")}
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "-q",
                    "--no-compile", wheel], check=True, env=env, cwd=tmp_path)

    work = tmp_path / "work"
    work.mkdir()
    script = work / "example.py"
    script.write_text(readme_example() + "\nprint('JAR', mws.jar_path())\n")
    done = subprocess.run([python, str(script)], cwd=work, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    sessions, *counts = show_tables(done.stdout)
    # The Python function's snapshot: u1's two clicks, converted at the checkout.
    assert [(r["user"], r["clicks"], r["converted"]) for r in sessions] == [
        ("u1", "2", "true")], done.stdout
    tables = [sorted((r["word"], r["n"]) for r in t) for t in counts]
    assert tables == [
        [("a", "1"), ("a", "2"), ("b", "1")],   # emitted
        [("a", "2"), ("b", "1")],               # snapshots: the state after the one batch
    ], done.stdout
    used = Path(done.stdout.split("JAR ", 1)[1].split()[0])
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    assert used == site / jar, f"{used} is not the packaged jar"
    assert ROOT not in used.parents

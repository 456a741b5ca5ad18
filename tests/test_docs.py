"""The documentation (docs/, issue #44): it builds with Sphinx without a warning, its API
reference covers the public API, and every recipe runs on the real server and gets the results
its own assertions state."""
import importlib.util
import re
import runpy
import subprocess
from pathlib import Path

import pytest

import mapwithstate as mws

ROOT = Path(__file__).resolve().parent.parent
RECIPES = sorted((ROOT / "docs" / "recipes").glob("*.py"))


def test_the_docs_build_without_warnings_and_document_the_public_api(tmp_path):
    out = tmp_path / "html"
    built = subprocess.run([str(ROOT / "dev" / "build-docs"), str(out)], capture_output=True,
                           text=True)
    assert built.returncode == 0, built.stdout + built.stderr
    api = (out / "api.html").read_text()
    documented = set(re.findall(r'id="mapwithstate\.([A-Za-z_]+)"', api))
    assert set(mws.__all__) - {"functions"} <= documented, \
        f"not in the API reference: {set(mws.__all__) - {'functions'} - documented}"
    for page in ("getting-started", "recipes", "nulls", "processing-time", "errors"):
        assert (out / f"{page}.html").is_file(), page


def test_every_recipe_is_on_the_recipes_page():
    page = (ROOT / "docs" / "recipes.md").read_text()
    included = set(re.findall(r"literalinclude\}\s+recipes/(\S+\.py)", page))
    assert included == {r.name for r in RECIPES}


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"recipe_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("recipe", RECIPES, ids=[r.stem for r in RECIPES])
def test_the_recipe_runs_and_gets_what_it_states(spark, tmp_path, recipe):
    module = load(recipe)
    if "work" in module.run.__code__.co_varnames:
        module.run(spark, work=str(tmp_path))
    else:
        module.run(spark)


def test_the_getting_started_page_runs_as_written(spark, tmp_path, monkeypatch):
    # Its python blocks, in order, in one namespace; local_session() is the tests' server, and
    # the paths the page writes go to a temp dir (they are the server's paths).
    page = (ROOT / "docs" / "getting-started.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert len(blocks) >= 4
    monkeypatch.setattr(mws, "local_session", lambda **_: spark)
    code = "\n".join(blocks)
    for path in ("words/", "ck/"):
        code = code.replace(f'"{path}"', repr(str(tmp_path / path)))
    script = tmp_path / "getting_started.py"  # a file: the compiler reads the function's source
    script.write_text(code)
    runpy.run_path(str(script))
    counted = sorted(tuple(r) for r in mws.read_state(spark, str(tmp_path / "ck/"))
                     .select("word", "n").collect())
    assert counted == [("a", 1), ("c", 1)]

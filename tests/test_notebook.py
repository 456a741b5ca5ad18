"""The shipped notebook, executed top to bottom as a user would: against a remote Spark Connect
server started by Spark's ``sbin/start-connect-server.sh`` with the jar, its URL given in
``MAPWITHSTATE_REMOTE``. Any failing cell fails the test (the notebook checks its own results)."""
import re
import urllib.request
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from clusters import ConnectDaemon

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.ipynb"))


def test_a_notebook_is_shipped():
    assert NOTEBOOKS, "examples/ has no notebook"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stored_without_outputs(path):
    """Outputs belong to a run, not to git: every code cell is stored unexecuted."""
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    dirty = [i for i, c in enumerate(nb.cells)
             if c.cell_type == "code" and (c.outputs or c.execution_count is not None)]
    assert dirty == [], f"{path.name}: cells {dirty} hold outputs; clear them before committing"


def outputs(nb, mime: str) -> list:
    """Every output of the executed notebook ``nb`` that carries ``mime``."""
    found = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if mime == "stream" and out.output_type == "stream":
                found.append(out.text)
            elif mime in out.get("data", {}):
                found.append(out.data[mime])
    return found


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_against_a_remote_connect_server(path, tmp_path, monkeypatch):
    server = ConnectDaemon(tmp_path / "server", ui=True,
                           conf={"spark.sql.shuffle.partitions": "4"})
    try:
        monkeypatch.setenv("MAPWITHSTATE_REMOTE", server.url)
        monkeypatch.setenv("MAPWITHSTATE_DATA", str(tmp_path))
        monkeypatch.delenv("MAPWITHSTATE_JAR", raising=False)
        nb = nbformat.read(path, as_version=4)
        NotebookClient(nb, timeout=600, kernel_name="python3",
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
        links = re.findall(r"\[(http://[^\]]+)\]", "".join(outputs(nb, "text/markdown")))
        assert links == [f"http://127.0.0.1:{server.ui_port}"], outputs(nb, "text/markdown")
        with urllib.request.urlopen(links[0], timeout=30) as ui:  # the link leads to the UI
            assert ui.status == 200 and b"Spark" in ui.read()
    finally:
        server.stop()
    assert outputs(nb, "image/png"), "no plot was drawn"
    assert len(outputs(nb, "text/html")) >= 3, "results are not shown as tables"
    assert any(f"via {server.url}" in text for text in outputs(nb, "stream"))

"""Running the plugin: where its jar is, the configuration a Connect server needs, and a local
Spark Connect server for notebooks, demos and tests."""
import atexit
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Dict, List, Optional

from pyspark.sql import SparkSession

__all__ = ["jar_path", "server_conf", "local_session", "LocalConnectServer",
           "RELATION_PLUGIN_CLASS", "SQL_EXTENSIONS_CLASS"]

#: The Connect relation plugins (map_with_state, and the state reader), comma-separated as
#: ``spark.connect.extensions.relation.classes`` takes them.
RELATION_PLUGIN_CLASS = ("io.mapwithstate.connect.MapWithStateRelationPlugin,"
                         "io.mapwithstate.connect.StateReaderRelationPlugin")
#: The planner extension: ``spark.sql.extensions``.
SQL_EXTENSIONS_CLASS = "io.mapwithstate.MapWithStateExtensions"

_JAR_PATTERN = "mapwithstate-assembly-*.jar"
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_REPO_JAR_DIR = os.path.join(_PACKAGE_DIR, os.pardir, os.pardir, "jvm", "target", "scala-2.13")


def jar_path() -> str:
    """The plugin's assembly jar: ``$MAPWITHSTATE_JAR``, a jar shipped in this package, or the
    one built in this repository (``dev/sbt plugin/assembly``), newest first.

    :raises FileNotFoundError: naming the places looked in, when there is none.
    """
    explicit = os.environ.get("MAPWITHSTATE_JAR")
    if explicit:
        if not os.path.isfile(explicit):
            raise FileNotFoundError(f"MAPWITHSTATE_JAR is {explicit}, which is not a file")
        return explicit
    places = [os.path.join(_PACKAGE_DIR, "jars"), os.path.normpath(_REPO_JAR_DIR)]
    for place in places:
        jars = sorted(glob.glob(os.path.join(place, _JAR_PATTERN)), key=os.path.getmtime)
        if jars:
            return jars[-1]
    raise FileNotFoundError(
        f"the mapwithstate plugin jar ({_JAR_PATTERN}) is not built: looked in "
        + " and ".join(places)
        + "; build it with `dev/sbt plugin/assembly` or set MAPWITHSTATE_JAR")


def server_conf(jar: Optional[str] = None) -> Dict[str, str]:
    """The configuration a Spark Connect server needs to serve mapwithstate.

    For a cluster, pass the jar with ``--jars`` and these with ``--conf``::

        sbin/start-connect-server.sh --jars mapwithstate-assembly-0.1.0.jar \\
            --conf spark.connect.extensions.relation.classes=io.mapwithstate.connect.MapWithStateRelationPlugin,io.mapwithstate.connect.StateReaderRelationPlugin \\
            --conf spark.sql.extensions=io.mapwithstate.MapWithStateExtensions

    >>> sorted(server_conf("/tmp/x.jar"))
    ['spark.connect.extensions.relation.classes', 'spark.jars', 'spark.sql.extensions']
    """
    return {
        "spark.jars": jar or jar_path(),
        "spark.connect.extensions.relation.classes": RELATION_PLUGIN_CLASS,
        "spark.sql.extensions": SQL_EXTENSIONS_CLASS,
    }


def _spark_home() -> str:
    import pyspark

    return os.path.dirname(os.path.abspath(pyspark.__file__))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalConnectServer:
    """A Spark Connect server in its own JVM on this machine, with the plugin loaded.

    It runs Spark's ``SparkConnectServer`` through ``spark-submit`` from the installed pyspark,
    as ``sbin/start-connect-server.sh`` does, on a free local port; :meth:`stop` (also run at
    interpreter exit) ends it.
    """

    def __init__(self, master: str = "local[2]", conf: Optional[Dict[str, str]] = None,
                 port: Optional[int] = None, startup_timeout: float = 180.0) -> None:
        self.master = master
        self.port = port or _free_port()
        self.conf = {**server_conf(), **(conf or {})}
        self.conf["spark.connect.grpc.binding.port"] = str(self.port)
        self.conf.setdefault("spark.ui.enabled", "false")
        self._log_dir = tempfile.mkdtemp(prefix="mapwithstate-server-")
        self.log_path = os.path.join(self._log_dir, "server.log")
        self._process: Optional[subprocess.Popen] = None
        self._start(startup_timeout)

    @property
    def url(self) -> str:
        """The ``sc://`` address clients connect to."""
        return f"sc://localhost:{self.port}"

    def _command(self) -> List[str]:
        home = _spark_home()
        command = [os.path.join(home, "bin", "spark-submit"), "--master", self.master,
                   "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
                   "--name", "mapwithstate-local-connect-server"]
        for key, value in self.conf.items():
            if key == "spark.jars":
                command += ["--jars", value]
            else:
                command += ["--conf", f"{key}={value}"]
        command.append("spark-internal")
        return command

    def _start(self, timeout: float) -> None:
        env = dict(os.environ)
        env["SPARK_HOME"] = _spark_home()
        env.pop("SPARK_CONNECT_MODE_ENABLED", None)
        with open(self.log_path, "wb") as log:
            self._process = subprocess.Popen(
                self._command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=env, start_new_session=True)
        atexit.register(self.stop)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"the Spark Connect server exited with code {self._process.returncode} while "
                    f"starting; its log ({self.log_path}) ends with:\n{self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise TimeoutError(
            f"the Spark Connect server did not listen on port {self.port} within {timeout:.0f}s; "
            f"its log ends with:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        """The end of the server's log."""
        try:
            with open(self.log_path, "r", errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def session(self) -> SparkSession:
        """A new Spark Connect session on this server."""
        return SparkSession.builder.remote(self.url).create()

    def stop(self) -> None:
        """Stops the server (and its Spark) and waits for it to exit."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> "LocalConnectServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


_servers: List[LocalConnectServer] = []


def local_session(master: str = "local[2]", **conf: str) -> SparkSession:
    """A Spark Connect session served by a local Connect server with the plugin.

    The server is a separate JVM (see :class:`LocalConnectServer`) started on first use with
    ``master`` and ``conf`` (Spark settings, e.g. ``**{"spark.sql.shuffle.partitions": "4"}``);
    it stops when the Python process exits.

    :raises FileNotFoundError: when the plugin jar is not built (see :func:`jar_path`).

    >>> import mapwithstate as mws
    >>> spark = mws.local_session(**{"spark.sql.shuffle.partitions": "4"})  # doctest: +SKIP
    """
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise RuntimeError("the local Spark Connect server needs Java 17: neither JAVA_HOME nor "
                           "java on PATH")
    server = LocalConnectServer(master=master, conf={k: str(v) for k, v in conf.items()})
    _servers.append(server)
    return server.session()

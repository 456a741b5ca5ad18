"""Running the plugin: where its jar is, the configuration a Connect server needs, and a local
Spark Connect server for notebooks, demos and tests."""

import atexit
import errno
import glob
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

from pyspark.sql import SparkSession

__all__ = [
    "jar_path",
    "package_jars",
    "server_conf",
    "local_session",
    "LocalConnectServer",
    "RELATION_PLUGIN_CLASS",
    "SQL_EXTENSIONS_CLASS",
]

#: The Connect relation plugins (map_with_state, the state reader and repartition_state),
#: comma-separated as ``spark.connect.extensions.relation.classes`` takes them.
RELATION_PLUGIN_CLASS = (
    "io.mapwithstate.connect.MapWithStateRelationPlugin,"
    "io.mapwithstate.connect.StateReaderRelationPlugin,"
    "io.mapwithstate.connect.StateRepartitionRelationPlugin"
)
#: The gRPC interceptor that keeps error trailers readable by a default client:
#: ``spark.connect.grpc.interceptor.classes``.
_ERROR_TRAILERS_INTERCEPTOR = "io.mapwithstate.connect.BoundedErrorTrailers"
_CHECKPOINT_FILE_MANAGER = "io.mapwithstate.state.LocalCheckpointFileManager"
#: The planner extension: ``spark.sql.extensions``.
SQL_EXTENSIONS_CLASS = "io.mapwithstate.MapWithStateExtensions"

#: The driver plugin that ends a local server's JVM when its Python owner is gone.
_EXIT_WITH_OWNER_PLUGIN = "io.mapwithstate.server.ExitWithOwnerPlugin"
#: A setting holding a random id per local server: how the client knows it reached its own.
_SERVER_ID_KEY = "spark.mapwithstate.localServer.id"
_LOOPBACK = "127.0.0.1"
_JAR_PATTERN = "mapwithstate-assembly-*.jar"
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_REPO_JAR_DIR = os.path.join(_PACKAGE_DIR, os.pardir, os.pardir, "jvm", "target", "scala-2.13")
#: Where :func:`package_jars` looks for the jars of ``packages=[...]``: ``<dir>/<name>/*.jar``.
PACKAGES_DIR_ENV = "MAPWITHSTATE_PACKAGES_DIR"
_REPO_PACKAGES_DIR = os.path.join(_PACKAGE_DIR, os.pardir, os.pardir, ".tools", "packages")
#: The packages a local server can load, and the script of this repository that fetches each.
_PACKAGES = {"kafka": "dev/fetch-kafka"}


def jar_path() -> str:
    """The plugin's assembly jar, from the first of these places that has one:

    1. ``$MAPWITHSTATE_JAR``, when set (it must then be a file);
    2. the jar packaged in this package's ``jars/`` (an installed wheel, ``dev/build-wheel``),
       even when a newer one was built in a repository;
    3. the jar built in this repository (``dev/sbt plugin/assembly``), for an editable install.

    Within one place, the newest jar wins.

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
        + "; install the wheel (`dev/build-wheel`), build the jar (`dev/sbt plugin/assembly`) "
        "or set MAPWITHSTATE_JAR"
    )


def package_jars(name: str) -> List[str]:
    """The jars of a package a local server can load (``packages=[name]``), beside Spark's own.

    ``"kafka"`` is Spark's Kafka connector (``spark-sql-kafka-0-10``, with the token provider,
    ``kafka-clients`` and ``commons-pool2`` it needs): ``format("kafka")`` for ``readStream``,
    ``writeStream``, ``read`` and ``write``. The jars are every ``*.jar`` in
    ``$MAPWITHSTATE_PACKAGES_DIR/<name>/``, or, unset, in this repository's
    ``.tools/packages/<name>/``, which ``dev/fetch-kafka`` fills. Nothing is downloaded here.

    :raises ValueError: for a package name other than those known.
    :raises FileNotFoundError: naming the directory, when it holds no jar.

    >>> [os.path.basename(j) for j in package_jars("kafka")]  # doctest: +SKIP
    ['commons-pool2-2.13.1.jar', 'kafka-clients-3.9.2.jar', ...]
    """
    if name not in _PACKAGES:
        raise ValueError(
            f"packages: unknown package {name!r}; known: "
            + ", ".join(repr(p) for p in sorted(_PACKAGES))
        )
    root = os.environ.get(PACKAGES_DIR_ENV) or os.path.normpath(_REPO_PACKAGES_DIR)
    place = os.path.join(root, name)
    jars = sorted(glob.glob(os.path.join(place, "*.jar")))
    if not jars:
        raise FileNotFoundError(
            f"packages: {name!r} has no jars in {place}; fetch them with {_PACKAGES[name]} in "
            f"the mapwithstate repository, or set {PACKAGES_DIR_ENV} to a directory with a "
            f"{name}/ of jars"
        )
    return jars


def server_conf(jar: Optional[str] = None) -> Dict[str, str]:
    """The configuration a Spark Connect server needs to serve mapwithstate.

    For a cluster, pass the jar with ``--jars`` and these with ``--conf``, and require a token
    (clients then connect to ``sc://host:15002/;token=...``)::

        export SPARK_CONNECT_AUTHENTICATE_TOKEN=...   # a long random string
        relations=io.mapwithstate.connect.MapWithStateRelationPlugin
        relations=$relations,io.mapwithstate.connect.StateReaderRelationPlugin
        relations=$relations,io.mapwithstate.connect.StateRepartitionRelationPlugin
        files=io.mapwithstate.state.LocalCheckpointFileManager
        errors=io.mapwithstate.connect.BoundedErrorTrailers
        sbin/start-connect-server.sh --jars mapwithstate-assembly-0.1.0.jar \\
            --conf spark.connect.extensions.relation.classes=$relations \\
            --conf spark.sql.extensions=io.mapwithstate.MapWithStateExtensions \\
            --conf spark.sql.streaming.checkpointFileManagerClass=$files \\
            --conf spark.connect.grpc.interceptor.classes=$errors

    ``spark.sql.streaming.checkpointFileManagerClass`` is for every streaming query's logs
    (offsets, commits, metadata), not only map_with_state's: on a local file system the plugin's
    manager writes them with ``java.nio`` (fsync, atomic rename, directory fsync) instead of
    Hadoop's, which forks ``readlink``/``stat``/``chmod`` for every rename, some 40 ms a file;
    other file systems (HDFS, object stores) still get Spark's own manager. It is optional and
    overridable (``local_session(**{"spark.sql.streaming.checkpointFileManagerClass": ...})``);
    map_with_state's state files use the fork-free writer on local paths either way.

    ``spark.connect.grpc.interceptor.classes`` (optional too; append it to any interceptors of
    your own) keeps each error's gRPC trailers under what a default gRPC client reads (8 KB):
    Spark Connect quotes up to 2048 characters of the error there, twice, and a message of
    multi-byte characters — a value from the data in a cast error, say — otherwise reaches the
    client as ``RESOURCE_EXHAUSTED`` or a reset stream instead of the error. PySpark still gets
    the whole error, which it fetches by its id.

    >>> sorted(server_conf("/tmp/x.jar"))  # doctest: +NORMALIZE_WHITESPACE
    ['spark.connect.extensions.relation.classes', 'spark.connect.grpc.interceptor.classes',
     'spark.jars', 'spark.sql.extensions', 'spark.sql.streaming.checkpointFileManagerClass']
    """
    return {
        "spark.jars": jar or jar_path(),
        "spark.connect.extensions.relation.classes": RELATION_PLUGIN_CLASS,
        "spark.sql.extensions": SQL_EXTENSIONS_CLASS,
        "spark.sql.streaming.checkpointFileManagerClass": _CHECKPOINT_FILE_MANAGER,
        "spark.connect.grpc.interceptor.classes": _ERROR_TRAILERS_INTERCEPTOR,
    }


def _spark_home() -> str:
    import pyspark

    return os.path.dirname(os.path.abspath(pyspark.__file__))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((_LOOPBACK, 0))
        return s.getsockname()[1]


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((_LOOPBACK, port))
        except OSError:
            return False
        return True


def _properties_escape(text: str) -> str:
    """``text`` as a key or value of a Java properties file: every character that is not plainly
    safe as a ``\\uXXXX`` escape (UTF-16 units, as Java reads them)."""
    units = text.encode("utf-16-be")
    out = []
    for i in range(0, len(units), 2):
        code = int.from_bytes(units[i : i + 2], "big")
        ch = chr(code)
        out.append(ch if ch.isascii() and (ch.isalnum() or ch in "._-/,+@%") else f"\\u{code:04x}")
    return "".join(out)


# Errors reach a local session without the server's JVM stack trace (Spark Connect's default
# adds ~70 lines to each); a session sets it back with
# spark.conf.set("spark.sql.connect.serverStacktrace.enabled", "true"), a server with
# local_session(**{"spark.sql.connect.serverStacktrace.enabled": "true"}).
_CONCISE_ERRORS = {"spark.sql.connect.serverStacktrace.enabled": "false"}


class LocalConnectServer:
    """A Spark Connect server in its own JVM on this machine, with the plugin loaded, reachable
    by this user only.

    It runs Spark's ``SparkConnectServer`` through ``spark-submit`` from the installed pyspark.
    It is safe by default:

    - everything it listens on (Connect, the driver's RPC and block manager, the Spark UI) is
      bound to the loopback address;
    - it requires a random token, made per server and carried by :attr:`url`;
    - the token travels in the JVM's environment and the settings in a file only this user can
      read, so neither shows in ``ps``; the file is removed once the server has started;
    - the JVM ends when this Python process ends, however it ends (``kill -9`` included): it
      watches a pipe this process holds open;
    - it counts as started once it answered an authenticated request proving it is this server,
      so a port taken by another process is an error, never a session on someone else's server.

    Its Python workers (a ``foreachBatch`` function, UDFs) run on this process's interpreter
    unless ``PYSPARK_PYTHON`` says otherwise.

    Errors come without the server's JVM stack trace: the error's condition and message only.
    ``spark.sql.connect.serverStacktrace.enabled`` set to ``"true"`` (in ``conf``, or by
    ``spark.conf.set`` in a session) adds it back.

    :meth:`stop` (also run at interpreter exit) ends it and removes its temporary directory,
    log included; a server that failed to start, or ended on its own, keeps its log.

    :param master: Spark's master, ``local[2]`` by default.
    :param conf: Spark settings for the server.
    :param port: the Connect port on 127.0.0.1; a free one when not given.
    :param startup_timeout: seconds to wait for the server to answer.
    :param packages: packages to load beside the plugin (see :func:`package_jars`), e.g.
        ``["kafka"]`` for Spark's Kafka connector; their jars are added to ``spark.jars``.
    """

    def __init__(
        self,
        master: str = "local[2]",
        conf: Optional[Dict[str, str]] = None,
        port: Optional[int] = None,
        startup_timeout: float = 180.0,
        packages: Sequence[str] = (),
    ) -> None:
        if port is not None and not _port_is_free(port):
            raise OSError(
                errno.EADDRINUSE,
                f"port {port} on {_LOOPBACK} is in use by another process; pass another "
                "port, or none to have a free one chosen",
            )
        self.master = master
        self.conf: Dict[str, str] = {**server_conf(), **_CONCISE_ERRORS, **(conf or {})}
        if isinstance(packages, str):
            raise TypeError(
                f"packages must be a list of package names, not the string "
                f"{packages!r}: packages=[{packages!r}]"
            )
        extra_jars = [j for name in packages for j in package_jars(name)]
        if extra_jars:
            jars = [j for j in self.conf.get("spark.jars", "").split(",") if j.strip()]
            self.conf["spark.jars"] = ",".join(jars + extra_jars)
        plugins = [p for p in self.conf.get("spark.plugins", "").split(",") if p.strip()]
        self.conf["spark.plugins"] = ",".join(plugins + [_EXIT_WITH_OWNER_PLUGIN])
        self._token = secrets.token_urlsafe(32)
        self._server_id = secrets.token_hex(16)
        self._process: Optional[subprocess.Popen[bytes]] = None
        self._started = False
        # The sessions handed out, closed while the server still runs: a Connect session whose
        # channel is first closed by the garbage collector after the server stopped blocks the
        # interpreter's exit inside gRPC (seen with two sessions on one server).
        self._sessions: "weakref.WeakSet[SparkSession]" = weakref.WeakSet()
        self._last_probe_error: Optional[Exception] = None
        self._dir = tempfile.mkdtemp(prefix="mapwithstate-server-")  # mode 0700
        self.log_path = os.path.join(self._dir, "server.log")
        atexit.register(self.stop)
        # A port chosen here may be taken before the JVM binds it; the JVM then fails to start
        # (it is told not to move to another port), and a fresh pair of ports is tried.
        attempts = 1 if port is not None else 3
        for attempt in range(attempts):
            self.port = port or _free_port()
            self.ui_port = _free_port()
            try:
                self._start(startup_timeout)
                return
            except _PortTaken:
                if attempt == attempts - 1:
                    raise OSError(
                        errno.EADDRINUSE,
                        f"the Spark Connect server could not bind port {self.port} or "
                        f"{self.ui_port} on {_LOOPBACK}: in use by another process; "
                        f"its log ({self.log_path}) ends with:\n{self.log_tail()}",
                    ) from None

    @property
    def url(self) -> str:
        """The ``sc://`` address clients connect to, with the server's token."""
        return f"sc://localhost:{self.port}/;token={self._token}"

    @property
    def ui_url(self) -> str:
        """The Spark UI's address (on loopback: open it in a browser on this machine)."""
        return f"http://{_LOOPBACK}:{self.ui_port}"

    @property
    def pid(self) -> Optional[int]:
        """The server JVM's process id, or None once stopped."""
        return self._process.pid if self._process is not None else None

    def _settings(self) -> Dict[str, str]:
        return {
            **self.conf,
            "spark.master": self.master,
            "spark.app.name": "mapwithstate-local-connect-server",
            "spark.connect.grpc.binding.address": _LOOPBACK,
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.connect.grpc.port.maxRetries": "0",
            "spark.driver.bindAddress": _LOOPBACK,
            "spark.driver.host": _LOOPBACK,
            "spark.ui.enabled": "true",
            "spark.ui.port": str(self.ui_port),
            "spark.port.maxRetries": "0",
            _SERVER_ID_KEY: self._server_id,
        }

    def _properties_path(self) -> str:
        return os.path.join(self._dir, "server.properties")

    def _write_properties(self) -> str:
        path = self._properties_path()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as f:
            for key, value in self._settings().items():
                f.write(f"{_properties_escape(key)}={_properties_escape(str(value))}\n")
        return path

    def _start(self, timeout: float) -> None:
        home = _spark_home()
        command = [
            os.path.join(home, "bin", "spark-submit"),
            "--properties-file",
            self._write_properties(),
            "--class",
            "org.apache.spark.sql.connect.service.SparkConnectServer",
            "spark-internal",
        ]
        env = dict(
            os.environ,
            SPARK_HOME=home,
            SPARK_LOCAL_IP=_LOOPBACK,
            SPARK_CONNECT_AUTHENTICATE_TOKEN=self._token,
        )
        env.pop("SPARK_CONNECT_MODE_ENABLED", None)
        # The server's Python workers run this client's code (a foreachBatch function, a UDF),
        # which needs this interpreter's packages; Spark's own default is `python3` on the PATH.
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        with open(self.log_path, "wb") as log:
            # stdin is a pipe whose write end only this process holds: when it dies the JVM
            # reads end of file and exits (ExitWithOwnerPlugin). spark-submit execs the JVM, so
            # this child is the JVM itself.
            self._process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.PIPE,
                env=env,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                code = self._process.returncode
                self.stop()
                tail = self.log_tail()
                if "Address already in use" in tail or "BindException" in tail:
                    raise _PortTaken()
                raise RuntimeError(
                    f"the Spark Connect server exited with code {code} while starting; its log "
                    f"({self.log_path}) ends with:\n{tail}"
                )
            if self._answers():
                # spark-submit read the settings at launch; they may hold secrets (a user's
                # credentials in a Hadoop setting), so they do not stay on disk.
                self._remove_properties()
                self._started = True
                return
            time.sleep(0.5)
        self.stop()
        raise TimeoutError(
            f"the Spark Connect server did not answer on port {self.port} within {timeout:.0f}s "
            f"(last attempt: {self._last_probe_error!r}); its log ends with:\n{self.log_tail()}"
        )

    def _answers(self) -> bool:
        """Whether this server answers an authenticated request on its port; raises when
        another server answers there."""
        try:
            with socket.create_connection((_LOOPBACK, self.port), timeout=1):
                pass
        except OSError:
            return False
        try:
            probe = SparkSession.builder.remote(self.url).create()
            try:
                answered = probe.conf.get(_SERVER_ID_KEY, None)
            finally:
                probe.stop()
        except Exception as e:  # not answering yet (or not a Connect server): wait, or time out
            self._last_probe_error = e
            return False
        if answered != self._server_id:
            raise RuntimeError(
                f"port {self.port} on {_LOOPBACK} is served by another Spark Connect server than "
                f"the one started here (pid {self.pid}); not using it"
            )
        return True

    def log_tail(self, lines: int = 40) -> str:
        """The end of the server's log."""
        try:
            with open(self.log_path, "r", errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def session(self) -> SparkSession:
        """A new Spark Connect session on this server; :meth:`stop` closes it."""
        session = SparkSession.builder.remote(self.url).create()
        self._sessions.add(session)
        return session

    def running(self) -> bool:
        """Whether the server's JVM is still running."""
        return self._process is not None and self._process.poll() is None

    def stop(self) -> None:
        """Stops the server (and its Spark) and waits for it to exit. Its temporary directory
        goes too, unless it never started or had ended on its own: then its log stays."""
        process, self._process = self._process, None
        if process is None:
            return
        running = process.poll() is None
        for session in list(self._sessions):
            try:
                session.client.close()
            except Exception:  # noqa: BLE001 - best effort: the server is going away
                pass
        self._sessions.clear()
        if running:
            assert process.stdin is not None  # started with stdin=PIPE
            process.stdin.close()  # the JVM's watchdog sees end of file and exits cleanly
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        elif process.stdin is not None:
            process.stdin.close()
        self._remove_properties()
        if self._started and running:
            shutil.rmtree(self._dir, ignore_errors=True)

    def _remove_properties(self) -> None:
        try:
            os.remove(self._properties_path())
        except FileNotFoundError:
            pass

    def __enter__(self) -> "LocalConnectServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _PortTaken(Exception):
    """The JVM could not bind one of its ports."""


_servers: Dict[Tuple[str, Tuple[str, ...], FrozenSet[Tuple[str, str]]], LocalConnectServer] = {}
_servers_lock = threading.Lock()


def local_session(
    master: str = "local[2]", packages: Sequence[str] = (), **conf: str
) -> SparkSession:
    """A Spark Connect session served by a local Connect server with the plugin.

    The server (see :class:`LocalConnectServer`) is started on first use with ``master``,
    ``packages`` (e.g. ``["kafka"]``: Spark's Kafka connector, see :func:`package_jars`) and
    ``conf`` (Spark settings, e.g. ``**{"spark.sql.shuffle.partitions": "4"}``); later calls
    with the same settings get a new session on the same server. It listens on loopback only,
    requires a token, and stops when the Python process exits.

    :raises FileNotFoundError: when the plugin jar is not built (see :func:`jar_path`), or a
        package's jars are not fetched.

    >>> import mapwithstate as mws
    >>> spark = mws.local_session(**{"spark.sql.shuffle.partitions": "4"})  # doctest: +SKIP
    >>> kafka = mws.local_session(packages=["kafka"])  # doctest: +SKIP
    """
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise RuntimeError(
            "the local Spark Connect server needs Java 17: neither JAVA_HOME nor java on PATH"
        )
    settings = {k: str(v) for k, v in conf.items()}
    names = (packages,) if isinstance(packages, str) else tuple(packages)
    key = (master, names, frozenset(settings.items()))
    with _servers_lock:
        server = _servers.get(key)
        if server is None or not server.running():
            server = LocalConnectServer(master=master, conf=settings, packages=packages)
            _servers[key] = server
    return server.session()

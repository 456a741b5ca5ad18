"""Real deployments for the tests: a Spark Connect server started the way an operator starts one
(Spark's ``sbin/start-connect-server.sh`` with ``--jars`` and ``--conf``), and a Spark
standalone cluster (a master and workers, each its own JVM from ``bin/spark-class``).

Everything binds to the loopback interface and lives in a temp directory; ``stop()`` ends every
process it started, executors included.
"""
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional

import pyspark

import mapwithstate as mws

CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
#: The pinned pyspark is a Spark distribution: bin/, sbin/, jars/.
SPARK_HOME = os.path.dirname(os.path.abspath(pyspark.__file__))


def free_port() -> int:
    """A port nothing listens on now (on 127.0.0.1)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_env(root: Path, ident: str) -> Dict[str, str]:
    """The environment for Spark's scripts: SPARK_HOME is the pinned pyspark, logs and pid files
    go under ``root``, and every JVM binds to 127.0.0.1."""
    env = dict(os.environ, SPARK_HOME=SPARK_HOME, SPARK_LOG_DIR=str(root / "logs"),
               SPARK_PID_DIR=str(root / "pids"), SPARK_IDENT_STRING=ident,
               SPARK_LOCAL_IP="127.0.0.1", SPARK_LOCAL_HOSTNAME="localhost",
               SPARK_DAEMON_MEMORY="512m")
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    env.pop("MASTER", None)
    return env


def wait_for_port(port: int, timeout: float, what: str, log=lambda: "") -> None:
    """Waits until something listens on 127.0.0.1:``port``.

    :raises TimeoutError: with ``log()``, when nothing does within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} did not listen on {port} within {timeout:.0f}s\n"
                                   f"{log()[-4000:]}") from None
            time.sleep(0.5)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (one waiting for its parent to reap
    it does not run)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def kill_local_server(server: "mws.LocalConnectServer", timeout: float = 30) -> None:
    """Kills ``server``'s JVM with SIGKILL, as a crash would, and waits until it has ended."""
    os.kill(server.pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while server.running() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not server.running(), f"the server {server.pid} outlived SIGKILL by {timeout:.0f} s"


class ConnectDaemon:
    """A Spark Connect server with the plugin, started by ``sbin/start-connect-server.sh``.

    :param root: a temp directory for its logs and pid file.
    :param master: the ``--master`` URL.
    :param conf: extra ``--conf`` settings.
    :param ui: turn the Spark UI on at :attr:`ui_port` (loopback).
    :param token: require this token of clients (it travels in the environment, not in ``ps``).
    """

    def __init__(self, root: Path, master: str = "local[2]",
                 conf: Optional[Dict[str, str]] = None, ui: bool = False,
                 startup_timeout: float = 240.0, token: Optional[str] = None) -> None:
        self.root = root
        self.port = free_port()
        self.ui_port = free_port() if ui else None
        self.token = token
        self.env = spark_env(root, f"mws{self.port}")
        if token:
            self.env["SPARK_CONNECT_AUTHENTICATE_TOKEN"] = token
        home = self.env["SPARK_HOME"]
        command = [os.path.join(home, "sbin", "start-connect-server.sh"), "--master", master,
                   "--jars", mws.jar_path(),
                   "--conf", f"spark.connect.grpc.binding.port={self.port}",
                   "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
                   "--conf", "spark.driver.host=127.0.0.1",
                   "--conf", "spark.driver.bindAddress=127.0.0.1"]
        if ui:
            command += ["--conf", "spark.ui.enabled=true", "--conf", f"spark.ui.port={self.ui_port}"]
        else:
            command += ["--conf", "spark.ui.enabled=false"]
        settings = {k: v for k, v in mws.server_conf().items() if k != "spark.jars"}
        settings.update(conf or {})
        for key, value in settings.items():
            command += ["--conf", f"{key}={value}"]
        subprocess.run(command, env=self.env, check=True, stdout=subprocess.DEVNULL)
        try:
            wait_for_port(self.port, startup_timeout, "start-connect-server.sh", self.log)
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        """The ``sc://`` address clients connect to, with the token when there is one."""
        return f"sc://localhost:{self.port}" + (f"/;token={self.token}" if self.token else "")

    @property
    def pid(self) -> Optional[int]:
        """The server JVM's pid, from spark-daemon.sh's pid file."""
        files = list((self.root / "pids").glob(f"*{CONNECT_SERVER_CLASS}*.pid"))
        return int(files[0].read_text().strip()) if files else None

    def log(self) -> str:
        """The server's console log (spark-daemon.sh's ``.out`` file)."""
        return "".join(p.read_text(errors="replace") for p in (self.root / "logs").glob("*.out"))

    def stop(self) -> None:
        """``sbin/stop-connect-server.sh``, then SIGKILL if the JVM outlived it."""
        pid = self.pid
        subprocess.run([os.path.join(self.env["SPARK_HOME"], "sbin", "stop-connect-server.sh")],
                       env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if pid is not None:
            deadline = time.monotonic() + 30
            while pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.5)
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)


class StandaloneCluster:
    """A Spark standalone cluster on this machine: ``spark-class ...deploy.master.Master`` and
    ``workers`` × ``spark-class ...deploy.worker.Worker``, loopback only, one core each.

    Each daemon runs in its own session, so the executors a worker launches share the worker's
    session id (:meth:`executor_pids`) and die with it in :meth:`stop`.
    """

    def __init__(self, root: Path, workers: int = 2, worker_memory: str = "1g",
                 startup_timeout: float = 120.0) -> None:
        self.root = root
        self.port = free_port()
        self.env = spark_env(root, f"mws-standalone{self.port}")
        self._spark_class = os.path.join(self.env["SPARK_HOME"], "bin", "spark-class")
        self.master_process: Optional[subprocess.Popen] = None
        self.worker_processes: List[subprocess.Popen] = []
        (root / "logs").mkdir(parents=True, exist_ok=True)
        try:
            self.master_process = self._daemon(
                "master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                           "--port", str(self.port), "--webui-port", str(free_port())])
            wait_for_port(self.port, startup_timeout, "the standalone master",
                          lambda: self.log("master"))
            for i in range(workers):
                work_dir = root / f"worker{i}"
                work_dir.mkdir()
                self.worker_processes.append(self._daemon(
                    f"worker{i}", ["org.apache.spark.deploy.worker.Worker", self.url,
                                   "--host", "127.0.0.1", "--port", str(free_port()),
                                   "--webui-port", str(free_port()), "--cores", "1",
                                   "--memory", worker_memory, "--work-dir", str(work_dir)]))
            deadline = time.monotonic() + startup_timeout
            while self.log("master").count("Registering worker") < workers:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{workers} workers did not register:\n"
                                       + self.log("master")[-4000:])
                time.sleep(0.5)
        except BaseException:
            self.stop()
            raise

    def _daemon(self, name: str, args: List[str]) -> subprocess.Popen:
        log = open(self.root / "logs" / f"{name}.log", "wb")
        with log:
            return subprocess.Popen([self._spark_class, *args], env=self.env, stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)

    @property
    def url(self) -> str:
        """The master's ``spark://`` URL."""
        return f"spark://127.0.0.1:{self.port}"

    def log(self, name: str) -> str:
        """A daemon's console log: ``master`` or ``worker<i>``."""
        try:
            return (self.root / "logs" / f"{name}.log").read_text(errors="replace")
        except OSError:
            return ""

    def executor_pids(self, worker: int) -> List[int]:
        """The live executor JVMs (``CoarseGrainedExecutorBackend``) launched by a worker."""
        sid = self.worker_processes[worker].pid
        out = subprocess.run(["ps", "-ww", "-eo", "pid=,sid=,stat=,args="], capture_output=True,
                             text=True).stdout
        pids = []
        for line in out.splitlines():
            pid, session, stat, args = line.split(None, 3)
            if int(session) == sid and "Z" not in stat and "CoarseGrainedExecutorBackend" in args:
                pids.append(int(pid))
        return pids

    def stop(self) -> None:
        """Ends the workers with their executors, then the master: SIGTERM, then SIGKILL."""
        processes = [*self.worker_processes, *([self.master_process] if self.master_process else [])]
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for p in processes:
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 20
            for p in processes:
                try:
                    p.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
        # executors outliving a worker's SIGTERM are in its process group, killed above

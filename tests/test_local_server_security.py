"""The local server is safe by default: loopback only, a token, nothing secret in ``ps``, no
orphan JVM, and no session on a server that is not its own. Checked from the operating system
(its socket and process tables), not from what the server says about itself."""
import ipaddress
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import time
import urllib.request

import pytest
from pyspark.sql import SparkSession

import mapwithstate as mws
from clusters import kill_local_server, pid_alive
from overlapped import OverlappedRuns

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="reads Linux's /proc socket and process tables")


def _address(hex_address: str) -> ipaddress._BaseAddress:
    raw = bytes.fromhex(hex_address)
    # /proc/net/tcp{,6} print each 32-bit word of the address in host (little-endian) order.
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return ipaddress.ip_address(words)


def listening_addresses(pid: int):
    """(address, port) of every TCP socket process ``pid`` listens on, from /proc."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == "0A" and inode in inodes:  # 0A: LISTEN
                    address, port = local.split(":")
                    found.append((_address(address), int(port, 16)))
    return found


def _is_loopback(address: ipaddress._BaseAddress) -> bool:
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


def test_everything_the_server_listens_on_is_loopback(server):
    listening = listening_addresses(server.pid)
    ports = {port for _, port in listening}
    # Connect, the UI, and the driver's RPC and block manager.
    assert {server.port, server.ui_port} <= ports and len(listening) >= 4, listening
    assert [a for a in listening if not _is_loopback(a[0])] == []


def test_the_spark_ui_is_served_on_loopback(server):
    assert server.ui_url.startswith("http://127.0.0.1:")
    with urllib.request.urlopen(server.ui_url + "/jobs/", timeout=30) as response:
        assert response.status == 200


@pytest.mark.parametrize("suffix", ["", "/;token=not-the-token"], ids=["none", "wrong"])
def test_a_client_without_the_token_is_refused(server, suffix):
    assert "token=" in server.url
    intruder = SparkSession.builder.remote(f"sc://localhost:{server.port}{suffix}").create()
    try:
        with pytest.raises(Exception, match="UNAUTHENTICATED"):
            intruder.range(1).collect()
    finally:
        intruder.stop()


def test_the_token_and_settings_are_not_on_the_command_line(server):
    token = server.url.split("token=")[1]
    ps = subprocess.run(["ps", "-ww", "-o", "args=", "-p", str(server.pid)],
                        capture_output=True, text=True, check=True).stdout
    with open(f"/proc/{server.pid}/cmdline", "rb") as f:
        cmdline = f.read().decode().split("\0")
    assert "SparkConnectServer" in ps
    for text in (ps, " ".join(cmdline)):
        assert token not in text
        # conftest's setting, and what the local server adds itself
        assert "spark.sql.shuffle.partitions" not in text
        assert "spark.connect" not in text and "mapwithstate.connect" not in text
    properties = cmdline[cmdline.index("--properties-file") + 1]
    assert stat.S_IMODE(os.stat(os.path.dirname(properties)).st_mode) == 0o700
    # Read at launch, and gone once the server started: settings can hold secrets.
    assert not os.path.exists(properties)
    # While it exists (the launch), only this user can read it.
    written = server._write_properties()
    try:
        assert written == properties
        assert stat.S_IMODE(os.stat(written).st_mode) == 0o600
    finally:
        os.remove(written)


def test_a_taken_port_is_a_clear_error(server):
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        taken = other.getsockname()[1]
        with pytest.raises(OSError, match=f"port {taken} on 127.0.0.1 is in use"):
            mws.LocalConnectServer(port=taken)
    # Another Connect server on the port: refused too, never a session on it.
    with pytest.raises(OSError, match=f"port {server.port} on 127.0.0.1 is in use"):
        mws.LocalConnectServer(port=server.port)


# The tests below start servers of their own (in this process or in a child) and spend their
# time waiting for those JVMs to start and end: their bodies run at once (tests/overlapped.py),
# started by the first one's setup, and each test raises what its body raised.
OWN_SERVERS = OverlappedRuns("own-server")


@pytest.fixture(scope="module")
def own_servers(request):
    try:
        OWN_SERVERS.start_selected(request, lambda item: {})
        yield OWN_SERVERS
    finally:
        OWN_SERVERS.close()


def test_stop_removes_the_servers_directory_unless_its_log_is_needed(own_servers, request):
    own_servers.outcome(request)


@OWN_SERVERS.body("test_stop_removes_the_servers_directory_unless_its_log_is_needed")
def _stop_removes_the_servers_directory_unless_its_log_is_needed():
    server = mws.LocalConnectServer()
    directory = os.path.dirname(server.log_path)
    assert os.path.isfile(server.log_path)
    assert os.listdir(directory) == ["server.log"]
    server.stop()
    assert not os.path.exists(directory)
    # A server that ended on its own keeps its log (and not its settings).
    crashed = mws.LocalConnectServer()
    kill_local_server(crashed)
    crashed.stop()
    assert os.listdir(os.path.dirname(crashed.log_path)) == ["server.log"]
    shutil.rmtree(os.path.dirname(crashed.log_path))
    # A start that fails points to its log, which stays.
    with pytest.raises(RuntimeError, match="exited with code") as failed:
        mws.LocalConnectServer(conf={"spark.driver.memory": "not-a-size"})
    log = failed.value.args[0].split("its log (")[1].split(")")[0]
    assert os.path.isfile(log)
    assert os.listdir(os.path.dirname(log)) == ["server.log"]
    shutil.rmtree(os.path.dirname(log))


_OWNER = textwrap.dedent("""
    import sys, time
    import mapwithstate as mws
    server = mws.LocalConnectServer()
    print(server.pid, flush=True)
    time.sleep(600)
""")


def test_the_server_ends_when_its_owner_is_killed(own_servers, request):
    own_servers.outcome(request)


@OWN_SERVERS.body("test_the_server_ends_when_its_owner_is_killed")
def _the_server_ends_when_its_owner_is_killed():
    owner = subprocess.Popen([sys.executable, "-c", _OWNER], stdout=subprocess.PIPE, text=True)
    try:
        line = owner.stdout.readline()
        assert line.strip().isdigit(), f"the owner printed {line!r}"
        jvm = int(line)
        assert os.path.exists(f"/proc/{jvm}")
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        deadline = time.monotonic() + 20
        while pid_alive(jvm) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not pid_alive(jvm), f"the server JVM {jvm} outlived its owner by 20 s"
    finally:
        owner.kill()
        owner.wait()


def test_local_session_reuses_one_server_per_settings(own_servers, request):
    own_servers.outcome(request)


@OWN_SERVERS.body("test_local_session_reuses_one_server_per_settings")
def _local_session_reuses_one_server_per_settings():
    from mapwithstate import server as server_module

    settings = {"spark.sql.shuffle.partitions": "3"}
    first = mws.local_session(**settings)
    second = mws.local_session(**settings)
    try:
        server_id = "spark.mapwithstate.localServer.id"
        assert first.conf.get(server_id) == second.conf.get(server_id)
        assert first.session_id != second.session_id
        assert len(server_module._servers) == 1
        assert first.range(2).count() == 2 and second.range(3).count() == 3
    finally:
        first.stop()
        second.stop()
        for running in list(server_module._servers.values()):
            running.stop()
        server_module._servers.clear()


_TWO_SESSIONS = textwrap.dedent("""
    import mapwithstate as mws
    first = mws.local_session()
    kept = first.range(2)            # a DataFrame keeps the first session alive to the exit
    first = mws.local_session()
    print(kept.count() + first.range(3).count(), flush=True)
""")


def test_a_process_with_two_sessions_on_one_server_exits(own_servers, request):
    own_servers.outcome(request)


@OWN_SERVERS.body("test_a_process_with_two_sessions_on_one_server_exits")
def _a_process_with_two_sessions_on_one_server_exits():
    # Before the server closed its sessions when stopping, gRPC blocked the interpreter's exit
    # closing the first session's channel after the server had gone.
    done = subprocess.run([sys.executable, "-c", _TWO_SESSIONS], capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["5"]

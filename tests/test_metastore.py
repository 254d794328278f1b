"""The project's metastore service: started once for every process of a project, shared, stopped when idle."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamjoin import ConfigError, metastore, metastore_server
from streamjoin.processes import alive, listening

pytestmark = pytest.mark.slow

CLIENT = "import sys; from pathlib import Path; from streamjoin import metastore; print(metastore.uri(Path(sys.argv[1])))"


def service(local_dir: Path) -> dict:
    return json.loads((local_dir / metastore.FOLDER / "service.json").read_text())


def connect_from_other_processes(local_dir: Path, count: int, idle: str) -> list[str]:
    """`count` processes asking for the service at once; each its URI. They exit at once."""
    env = {**os.environ, metastore.IDLE_ENV: idle}
    started = [subprocess.Popen([sys.executable, "-c", CLIENT, str(local_dir)], env=env, stdout=subprocess.PIPE,
                                text=True) for _ in range(count)]
    return [p.communicate(timeout=300)[0].strip() for p in started]


def test_processes_at_once_share_one_service_which_stops_once_idle(tmp_path: Path) -> None:
    uris = connect_from_other_processes(tmp_path, 2, idle="3")
    assert len(set(uris)) == 1 and uris[0].startswith("thrift://127.0.0.1:"), uris
    running = service(tmp_path)
    assert uris[0].endswith(f":{running['port']}")
    assert (tmp_path / "metastore_db").is_dir()  # the catalog's Derby database, in the project's local dir

    deadline = time.time() + 60
    while alive(running["pid"]) and time.time() < deadline:  # the supervisor exits last
        time.sleep(0.5)
    assert not alive(running["service_pid"]) and not alive(running["pid"])
    assert not (tmp_path / metastore.FOLDER / "service.json").exists()
    assert not listening(running["port"])


def test_a_process_using_it_keeps_it_and_stop_ends_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(metastore.IDLE_ENV, "1")
    uri = metastore.uri(tmp_path)  # this process counts as a client until it exits
    first = service(tmp_path)
    time.sleep(4)
    assert metastore.uri(tmp_path) == uri and service(tmp_path) == first  # still the same service
    assert metastore.stop(tmp_path)
    assert not alive(first["pid"]) and not alive(first["service_pid"]) and not listening(first["port"])
    assert not metastore.stop(tmp_path)


def test_a_service_that_cannot_start_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-java"))
    with pytest.raises(metastore.MetastoreError, match="did not start; its log"):
        metastore.uri(tmp_path, timeout=60)


def test_the_idle_time_must_be_a_number(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(metastore.IDLE_ENV, "ten minutes")
    with pytest.raises(ConfigError, match="STREAMJOIN_METASTORE_IDLE_SECONDS='ten minutes'"):
        metastore.idle_seconds()


def listening_addresses(port: int) -> set[str]:
    """The local addresses of the sockets listening on TCP `port` (IPv4 and IPv6 tables, as the kernel
    writes them: hex, IPv4 in host byte order)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, hex_port = fields[1].split(":")
            state = fields[3]
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.add(address)
    return found


def test_the_service_listens_on_loopback_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(metastore.IDLE_ENV, "1")
    metastore.uri(tmp_path)
    running = service(tmp_path)
    try:
        # 127.0.0.1, as IPv4 or as IPv4-mapped IPv6; never the wildcard (0.0.0.0 or ::)
        assert listening_addresses(running["port"]) <= {"0100007F", "0000000000000000FFFF00000100007F"}
        assert listening_addresses(running["port"])
    finally:
        metastore.stop(tmp_path)


def test_a_killed_supervisor_takes_its_service_with_it(tmp_path: Path) -> None:
    connect_from_other_processes(tmp_path, 1, idle="600")
    running = service(tmp_path)
    os.kill(running["pid"], signal.SIGKILL)
    deadline = time.time() + 60
    while alive(running["service_pid"]) and time.time() < deadline:
        time.sleep(0.5)
    assert not alive(running["service_pid"]) and not listening(running["port"])


def test_a_database_the_service_cannot_open_fails_its_start_with_hive_s_reason(tmp_path: Path) -> None:
    settings = {"javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={tmp_path / 'file' / 'db'};create=true",
                "hive.metastore.schema.verification": "false", "hive.hmshandler.retry.attempts": "1"}
    (tmp_path / "file").write_text("a file where Derby wants a folder")
    with pytest.raises(metastore.MetastoreError, match="did not start: .*(Derby|database|JDO)"):
        metastore_server.start(settings, metastore._java_options(tmp_path), cwd=tmp_path)

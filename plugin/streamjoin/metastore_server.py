"""Hive's metastore Thrift server on 127.0.0.1 only, in a JVM that the supervisor drives over Py4J.

Hive 2.3's own entry point (`HiveMetaStore.main`, from the hive-metastore jar Spark ships) binds its
server socket to every interface: it takes no bind host. The project's catalog would then answer,
without authentication, to anyone who can reach the machine. So the service is a plain JVM with
Spark's jars and a Py4J gateway (on 127.0.0.1, with a secret), and the supervisor assembles in it
the server `HiveMetaStore.startMetaStore` builds for a metastore without SASL or SSL — the retrying
handler, the transport that carries the client's user, the (unframed) binary protocol with Hive's
message size limit, the worker thread bounds and Hive's connection clean-up — on a socket bound to
127.0.0.1 at a port the kernel picks. The port is the service's from its bind, so no other process
can take it between its choice and its use.

The JVM exits when the supervisor does (Py4J's `--die-on-broken-pipe`), so a supervisor killed
without its clean-up leaves no service behind.
"""
from __future__ import annotations

import glob
import os
import subprocess
import sys
import threading
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway
from py4j.protocol import Py4JError

from .class_archive import java_command, spark_jars
from .errors import StreamJoinError
from .processes import HOST, terminate

#: Hive's metastore class; one of its anonymous classes is its handler of closed connections (whose
#: `deleteContext` releases the connection thread's RawStore).
HIVE_METASTORE = "org.apache.hadoop.hive.metastore.HiveMetaStore"


class MetastoreError(StreamJoinError):
    """The project's metastore service did not start."""


@dataclass
class MetastoreServer:
    """A running metastore service: its JVM, the port it serves on, and the thread that serves."""
    process: subprocess.Popen
    port: int
    gateway: JavaGateway
    server: Any  # the JVM's TThreadPoolServer
    serving: threading.Thread

    def running(self) -> bool:
        return self.process.poll() is None and self.serving.is_alive()

    def stop(self) -> None:
        """Stop serving, then end the JVM."""
        with suppress(Py4JError):
            self.server.stop()
        self.serving.join(timeout=10.0)
        _end(self.gateway, self.process)


def start(settings: Mapping[str, str], java_options: Sequence[str], cwd: Path) -> MetastoreServer:
    """A metastore service with Hive settings `settings`, serving on 127.0.0.1 (the JVM writes to this
    process's standard output and error)."""
    jars = str(spark_jars())
    java = java_command()
    try:
        port, token, process = launch_gateway(
            jarpath=next(iter(glob.glob(os.path.join(jars, "py4j-*.jar"))), ""), classpath=os.path.join(jars, "*"),
            javaopts=list(java_options), java_path=java, die_on_exit=True, enable_auth=True, return_proc=True,
            # (Py4J closes the file it copies the JVM's stdout to when the JVM exits: a copy of ours)
            redirect_stdout=os.fdopen(os.dup(sys.__stdout__.fileno()), "w", buffering=1),
            redirect_stderr=sys.__stderr__, cwd=str(cwd))
    except (OSError, ValueError) as exc:  # no java there; a JVM that exited before its gateway listened
        raise MetastoreError(f"could not start a JVM for the metastore service with {java}: {exc}") from exc
    # no Java garbage collection of Python's references: the few objects live as long as the JVM, and
    # references dropped after it ended would each try to reach it
    gateway = JavaGateway(gateway_parameters=GatewayParameters(port=port, auth_token=token,
                                                               enable_memory_management=False))
    try:
        server, bound = _thrift_server(gateway, settings)
    except Py4JError as exc:  # Hive refused its settings, or Derby its database
        reason = _root_cause(exc)
        _end(gateway, process)
        raise MetastoreError(f"the metastore service did not start: {reason}") from None
    except BaseException:
        _end(gateway, process)
        raise
    serving = threading.Thread(target=_serve, args=(server,), name="metastore", daemon=True)
    serving.start()
    return MetastoreServer(process, bound, gateway, server, serving)


def _thrift_server(gateway: JavaGateway, settings: Mapping[str, str]) -> tuple[Any, int]:
    """Hive's unsecured metastore server, as `HiveMetaStore.startMetaStore` builds it, on a socket bound
    to 127.0.0.1 (listening from here on); the server and its port."""
    jvm = gateway.jvm
    hive, thrift = jvm.org.apache.hadoop.hive, jvm.org.apache.thrift
    conf = hive.conf.HiveConf()
    for key, value in settings.items():
        conf.set(key, value)
    variables = hive.conf.HiveConf.ConfVars
    metastore = hive.metastore.HiveMetaStore
    handler = metastore.newRetryingHMSHandler(metastore.HMSHandler("new db based metaserver", conf, False), conf)
    socket = thrift.transport.TServerSocket(jvm.java.net.InetSocketAddress(HOST, 0))
    port = socket.getServerSocket().getLocalPort()
    limit = conf.getLongVar(variables.METASTORESERVERMAXMESSAGESIZE)
    if conf.getBoolVar(variables.METASTORE_EXECUTE_SET_UGI):  # (Hive's default)
        processor = hive.metastore.TUGIBasedProcessor(handler)
        transports = hive.thrift.TUGIContainingTransport.Factory()
    else:
        processor, transports = hive.metastore.TSetIpAddressProcessor(handler), thrift.transport.TTransportFactory()
    listener = hive.metastore.TServerSocketKeepAlive(socket) \
        if conf.getBoolVar(variables.METASTORE_TCP_KEEP_ALIVE) else socket
    server = thrift.server.TThreadPoolServer(
        thrift.server.TThreadPoolServer.Args(listener).processor(processor).transportFactory(transports)
        .protocolFactory(thrift.protocol.TBinaryProtocol.Factory())
        .inputProtocolFactory(thrift.protocol.TBinaryProtocol.Factory(True, True, limit, limit))
        .minWorkerThreads(conf.getIntVar(variables.METASTORESERVERMINTHREADS))
        .maxWorkerThreads(conf.getIntVar(variables.METASTORESERVERMAXTHREADS)))
    server.setServerEventHandler(_connection_clean_up(gateway))
    return server, port


def _connection_clean_up(gateway: JavaGateway) -> Any:
    """Hive's handler of closed connections (an anonymous class of `HiveMetaStore`, found by its interface)."""
    jvm = gateway.jvm
    wanted = jvm.java.lang.Class.forName("org.apache.thrift.server.TServerEventHandler")
    for index in range(1, 20):
        try:
            candidate = jvm.java.lang.Class.forName(f"{HIVE_METASTORE}${index}")
        except Py4JError:
            break
        if wanted.isAssignableFrom(candidate):
            constructor = candidate.getDeclaredConstructors()[0]
            constructor.setAccessible(True)
            return constructor.newInstance(gateway.new_array(jvm.java.lang.Object, 0))
    raise MetastoreError(f"{HIVE_METASTORE} of Spark's jars has no connection handler (TServerEventHandler); "
                         "this Hive version is not one the embedded metastore service supports")


def _root_cause(exc: Py4JError) -> str:
    """The innermost Java exception under a failed call, as Java prints it (read while the JVM runs)."""
    cause = getattr(exc, "java_exception", None)
    if cause is None:
        return str(exc)
    while cause.getCause() is not None:
        cause = cause.getCause()
    return str(cause.toString())


def _end(gateway: JavaGateway, process: subprocess.Popen) -> None:
    """Close the gateway and end the JVM."""
    gateway.close()
    terminate(process.pid, timeout=30.0)


def _serve(server: Any) -> None:
    """Serve until the server is stopped or its JVM ends."""
    with suppress(Py4JError):
        server.serve()

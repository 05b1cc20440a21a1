"""A test-only Python plugin that misbehaves on request, as tests/plugins/hostile
does in Rust: `spec.mode` of a `Hostile` picks what its reconcile tries. Modes
that probe the sandbox (env, file, socket, clock) report what they saw in one
Event, so the host's tests can check a Python plugin gets what a Rust one gets.
"""

import json
import os
import time

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports.controller import Action_Event, Event, EventType, GroupVersionKind, PluginManifest, ReconcileError


def report(message: str) -> list:
    return [Action_Event(Event(EventType.NORMAL, "Probe", message))]


def env(now: int) -> str:
    return "denied: no environment" if not os.environ else f"ESCAPED: {len(os.environ)} env vars"


def file(now: int) -> str:
    try:
        with open("/etc/passwd") as f:
            return f"ESCAPED: read {len(f.read())} bytes"
    except OSError as e:
        return f"denied: {e}"


def socket_(now: int) -> str:
    try:
        import socket

        socket.create_connection(("127.0.0.1", 1), timeout=1).close()
        return "ESCAPED: connected"
    except Exception as e:  # ImportError too: no socket module is also a denial
        return f"denied: {type(e).__name__}: {e}"


def clock(now: int) -> str:
    return f"clock={time.time_ns() // 1_000_000} now={now}"


def loop(now: int) -> str:
    while True:
        pass


def memory(now: int) -> str:
    hoard = []
    while True:
        hoard.append(bytearray(1 << 20))


def error(now: int) -> str:
    raise Err(ReconcileError("Refused", "asked to fail", False))


def exception(now: int) -> str:
    raise ValueError("probe raised on purpose")


MODES = {"env": env, "file": file, "socket": socket_, "clock": clock, "loop": loop, "memory": memory, "error": error, "exception": exception}


class Controller(exports.Controller):
    def manifest(self) -> PluginManifest:
        return PluginManifest("probe-py", "0.1.0", GroupVersionKind("test.operator.dev", "v1", "Hostile"), [], [], None)

    def reconcile(self, parent: str, children: list[str], now: int) -> list:
        mode = json.loads(parent)["spec"]["mode"]
        return report(MODES[mode](now))

    def validate(self, object: str, old: str | None) -> list:
        return []

    def default(self, object: str) -> str:
        return object

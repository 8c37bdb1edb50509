"""What can go wrong, as one line and an exit status: 1 for the service or the
connection, 2 for the command line or the local configuration."""

from __future__ import annotations

SERVICE = 1
USAGE = 2

CONNECT_HINT = ("start it with `make run`, or point --endpoint or DMQ_ENDPOINT at it "
                "(e.g. DMQ_ENDPOINT=http://127.0.0.1:PORT)")


class CliError(Exception):
    """An error to print as one line, with the exit status to end with. `code` is the
    service's error code when the service answered; `admin` tells an admin API call."""

    label = "error"

    def __init__(self, message: str, status: int = SERVICE, code: str | None = None,
                 admin: bool = False) -> None:
        super().__init__(message)
        self.message = " ".join(message.split())  # one line, whatever the server sent
        self.status = status
        self.code = code
        self.admin = admin


class Cancelled(CliError):
    """The user did not confirm: nothing was done."""

    label = "not confirmed"


def unreachable(endpoint: str, reason: object, hint: str = CONNECT_HINT) -> CliError:
    """Nothing answered at the endpoint."""
    return CliError(f"cannot reach DMQ at {endpoint} ({reason}): {hint}")


def from_botocore(exc: Exception, endpoint: str, hint: str = CONNECT_HINT) -> CliError:
    """An SDK error as one line: the SQS error code and message, or what the SDK says."""
    from botocore.exceptions import (  # loaded once something failed: usage errors are quick
        BotoCoreError,
        ClientError,
        NoCredentialsError,
        NoRegionError,
        ParamValidationError,
        PartialCredentialsError,
        ProfileNotFound,
        ReadTimeoutError,
    )
    from botocore.exceptions import ConnectionError as NoConnection

    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = error.get("Code") or "Error"
        message = error.get("Message") or str(exc)
        return CliError(f"{code}: {message}", code=code)
    if isinstance(exc, NoConnection | ReadTimeoutError):
        return unreachable(endpoint, exc, hint)
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

"""What the client raises: the service's refusals, with their code."""

from __future__ import annotations


class ClientError(Exception):
    """Base of the client's errors."""


class ApiError(ClientError):
    """The service refused a request: its HTTP status, its error code and its message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message


class ServiceUnavailable(ClientError):
    """The service could not be reached, or answered with a server error."""

"""Kafka error codes and the protocol-level exceptions of this package.

``ErrorCode`` is kio's table (generated from Kafka's ``Errors.java``): every Kafka number with its
``retriable`` flag. We re-export it rather than keep a second copy that could drift.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = [
    "ErrorCode",
    "FrameTooLarge",
    "InvalidRequest",
    "LengthOutOfBounds",
    "MalformedFrame",
    "ProtocolError",
    "UnsupportedApi",
]


class ProtocolError(Exception):
    """The remote peer broke the wire protocol. The connection that sent it is at fault, nobody else."""


class FrameTooLarge(ProtocolError):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class MalformedFrame(ProtocolError):
    """A frame whose header or body could not be decoded.

    ``correlation_id`` is set when the first eight header bytes (api key, version, correlation id) were readable;
    ``api_key``/``api_version`` likewise. Kafka closes the connection on a malformed request; these are for logging.
    """

    def __init__(
        self,
        message: str,
        correlation_id: int | None = None,
        api_key: int | None = None,
        api_version: int | None = None,
    ) -> None:
        super().__init__(message)
        self.correlation_id = correlation_id
        self.api_key = api_key
        self.api_version = api_version


class LengthOutOfBounds(MalformedFrame):
    """A declared length (array count, string or bytes length, varint, tagged field) runs past the end of the frame,
    or is negative where only -1 (null) may be. Kafka closes the connection on such a request."""


class InvalidRequest(MalformedFrame):
    """A null where the request schema does not allow one (a non-nullable array or string). The request is
    well-framed, so it is answered with INVALID_REQUEST (42) where the response has a top-level error code
    (``protocol.responses.invalid_request_frame``); otherwise the connection is closed."""


class UnsupportedApi(ProtocolError):
    """An api key or version this server does not serve. Carries what is needed to answer it.

    ``client_id`` and ``body`` (the decoded kio request) are filled in when the codec could still decode the request
    (kio knows that api and version), so an error response can name the request's groups and partitions;
    ``protocol.responses.unsupported_response_frame`` builds the answer, or says the connection must be closed.
    """

    def __init__(
        self,
        api_key: int,
        api_version: int,
        correlation_id: int,
        client_id: str | None = None,
        body: object | None = None,
    ) -> None:
        super().__init__(f"unsupported api key {api_key} version {api_version}")
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.body = body

"""The Kafka listener: one asyncio server, many connections, requests answered strictly in order per connection.

Per connection a reader decodes frames and dispatches each request at once - so a parked JoinGroup/SyncGroup/Fetch
does not stop the connection from reading (pipelining) nor any other connection from being served - and queues one
*slot* per request: the encoded response, or a task that will produce it. A writer drains the slots in request
order, waiting on the head one when it is still parked. At ``max_inflight`` queued slots the reader stops reading
until the writer catches up (TCP back-pressure on a client that pipelines without reading).

Faults: a codec error is the peer's fault. An unsupported ApiVersions version gets the v0 error-35 frame and the
connection stays open; another unsupported api/version gets the API's error response when one can be encoded,
otherwise the connection is closed after the already-encoded responses before it (parked ones are dropped, as on
any close); a malformed or oversized frame is logged and that connection closed. A handler exception is an
internal error: ``coordinator.api.errors.error_body`` turns it into the API's UNKNOWN_SERVER_ERROR response. Nothing
that happens on one connection can stop the server or another connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections import deque
from collections.abc import Coroutine
from typing import Any

from coordinator.api import HANDLERS, RequestContext, Services
from coordinator.api.errors import error_body
from protocol.codec import Request, decode_request, encode_response
from protocol.errors import MalformedFrame, ProtocolError, UnsupportedApi
from protocol.framing import FrameDecoder
from protocol.responses import unsupported_response_frame

log = logging.getLogger("coordinator.server")

DEFAULT_MAX_FRAME_SIZE = 104_857_600  # Kafka's socket.request.max.bytes
DEFAULT_MAX_INFLIGHT = 1000
_READ_SIZE = 256 * 1024
_CLOSE = None  # a slot that means: everything before me is written, now close the connection

Slot = bytes | None | asyncio.Task[bytes | None]


class Connection:
    def __init__(
        self,
        server: KafkaServer,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self.server = server
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer)
        # Kafka reports member hosts as InetAddress.toString() of the peer: "/1.2.3.4".
        self.client_host = f"/{peer[0]}" if isinstance(peer, tuple) and peer else "/unknown"
        self.decoder = FrameDecoder(server.max_frame_size)
        self.slots: deque[Slot] = deque()
        self.slot_added = asyncio.Event()
        self.space = asyncio.Event()
        self.space.set()
        self.closing = False
        self.peak_inflight = 0  # most requests queued at once (observability; bounded by max_inflight)

    # ------------------------------------------------------------------------------------------------------ reading

    async def run(self) -> None:
        writer_task = asyncio.create_task(self._write_loop(), name=f"kafka-writer {self.peer}")
        cancelled = False
        try:
            await self._read_loop()
        except (ConnectionError, OSError) as exc:
            log.debug("connection %s read error: %s", self.peer, exc)
        except asyncio.CancelledError:
            cancelled = True
            raise
        finally:
            # The peer is gone or at fault, or the server stops: answers already encoded are still written, parked
            # requests are dropped (their tasks cancelled; the core's later answer goes nowhere), then close.
            self.closing = True
            self._abandon_parked()
            self._push(_CLOSE)
            if cancelled:
                writer_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await writer_task

    async def _read_loop(self) -> None:
        while not self.closing:
            data = await self.reader.read(_READ_SIZE)
            if not data:
                return  # EOF
            try:
                frames = self.decoder.feed(data)
            except ProtocolError as exc:
                log.warning("closing connection %s: %s", self.peer, exc)
                return
            for frame in frames:
                # At the in-flight limit, wait for the writer before dispatching more: the unread bytes stay in the
                # socket buffers and TCP flow control slows the client down.
                while len(self.slots) >= self.server.max_inflight and not self.closing:
                    self.space.clear()
                    await self.space.wait()
                if self.closing or not self._dispatch(frame):
                    return

    def _dispatch(self, frame: bytes) -> bool:
        """Queue the answer to one frame. False means: stop reading; the answers already encoded are written, parked
        ones dropped, then the connection is closed."""
        try:
            request = decode_request(frame)
        except UnsupportedApi as exc:
            return self._unsupported(exc)
        except MalformedFrame as exc:
            log.warning("closing connection %s: %s", self.peer, exc)
            return False
        except Exception:  # a codec bug must not take the server down either
            log.exception("closing connection %s: undecodable frame", self.peer)
            return False
        self._push(self.server.handle(request, self.client_host))
        return True

    def _unsupported(self, exc: UnsupportedApi) -> bool:
        try:
            frame = unsupported_response_frame(exc)
        except Exception:
            log.exception("connection %s: cannot answer %s", self.peer, exc)
            frame = None
        if frame is None:
            log.warning("closing connection %s: %s (no encodable error response)", self.peer, exc)
            return False
        log.info("connection %s: %s", self.peer, exc)
        self._push(frame)
        return True

    def _push(self, slot: Slot) -> None:
        self.slots.append(slot)
        self.peak_inflight = max(self.peak_inflight, len(self.slots))
        self.slot_added.set()

    # ------------------------------------------------------------------------------------------------------ writing

    async def _write_loop(self) -> None:
        writer = self.writer
        try:
            while True:
                if not self.slots:
                    self.slot_added.clear()
                    await self.slot_added.wait()
                    continue
                head = self.slots[0]
                if isinstance(head, asyncio.Task):
                    if not head.done():
                        await asyncio.wait((head,))
                    data = head.result() if not head.cancelled() else None
                else:
                    data = head
                self.slots.popleft()
                if len(self.slots) < self.server.max_inflight:
                    self.space.set()
                if data is None:
                    return
                writer.write(data)
                if not self.slots or isinstance(self.slots[0], asyncio.Task):
                    await writer.drain()
        except (ConnectionError, OSError) as exc:
            log.debug("connection %s write error: %s", self.peer, exc)
        finally:
            self.closing = True
            self.space.set()
            writer.close()
            # The transport closes the socket on a later loop iteration: wait for it, so a server that stops
            # right after really has closed its connections.
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await writer.wait_closed()

    def _abandon_parked(self) -> None:
        for slot in self.slots:
            if isinstance(slot, asyncio.Task):
                slot.cancel()


class KafkaServer:
    def __init__(
        self,
        services: Services,
        *,
        host: str = "127.0.0.1",
        port: int = 9092,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        max_inflight: int = DEFAULT_MAX_INFLIGHT,
    ) -> None:
        self.services = services
        self.host = host
        self.port = port
        self.max_frame_size = max_frame_size
        self.max_inflight = max_inflight
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._transports: set[asyncio.BaseTransport] = set()
        self.open_connections: set[Connection] = set()

    @property
    def bound_port(self) -> int:
        if self._server is None or not self._server.sockets:
            return self.port
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._new_protocol, self.host or None, self.port, reuse_address=True)
        log.info("kafka listener started host=%s port=%d", self.host, self.bound_port)

    async def stop(self) -> None:
        """Stop accepting, then close every connection (parked requests are dropped with them)."""
        self.services.closing = True
        if self._server is not None:
            self._server.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        # A connection accepted just before close() may not have its handler task yet: close its transport.
        for transport in list(self._transports):
            abort = getattr(transport, "abort", None)  # uvloop's transports abort too, without the asyncio base
            if abort is not None:
                abort()
            else:
                transport.close()
        self._transports.clear()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        log.info("kafka listener stopped")

    @property
    def connections(self) -> int:
        return len(self._tasks)

    def _new_protocol(self) -> asyncio.StreamReaderProtocol:
        return _TrackedProtocol(asyncio.StreamReader(limit=_READ_SIZE, loop=asyncio.get_running_loop()), self)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.services.closing:
            writer.close()
            return
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)  # type: ignore[arg-type]
        connection = Connection(self, reader, writer)
        self.open_connections.add(connection)
        log.debug("connection opened %s", connection.peer)
        try:
            await connection.run()
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("connection %s failed", connection.peer)
        finally:
            self._tasks.discard(task)  # type: ignore[arg-type]
            self.open_connections.discard(connection)
            log.debug("connection closed %s", connection.peer)

    # ---------------------------------------------------------------------------------------------------- dispatch

    def handle(self, request: Request, client_host: str) -> Slot:
        """The slot answering ``request``: the encoded frame, or a task producing it for a parked request."""
        header = request.header
        ctx = RequestContext(
            header.api_key, header.api_version, header.correlation_id, header.client_id or "", client_host
        )
        observe = self.services.observe_request
        started = time.perf_counter() if observe is not None else 0.0
        try:
            result = HANDLERS[header.api_key](self.services, ctx, request.body)
        except Exception as exc:
            return self._error_frame(request, ctx, exc)
        if asyncio.iscoroutine(result):
            task = asyncio.get_running_loop().create_task(self._finish(request, ctx, result))
            if observe is not None:
                key = header.api_key
                task.add_done_callback(lambda _t: observe(key, time.perf_counter() - started))
            return task
        frame = self._encode(request, ctx, result)
        if observe is not None:
            observe(header.api_key, time.perf_counter() - started)
        return frame

    async def _finish(self, request: Request, ctx: RequestContext, result: Coroutine[Any, Any, Any]) -> bytes | None:
        try:
            body = await result
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return self._error_frame(request, ctx, exc)
        return self._encode(request, ctx, body)

    def _encode(self, request: Request, ctx: RequestContext, body: Any) -> bytes | None:
        try:
            return encode_response(request.header, body)
        except Exception as exc:
            return self._error_frame(request, ctx, exc)

    def _error_frame(self, request: Request, ctx: RequestContext, exc: BaseException) -> bytes | None:
        """The API's error response, or None (close the connection) if even that cannot be built."""
        try:
            return encode_response(request.header, error_body(ctx, exc, request.body))
        except Exception:
            log.exception("cannot encode an error response api_key=%d api_version=%d", ctx.api_key, ctx.api_version)
            return None


class _TrackedProtocol(asyncio.StreamReaderProtocol):
    """asyncio's stream protocol, plus the server's record of open transports (so ``stop`` can close them all)."""

    def __init__(self, reader: asyncio.StreamReader, server: KafkaServer) -> None:
        super().__init__(reader, server._accept)
        self._kafka_server = server
        self._transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        self._kafka_server._transports.add(transport)
        super().connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._transport is not None:
            self._kafka_server._transports.discard(self._transport)
        super().connection_lost(exc)

"""The Kafka listener: one asyncio server, many connections, requests answered strictly in order per connection.

Per connection (an ``asyncio.Protocol``: no task or stream objects) every complete frame that arrives is decoded
and dispatched at once - so a parked JoinGroup/SyncGroup/Fetch does not stop the connection from reading
(pipelining) nor any other connection from being served - and one *slot* per request is queued: the encoded
response, or a task that will produce it. Slots leave in request order: whatever is ready at the head of the queue
is written in one ``transport.write`` (one send for a batch of pipelined requests), a parked head holds the ones
behind it until its task is done. At ``max_inflight`` queued slots, or while the transport's write buffer is full,
reading is paused until the queue drains (TCP back-pressure on a client that pipelines without reading).

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
from collections import deque
from collections.abc import Coroutine
from time import perf_counter
from typing import Any

from coordinator.api import HANDLERS, RequestContext, Services
from coordinator.api._util import Pending
from coordinator.api.errors import error_body
from protocol.apis import ApiKey
from protocol.codec import Request, decode_request, encode_response, heartbeat_response_frame
from protocol.errors import MalformedFrame, ProtocolError, UnsupportedApi
from protocol.framing import FrameDecoder
from protocol.responses import unsupported_response_frame

log = logging.getLogger("coordinator.server")

DEFAULT_MAX_FRAME_SIZE = 104_857_600  # Kafka's socket.request.max.bytes
DEFAULT_MAX_INFLIGHT = 1000
_HEARTBEAT = int(ApiKey.HEARTBEAT)
HEARTBEAT_TIMING_SAMPLE = 64  # one heartbeat in 64 is timed for kgc_request_seconds (all are counted)
_CLOSE = None  # a slot that means: everything before me is written, now close the connection


class Parked:
    """A queued answer that is not ready yet: a parked JoinGroup/SyncGroup, completed from the core's Deferred
    callback, or a delayed Fetch, completed by its task. ``frame`` None closes the connection, like a None slot."""

    __slots__ = ("abandoned", "connection", "frame", "ready", "task")

    def __init__(self) -> None:
        self.ready = False
        self.abandoned = False
        self.frame: bytes | None = None
        self.connection: Connection | None = None
        self.task: asyncio.Task[bytes | None] | None = None

    def complete(self, frame: bytes | None) -> None:
        if self.ready or self.abandoned:
            return
        self.ready = True
        self.frame = frame
        if self.connection is not None:
            self.connection._on_parked_done()

    def abandon(self) -> None:
        """The connection is gone: the answer is not wanted (nor encoded) any more."""
        self.abandoned = True
        self.connection = None
        if self.task is not None:
            self.task.cancel()


Slot = bytes | None | Parked


class Connection(asyncio.Protocol):
    """One client connection, driven by the transport's callbacks (no task per connection, no stream objects).

    ``data_received`` decodes and dispatches every complete frame at once and writes every answer that is ready in
    one ``transport.write``; a parked request's task writes its answer (and any ready ones behind it) when it is
    done. At ``max_inflight`` queued slots, or while the transport's write buffer is full (``pause_writing``), the
    remaining frames wait in ``backlog`` and reading is paused: TCP flow control slows the client down.
    """

    def __init__(self, server: KafkaServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.client_host = "/unknown"
        self.decoder = FrameDecoder(server.max_frame_size)
        self.slots: deque[Slot] = deque()
        self.backlog: deque[bytes] = deque()  # decoded frames not dispatched yet (at the in-flight limit)
        self.closing = False  # no more requests are dispatched; the connection closes after the ready answers
        self.reading_paused = False
        self.writing_paused = False
        self.peak_inflight = 0  # most requests queued at once (observability; bounded by max_inflight)
        self._ready_soon = False  # queued in KafkaServer._ready: flush (and dispatch the backlog) soon
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    # ------------------------------------------------------------------------------------------------- transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports do not subclass asyncio's
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer)
        # Kafka reports member hosts as InetAddress.toString() of the peer: "/1.2.3.4".
        self.client_host = f"/{peer[0]}" if isinstance(peer, tuple) and peer else "/unknown"
        if self.server.services.closing:
            transport.close()
            self.closing = True
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.open_connections.add(self)
        log.debug("connection opened %s", self.peer)

    def data_received(self, data: bytes) -> None:
        if self.closing:
            return
        try:
            frames = self.decoder.feed(data)
        except ProtocolError as exc:
            log.warning("closing connection %s: %s", self.peer, exc)
            self._finish()
            return
        if frames:
            self.backlog.extend(frames)
            self._process()

    def eof_received(self) -> bool:
        # The peer will send nothing more: answer what is ready, drop parked requests, then close.
        self._finish()
        return True  # keep the transport open until those answers are written

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        self._flush()
        self._process()

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:
            log.debug("connection %s lost: %s", self.peer, exc)
        self.closing = True
        self.backlog.clear()
        self._abandon_parked()
        self.server.open_connections.discard(self)
        if not self.closed.done():
            self.closed.set_result(None)
        log.debug("connection closed %s", self.peer)

    # ---------------------------------------------------------------------------------------------------- reading

    def _process(self) -> None:
        """Dispatch backlog frames while there is room, writing what is ready; pause reading while frames wait."""
        backlog = self.backlog
        slots = self.slots
        limit = self.server.max_inflight
        while True:
            while backlog and not self.closing and len(slots) < limit and not self.writing_paused:
                if not self._dispatch(backlog.popleft()):
                    self._finish()
                    return
            self._flush()
            if not backlog or self.closing or self.writing_paused or len(slots) >= limit:
                break
        transport = self.transport
        if transport is None or self.closing:
            return
        if backlog:
            if not self.reading_paused:
                transport.pause_reading()
                self.reading_paused = True
        elif self.reading_paused:
            transport.resume_reading()
            self.reading_paused = False

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
        if len(self.slots) > self.peak_inflight:
            self.peak_inflight = len(self.slots)
        if isinstance(slot, Parked) and not slot.ready:
            slot.connection = self

    def _on_parked_done(self) -> None:
        """A parked answer is ready. Called from inside the core (a Deferred being resolved), so nothing is done
        here: the connection is flushed, and frames waiting in the backlog dispatched, once at the end of this loop
        iteration (``KafkaServer._flush_ready``). A group commit completes hundreds of requests at once; their answers
        leave in one write per connection, not one send each (the clients' next requests then come back batched too).
        """
        if not self._ready_soon:
            self._ready_soon = True
            self.server._schedule_flush(self)

    def _flush_ready(self) -> None:
        self._ready_soon = False
        if self.backlog:
            self._process()  # writes what is ready, then dispatches the waiting frames
        else:
            self._flush()

    def _finish(self) -> None:
        """Stop reading: answers already encoded are written, parked requests dropped, then the connection closes."""
        if self.closing:
            return
        self.closing = True
        self.backlog.clear()
        self._abandon_parked()
        self._push(_CLOSE)
        self._flush()

    # ---------------------------------------------------------------------------------------------------- writing

    def _flush(self) -> None:
        """Write every answer that is ready at the head of the queue, in order, in one write."""
        transport = self.transport
        if self.writing_paused or transport is None or transport.is_closing():
            return
        slots = self.slots
        chunks: list[bytes] = []
        close = False
        while slots:
            head = slots[0]
            if isinstance(head, Parked):
                if not head.ready:
                    break
                data = head.frame
            else:
                data = head
            slots.popleft()
            if data is None:
                close = True
                break
            chunks.append(data)
        if chunks:
            transport.write(chunks[0] if len(chunks) == 1 else b"".join(chunks))
        if close:
            self.closing = True
            slots.clear()
            transport.close()  # after the buffered answers are sent

    def _abandon_parked(self) -> None:
        for slot in self.slots:
            if isinstance(slot, Parked):
                slot.abandon()

    def abort(self) -> None:
        """Server stop: close at once, parked requests dropped and unwritten answers too."""
        self.closing = True
        self.backlog.clear()
        self._abandon_parked()
        self.slots.clear()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()


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
        self.open_connections: set[Connection] = set()
        self._ready: list[Connection] = []  # connections with parked answers that became ready (see _flush_ready)
        self.untimed_heartbeats = 0  # answered since the last timed one (see handle)

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
        connections = list(self.open_connections)
        for connection in connections:
            connection.abort()
        if connections:
            await asyncio.wait([c.closed for c in connections], timeout=5)
            for connection in connections:
                if not connection.closed.done() and connection.transport is not None:
                    connection.transport.abort()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        log.info("kafka listener stopped")

    @property
    def connections(self) -> int:
        return len(self.open_connections)

    def _new_protocol(self) -> Connection:
        return Connection(self)

    def _schedule_flush(self, connection: Connection) -> None:
        if not self._ready:
            asyncio.get_running_loop().call_soon(self._flush_ready)
        self._ready.append(connection)

    def _flush_ready(self) -> None:
        ready, self._ready = self._ready, []
        for connection in ready:
            connection._flush_ready()

    # ---------------------------------------------------------------------------------------------------- dispatch

    def handle(self, request: Request, client_host: str) -> Slot:
        """The slot answering ``request``: the encoded frame, or a ``Parked`` answer completed later.

        Heartbeat, the most frequent request, is answered right here: straight to the core and a packed answer,
        without the request context, adapter and kio response object of the generic path (and without a call of its
        own). Same answer as ``coordinator.api.membership.handle_heartbeat`` + ``encode_response``
        (tests/server/test_heartbeat_path.py). Every heartbeat is counted, one in ``HEARTBEAT_TIMING_SAMPLE`` is
        timed: the two clock reads and the histogram update cost about as much as the core's part of a heartbeat,
        and a heartbeat is answered at once, so its latency is the same handful of microseconds every time.
        ``untimed_heartbeats`` holds the ones since the last timed one (added to ``kgc_requests_total`` at scrape
        time)."""
        header, body = request
        key = header.api_key
        if key == _HEARTBEAT:
            untimed = self.untimed_heartbeats + 1
            if untimed < HEARTBEAT_TIMING_SAMPLE:
                self.untimed_heartbeats = untimed
                started = 0.0
            else:
                started = perf_counter()
            version = header.api_version
            frame: bytes | None
            try:
                error = self.services.coordinator.heartbeat_fields(
                    body.group_id, body.generation_id, body.member_id, body.group_instance_id if version >= 3 else None
                )
                frame = heartbeat_response_frame(version, header.correlation_id, error)
            except Exception as exc:
                ctx = RequestContext(key, version, header.correlation_id, header.client_id or "", client_host)
                frame = self._error_frame(request, ctx, exc)
            if started:
                self._observe_heartbeats(started, untimed)
            return frame
        ctx = RequestContext(key, header.api_version, header.correlation_id, header.client_id or "", client_host)
        observe = self.services.observe_request
        started = perf_counter() if observe is not None else 0.0
        try:
            result = HANDLERS[key](self.services, ctx, body)
        except Exception as exc:
            return self._error_frame(request, ctx, exc)
        # A kio body (has __api_key__) is encoded at once, a finished frame (bytes) written as it is; anything else
        # is a parked answer.
        if result.__class__ is bytes:
            if observe is not None:
                observe(key, perf_counter() - started)
            return result  # type: ignore[no-any-return]
        if getattr(result.__class__, "__api_key__", None) is None:
            if isinstance(result, Pending):
                return self._park(request, ctx, result, started)
            if asyncio.iscoroutine(result):
                return self._park_task(request, ctx, result, started)
        try:
            frame = encode_response(header, result)
        except Exception as exc:
            frame = self._error_frame(request, ctx, exc)
        if observe is not None:
            observe(key, perf_counter() - started)
        return frame

    def _observe_heartbeats(self, started: float, answered: int) -> None:
        """The timed heartbeat: ``answered`` heartbeats since the last timed one, this one included."""
        self.untimed_heartbeats = 0
        observe = self.services.observe_request
        if observe is not None:
            observe(_HEARTBEAT, perf_counter() - started, 0, answered)

    def _park(self, request: Request, ctx: RequestContext, pending: Pending[Any, Any], started: float) -> Parked:
        """Answer when the core resolves the Deferred: build and encode in its callback, no task."""
        parked = Parked()
        observe = self.services.observe_request

        def ready(value: Any) -> None:
            if parked.abandoned:
                return
            try:
                frame = self._encode(request, ctx, pending.fn(value))
            except Exception as exc:
                frame = self._error_frame(request, ctx, exc)
            if observe is not None:
                observe(ctx.api_key, perf_counter() - started)
            parked.complete(frame)

        pending.deferred.add_callback(ready)
        return parked

    def _park_task(
        self, request: Request, ctx: RequestContext, result: Coroutine[Any, Any, Any], started: float
    ) -> Parked:
        """An answer produced by a coroutine (a Fetch waiting max_wait_ms): run it as a task."""
        parked = Parked()
        parked.task = task = asyncio.get_running_loop().create_task(self._finish(request, ctx, result))
        observe = self.services.observe_request

        def done(t: asyncio.Task[bytes | None]) -> None:
            if observe is not None:
                observe(ctx.api_key, perf_counter() - started)
            if not t.cancelled():
                parked.complete(t.result())

        task.add_done_callback(done)
        return parked

    async def _finish(self, request: Request, ctx: RequestContext, result: Coroutine[Any, Any, Any]) -> bytes | None:
        try:
            body = await result
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return self._error_frame(request, ctx, exc)
        return self._encode(request, ctx, body)

    def _encode(self, request: Request, ctx: RequestContext, body: Any) -> bytes | None:
        if body.__class__ is bytes:  # an adapter's finished frame
            return body  # type: ignore[no-any-return]
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

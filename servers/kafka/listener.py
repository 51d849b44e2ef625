"""The Kafka listener: one asyncio server, many connections, requests answered strictly in order per connection.

Per connection (an ``asyncio.Protocol``: no task or stream objects) every complete frame that arrives is decoded
and dispatched at once - so a deferred JoinGroup/SyncGroup/Fetch does not stop the connection from reading
(pipelining) nor any other connection from being served - and one *slot* per request is queued: the encoded
response, or a task that will produce it. Slots leave in request order: whatever is ready at the head of the queue
is written in one ``transport.write`` (one send for a batch of pipelined requests), a deferred head holds the ones
behind it until its task is done. At ``max_inflight`` queued slots, or while the transport's write buffer is full,
reading is paused until the queue drains (TCP back-pressure on a client that pipelines without reading).

Fairness: one connection dispatches at most ``FRAMES_PER_TURN`` frames per loop turn; the rest wait in its backlog
(reading paused) and are taken up again from a ``call_soon``, after the loop has polled the other connections.

Limits (Kafka's names; ``docs/robustness.md``): ``socket.request.max.bytes`` (one frame), ``queued.max.request.bytes``
(bytes of requests read but not dispatched, summed over all connections: ``RequestMemory``; when it is used up, a
connection holding more than ``SMALL_PARTIAL`` bytes of an unfinished frame is not read until memory is freed, but
one such connection at a time may finish its frame, so frames of any allowed size always get through),
``connections.max.idle.ms`` (no request received and no answer written for that long: closed; a cheap sweep over a
heap ordered by due time), ``max.connections`` / ``listener.name.<name>.max.connections`` (the listener stops
accepting until a slot frees) and ``max.connections.per.ip`` / ``max.connections.per.ip.overrides`` (a connection
over it is closed as soon as it is accepted), counted over all listeners by ``servers.kafka.quotas``, and
``max_inflight`` (queued answers per connection). The listener accepts on its own sockets (``_accept``), not through
``loop.create_server``, so that it can stop accepting: asyncio's servers cannot pause.

Security (``docs/listeners.md``): a ``KafkaServer`` is one listener. With a ``TlsContext`` (SSL, SASL_SSL) asyncio
does the TLS handshake before ``connection_made``, where an SSL connection takes its client certificate's principal;
with a ``SaslConfig`` (SASL_*) each connection holds a ``servers.kafka.sasl.SaslState``, asked before every request
(only ApiVersions and the SASL APIs until it authenticates; SaslHandshake/SaslAuthenticate are answered by it and
counted, not timed, in ``observe_request``).

Closing on time: a connection the daemon decides to close (malformed frame, unsupported request without an error
response, client EOF, idle) is closed at once: the answers ready before the first deferred one are written, every
deferred request is dropped (its member is treated as Kafka treats a vanished client: its session times out).

Faults: a codec error is the peer's fault. An unsupported ApiVersions version gets the v0 error-35 frame and the
connection stays open; another unsupported api/version gets the API's error response when one can be encoded,
otherwise the connection is closed after the already-encoded responses before it (deferred ones are dropped, as on
any close); a malformed or oversized frame is logged and that connection closed. A handler exception is an
internal error: ``servers.kafka.errors.error_body`` turns it into the API's UNKNOWN_SERVER_ERROR response. Nothing
that happens on one connection can stop the server or another connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import heapq
import itertools
import logging
import resource
import socket
import struct
from collections import deque
from collections.abc import Coroutine
from time import monotonic as _now
from time import perf_counter
from typing import Any

from protocol.apis import SUPPORTED_VERSIONS, ApiKey
from protocol.codec import (
    HEARTBEAT_V4_FRAME,
    Request,
    RequestHeader,
    decode_request,
    encode_response,
    heartbeat_response_frame,
    request_body_reader,
)
from protocol.errors import ErrorCode, InvalidRequest, MalformedFrame, ProtocolError, UnsupportedApi
from protocol.framing import FrameDecoder
from protocol.responses import invalid_request_frame, unsupported_response_frame
from runtime.metrics import ConnectionStats
from security.acls import AclOperation, ResourceType
from servers.kafka import HANDLERS, Node, RequestContext, Services
from servers.kafka._util import DeferredAnswer
from servers.kafka.audit import refused, refused_request
from servers.kafka.errors import error_body
from servers.kafka.quotas import UNLIMITED, ConnectionQuotas, ListenerCount
from servers.kafka.sasl import MAX_RECEIVE_BEFORE_AUTH, SaslConfig, SaslState
from servers.kafka.tls import TlsContext

log = logging.getLogger("servers.kafka.listener")

DEFAULT_MAX_FRAME_SIZE = 104_857_600  # Kafka's socket.request.max.bytes
DEFAULT_MAX_INFLIGHT = 100  # Kafka itself reads one request at a time per connection; clients pipeline up to 5
DEFAULT_QUEUED_MAX_REQUEST_BYTES = 104_857_600  # queued.max.request.bytes (Kafka: unlimited)
DEFAULT_CONNECTIONS_MAX_IDLE_MS = 600_000  # connections.max.idle.ms (Kafka's default)
UNLIMITED_CONNECTIONS = UNLIMITED  # Kafka's default for max.connections and max.connections.per.ip
FRAMES_PER_TURN = 64  # frames one connection dispatches before the others get their turn
SMALL_PARTIAL = 65_536  # bytes of an unfinished frame a connection may hold while queued.max.request.bytes is used up
LISTEN_BACKLOG = 1024
FD_RESERVE = 128  # file descriptors kept for the database, the HTTP API and logs when capping max.connections
_HEARTBEAT = int(ApiKey.HEARTBEAT)
_NO_ERROR = ErrorCode.none
LARGE_WRITE = 65_536  # an answer this large is written on its own (see Connection._flush)
HEARTBEAT_TIMING_SAMPLE = 64  # one heartbeat in 64 is timed for kgc_request_seconds (all are counted)
_HOT_PREFIX = struct.Struct(">ihhih")  # frame size, api key, api version, correlation id, client id length
# The v4 answer's pack, bound once: Python 3.11 compiles ``name.method(...)`` on an imported name as an attribute
# load (it takes the name for a module), which builds a bound method per call.
_PACK_HEARTBEAT_V4 = HEARTBEAT_V4_FRAME.pack


class DeferredSlot:
    """A connection's queued answer that is not ready yet: an adapter's ``DeferredAnswer`` (JoinGroup, SyncGroup, a
    commit waiting for its durable write), completed from the core's ``Deferred`` callback, or a delayed Fetch,
    completed by its task. ``frame`` None closes the connection, like a None slot."""

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
            self.connection._on_deferred_done()

    def abandon(self) -> None:
        """The connection is gone: the answer is not wanted (nor encoded) any more."""
        self.abandoned = True
        self.connection = None
        if self.task is not None:
            self.task.cancel()


Slot = bytes | None | DeferredSlot


class RequestMemory:
    """``queued.max.request.bytes``: bytes of requests read but not dispatched yet (partial frames in the decoders
    and complete frames in the backlogs), summed over all connections, like Kafka's request memory pool.

    When ``used`` reaches ``limit``, a connection holding more than ``SMALL_PARTIAL`` bytes of an unfinished frame
    is muted (not read) until memory is freed, as Kafka mutes a channel it cannot allocate a buffer for. One muted
    connection at a time holds the ``granted`` right to finish its frame over the limit (Kafka's pool lets one
    allocation overshoot too): without it, connections each holding part of a large frame would wait on each other
    for ever. Small requests (heartbeats, commits) are always read, so a slow sender of a huge frame holds up only
    the other huge frames. Peak: ``limit`` + one frame (``socket.request.max.bytes``) + per connection
    ``SMALL_PARTIAL`` and one socket read."""

    __slots__ = ("granted", "limit", "muted", "used")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.granted: Connection | None = None
        self.muted: deque[Connection] = deque()

    def wake(self) -> None:
        """Memory was freed: resume muted connections, oldest first, about as many as the free memory can take."""
        muted = self.muted
        budget = (self.limit - self.used) // (4 * SMALL_PARTIAL) + 1
        while muted and budget > 0 and (self.used < self.limit or self.granted is None):
            connection = muted.popleft()
            if connection.closing or not connection.memory_muted:
                continue
            budget -= 1
            connection.memory_muted = False
            if self.used >= self.limit:
                self.granted = connection
            connection._update_reading()


class Connection(asyncio.Protocol):
    """One client connection, driven by the transport's callbacks (no task per connection, no stream objects).

    ``data_received`` decodes and dispatches every complete frame at once and writes every answer that is ready in
    one ``transport.write``; a deferred request's task writes its answer (and any ready ones behind it) when it is
    done. At ``max_inflight`` queued slots, or while the transport's write buffer is full (``pause_writing``), the
    remaining frames wait in ``backlog`` and reading is paused: TCP flow control slows the client down.
    """

    def __init__(self, server: KafkaServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.client_host = "/unknown"
        self.principal = "User:ANONYMOUS"  # set once the connection authenticates (RequestContext.principal)
        self.joined: set[tuple[str, str]] = set()  # (group, member id) JoinGroup gave it (RequestContext.joined)
        # SASL listeners: the connection's authentication state (servers.kafka.sasl); None on PLAINTEXT and SSL
        self.sasl = SaslState(server.sasl) if server.sasl is not None else None
        self.decoder = FrameDecoder(
            server.max_frame_size if self.sasl is None else min(server.max_frame_size, MAX_RECEIVE_BEFORE_AUTH)
        )
        self.partial = False  # the decoder holds part of a frame (kept by data_received: no property call per read)
        # The last client id _hot_heartbeats read, as received and decoded (most connections send one id throughout)
        self.client_raw = b""
        self.client_id: str | None = None
        self.slots: deque[Slot] = deque()
        self.backlog: deque[bytes] = deque()  # decoded frames not dispatched yet (at the in-flight limit)
        self.closing = False  # no more requests are dispatched; the connection closes after the ready answers
        self.reading_paused = False
        self.writing_paused = False
        self.peak_inflight = 0  # most requests queued at once (observability; bounded by max_inflight)
        self._ready_soon = False  # queued in KafkaServer._ready: flush (and dispatch the backlog) soon
        self.held = 0  # bytes of this connection counted in server.memory (decoder buffer + backlog)
        self.memory_muted = False  # not read until queued.max.request.bytes has room (RequestMemory)
        self.ip: str | None = None  # counted in server.quotas from accept() to connection_lost (KafkaServer._accept)
        self.close_cause: str | None = None  # why the daemon closed it (kgc_connections_closed_total)
        # Last complete request received or answer written (connections.max.idle.ms), on the server's coarse clock.
        self.last_active = server.active_clock
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    # ------------------------------------------------------------------------------------------------- transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports do not subclass asyncio's
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer)
        # Kafka reports member hosts as InetAddress.toString() of the peer: "/1.2.3.4".
        self.client_host = f"/{peer[0]}" if isinstance(peer, tuple) and peer else "/unknown"
        if self.server.services.closing:
            self.close_cause = "shutdown"
            transport.close()
            self.closing = True
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.open_connections.add(self)
        self.server._track_idle(self)
        log.debug("connection opened %s", self.peer)
        tls = self.server.tls
        if tls is not None and self.sasl is None:  # SSL: the client certificate's principal (SASL_SSL: SASL's)
            try:
                self.principal = tls.principal(transport.get_extra_info("ssl_object"))
            except ValueError as exc:  # security.principals.NoMatchingRule: Kafka fails the authentication
                log.info("closing connection %s: %s", self.peer, exc, extra={"throttle": ("ssl-principal",)})
                self._finish("authentication")

    def data_received(self, data: bytes) -> None:
        if self.closing:
            return
        if not self.slots and not self.backlog and not self.partial and not self.writing_paused:
            sasl = self.sasl
            if sasl is None or (sasl.principal is not None and sasl.expires is None):
                done = self._hot_heartbeats(data)
                if done == len(data) or self.closing:
                    return
                data = data[done:]
        try:
            frames = self.decoder.feed(data)
            self.partial = self.decoder.buffered != 0
        except ProtocolError as exc:
            log.warning("closing connection %s: %s", self.peer, exc, extra={"throttle": ("malformed", self.ip)})
            self._finish("malformed")
            return
        if frames:
            self.last_active = self.server.active_clock
            self.backlog.extend(frames)
            self._process()
        else:
            self._account()

    def _hot_heartbeats(self, data: bytes) -> int:
        """The heartbeats at the start of ``data`` answered in place; how many bytes of ``data`` they were.

        The common read (nothing buffered, no answer queued, writing not paused) is one or more whole Heartbeat
        frames. Each is read where it lies: header fields by one ``struct``, the body by the same kio reader
        ``decode_request`` uses (``request_body_reader``), answered by ``KafkaServer.heartbeat``; the answers leave
        in one write. No frame copy, header tuple, ``Request``, slot or queue, which the general path builds for
        every request. The first frame that is anything else - another API, a version not served, a header with
        tags, a body the reader refuses or that runs past its frame, a frame not complete in ``data`` - and every
        byte after it go the general path (``data_received``), which decodes it and answers or refuses it as
        always; it is never half-handled here. At most ``FRAMES_PER_TURN`` frames: the rest wait in the backlog as
        in ``_process``. Same answers, order, metrics and idle accounting as the general path
        (tests/server/test_hot_heartbeats.py)."""
        server = self.server
        readers = server.heartbeat_readers
        max_size = server.max_frame_size
        end = len(data)
        pos = 0
        budget = FRAMES_PER_TURN
        out: list[bytes] = []
        services = server.services
        # The common heartbeat - ACLs off, not the one in HEARTBEAT_TIMING_SAMPLE that is timed, answered without
        # error - costs the core's call and a packed answer here, the clock read once for the whole read; the rest
        # goes through KafkaServer.heartbeat (the timed one, ACLs on) or KafkaServer.heartbeat_answer (refused).
        # ``left``: how many more are answered here before the timed one (heartbeat_sample, counted down; stored
        # back below and around the calls that count it themselves); 0 with ACLs on.
        fast = not services.authorizer.enabled
        left = HEARTBEAT_TIMING_SAMPLE - 1 - server.heartbeat_sample if fast else 0
        coordinator = services.coordinator
        beat = coordinator.heartbeat_at
        now = -1  # read at the first heartbeat of the read
        client_raw = self.client_raw
        while budget > 0 and end - pos >= 14:
            size, key, version, correlation_id, client_len = _HOT_PREFIX.unpack_from(data, pos)
            if key != _HEARTBEAT or size < 10 or size > max_size:
                break
            stop = pos + 4 + size
            entry = readers.get(version)
            if stop > end or entry is None:
                break
            start = pos + 14
            if client_len > 0:
                start += client_len
                if start > stop:
                    break
                raw = data[pos + 14 : start]
                if raw != client_raw:  # (decoded once per connection and id; comparing costs less than decoding)
                    try:
                        self.client_id = raw.decode()
                    except UnicodeDecodeError:
                        break
                    client_raw = self.client_raw = raw
            reader, flexible = entry
            if flexible:
                if start >= stop or data[start]:  # header tags: the general path skips them
                    break
                start += 1
            try:
                body, read_to = reader(data, start)
            except Exception:  # the general path reports it (or skips unknown tags)
                break
            if read_to > stop:
                break
            budget -= 1
            pos = stop
            if left > 0:
                if now < 0:
                    now = coordinator.monotonic_ms()
                error: int | Exception
                try:
                    error = beat(now, body.group_id, body.generation_id, body.member_id,
                                 body.group_instance_id if version >= 3 else None)  # fmt: skip
                except Exception as exc:
                    error = exc
                if error is _NO_ERROR:
                    left -= 1
                    if version >= 4:
                        out.append(_PACK_HEARTBEAT_V4(12, correlation_id, 0, 0, 0, 0))
                    else:
                        out.append(heartbeat_response_frame(version, correlation_id, 0))
                    continue
                untimed = server.heartbeat_sample = HEARTBEAT_TIMING_SAMPLE - left
                client_id = self.client_id if client_len > 0 else None if client_len < 0 else ""
                frame = server.heartbeat_answer(version, correlation_id, client_id, body, self.client_host,
                                                self.principal, error, 0.0, untimed)  # fmt: skip
            else:
                if fast:
                    server.heartbeat_sample = HEARTBEAT_TIMING_SAMPLE - 1
                client_id = self.client_id if client_len > 0 else None if client_len < 0 else ""
                frame = server.heartbeat(version, correlation_id, client_id, body, self.client_host, self.principal)
            if fast:
                left = HEARTBEAT_TIMING_SAMPLE - 1 - server.heartbeat_sample
            if frame is None:
                if out:
                    self.transport.write(b"".join(out))  # type: ignore[union-attr]
                self._finish("error")
                return end
            out.append(frame)
        if fast:
            server.heartbeat_sample = HEARTBEAT_TIMING_SAMPLE - 1 - left
        if out:
            self.last_active = server.active_clock
            answers = len(out)
            if answers == 1:
                if not self.peak_inflight:
                    self.peak_inflight = 1
                self.transport.write(out[0])  # type: ignore[union-attr]
            else:
                if answers > self.peak_inflight:
                    self.peak_inflight = answers
                self.transport.write(b"".join(out))  # type: ignore[union-attr]
            if not budget and pos < end:  # this connection had its turn: the rest waits (as in _process)
                self.backlog.extend(self.decoder.feed(data[pos:]))
                self.partial = self.decoder.buffered != 0
                if self.backlog and not self._ready_soon:
                    self._ready_soon = True
                    server._schedule_flush(self)
                self._account()
                self._update_reading()
                return end
        return pos

    def eof_received(self) -> bool:
        # The peer will send nothing more: Kafka closes such a connection at once. Answers ready now are written,
        # deferred requests dropped (see _finish).
        self._finish("eof")
        return True  # the transport is closed by _finish, after the ready answers

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
        self._abandon_deferred()
        self.slots.clear()
        self._release_memory()
        if self.ip is not None:
            if self.close_cause is None:
                self.close_cause = "client"
                self.server._count_closed("client")
            self.server._release(self.ip)
            self.ip = None
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
        budget = FRAMES_PER_TURN
        while True:
            while backlog and budget and not self.closing and len(slots) < limit and not self.writing_paused:
                budget -= 1
                if not self._dispatch(backlog.popleft()):
                    self._finish("protocol")
                    return
            self._flush()
            if not backlog or not budget or self.closing or self.writing_paused or len(slots) >= limit:
                break
        if self.closing:
            return
        if backlog:
            if not budget and not self._ready_soon:
                # This connection had its turn: the rest of its frames wait until the loop has polled the others.
                self._ready_soon = True
                self.server._schedule_flush(self)
            self._account()
            self._update_reading()
            return
        # The common case (every frame dispatched) costs two attribute reads. A frame left half read behind
        # complete ones is counted on the next read (which completes it or, reading no frame, counts it).
        if self.held:
            self._account()
        if self.reading_paused:
            self._update_reading()

    def _update_reading(self) -> None:
        """Read while nothing waits in the backlog and queued.max.request.bytes has room for this connection."""
        transport = self.transport
        if transport is None or self.closing:
            return
        paused = bool(self.backlog) or self.memory_muted
        if paused != self.reading_paused:
            self.reading_paused = paused
            if paused:
                transport.pause_reading()
            else:
                transport.resume_reading()

    def _account(self) -> None:
        """Count this connection's unread request bytes in ``server.memory``; mute it or wake others."""
        held = self.decoder.buffered
        if self.backlog:
            held += sum(map(len, self.backlog))
        delta = held - self.held
        if not delta:
            return
        self.held = held
        memory = self.server.memory
        memory.used += delta
        if delta > 0:
            if memory.used > memory.limit and self.decoder.buffered > SMALL_PARTIAL and memory.granted is not self:
                if memory.granted is None:
                    memory.granted = self  # the one connection that may finish its frame over the limit
                elif not self.memory_muted:
                    self.memory_muted = True
                    memory.muted.append(self)
                    self.server.muted_total += 1
                    self._update_reading()
        else:
            if memory.granted is self and self.decoder.buffered <= SMALL_PARTIAL:
                memory.granted = None
            if memory.muted:
                memory.wake()

    def _release_memory(self) -> None:
        memory = self.server.memory
        memory.used -= self.held
        self.held = 0
        self.memory_muted = False
        if memory.granted is self:
            memory.granted = None
        if memory.muted:
            memory.wake()

    def _dispatch(self, frame: bytes) -> bool:
        """Queue the answer to one frame. False means: stop reading; the answers already encoded are written,
        deferred ones dropped, then the connection is closed."""
        sasl = self.sasl
        if sasl is not None and sasl.state != "complete" and not sasl.may_send(frame):
            # Kafka's SaslServerAuthenticator refuses any other API before authentication from its header alone,
            # before parsing it (nor is an unsupported version of it answered): closed without an answer.
            log.info("closing connection %s: request before SASL authentication", self.peer,
                     extra={"throttle": ("sasl",)})  # fmt: skip
            self._finish("sasl")
            return True
        try:
            request = decode_request(frame)
        except UnsupportedApi as exc:
            return self._unsupported(exc)
        except InvalidRequest as exc:  # a null the schema forbids: INVALID_REQUEST where the response can say so
            peer_host = self.client_host
            try:
                answer = invalid_request_frame(exc)
            except Exception:
                log.exception("connection %s: cannot answer %s", self.peer, exc, extra={"throttle": ("codec-bug",)})
                answer = None
            if answer is None:
                log.warning("closing connection %s: %s", self.peer, exc, extra={"throttle": ("malformed", peer_host)})
                return False
            log.info("connection %s: INVALID_REQUEST: %s", self.peer, exc, extra={"throttle": ("invalid", peer_host)})
            self._push(answer)
            return True
        except MalformedFrame as exc:
            throttle = {"throttle": ("malformed", self.client_host)}
            log.warning("closing connection %s: %s", self.peer, exc, extra=throttle)
            return False
        except Exception:  # a bug in our codec (the fuzzer finds none): it must not take the server down either
            log.exception("closing connection %s: undecodable frame", self.peer, extra={"throttle": ("codec-bug",)})
            return False
        if sasl is not None and not sasl.passes(request.header.api_key, _now()):
            sasl_frame, close = sasl.answer(request, _now())
            if sasl_frame is not None:
                self._push(sasl_frame)
                observe = self.server.services.observe_request
                if observe is not None:
                    observe(request.header.api_key, None, sasl.error)  # counted, not timed
            if sasl.principal is not None:
                self.principal = sasl.principal
                self.decoder.max_frame_size = self.server.max_frame_size
            if close is not None:
                self._finish(close)  # after the answer (SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM)
            return True
        client_id = request.header.client_id
        if client_id and client_id != self.client_id:  # the id _hot_heartbeats compares with (clients keep theirs)
            self.client_id = client_id
            self.client_raw = client_id.encode()  # the bytes received: the header decodes strict UTF-8
        self._push(self.server.handle(request, self.client_host, self.principal, self.joined))
        return True

    def _unsupported(self, exc: UnsupportedApi) -> bool:
        try:
            frame = unsupported_response_frame(exc)
        except Exception:
            log.exception("connection %s: cannot answer %s", self.peer, exc, extra={"throttle": ("codec-bug",)})
            frame = None
        if frame is None:
            log.warning(
                "closing connection %s: %s (no encodable error response)",
                self.peer,
                exc,
                extra={"throttle": ("unsupported", self.client_host)},
            )
            return False
        log.info("connection %s: %s", self.peer, exc, extra={"throttle": ("unsupported", self.client_host)})
        self._push(frame)
        return True

    def _push(self, slot: Slot) -> None:
        if slot is None:  # not even an error response could be encoded: close now
            self._finish("error")
            return
        self.slots.append(slot)
        if len(self.slots) > self.peak_inflight:
            self.peak_inflight = len(self.slots)
        if isinstance(slot, DeferredSlot) and not slot.ready:
            slot.connection = self

    def _on_deferred_done(self) -> None:
        """A deferred answer is ready. Called from inside the core (a Deferred being resolved), so nothing is done
        here: the connection is flushed, and frames waiting in the backlog dispatched, once at the end of this loop
        iteration (``KafkaServer._flush_ready``). A group commit completes hundreds of requests at once; their answers
        leave in one write per connection, not one send each (the clients' next requests then come back batched too).
        """
        if not self._ready_soon:
            self._ready_soon = True
            self.server._schedule_flush(self)

    def _flush_ready(self) -> None:
        self._ready_soon = False
        if self.closing:
            return
        self.last_active = self.server.active_clock  # a deferred answer is written (connections.max.idle.ms)
        if self.backlog:
            self._process()  # writes what is ready, then dispatches the waiting frames
        else:
            self._flush()

    def _finish(self, cause: str) -> None:
        """Close now: the answers ready before the first deferred one are written, every deferred request is
        dropped (never wait for one: a Fetch held for max_wait or a JoinGroup may take minutes), then the transport
        closes (after sending what it buffered)."""
        if self.closing:
            return
        self.closing = True
        self.close_cause = cause
        self.server._count_closed(cause)
        self.backlog.clear()
        slots = self.slots
        chunks: list[bytes] = []
        for head in slots:
            data = head.frame if isinstance(head, DeferredSlot) and head.ready else head
            if data is None or isinstance(data, DeferredSlot):
                break
            chunks.append(data)
        self._abandon_deferred()
        slots.clear()
        self._release_memory()
        transport = self.transport
        if transport is not None and not transport.is_closing():
            if chunks:
                transport.write(b"".join(chunks))
            transport.close()

    # ---------------------------------------------------------------------------------------------------- writing

    def _flush(self) -> None:
        """Write the answers that are ready at the head of the queue, in order: small ones joined into one write,
        a large one (``LARGE_WRITE`` bytes or more) written on its own, never copied into a join. Writing stops when
        the transport's buffer is full (``pause_writing``); ``resume_writing`` goes on from there. So twenty
        pipelined 19 MB Metadata answers are not joined into one 388 MB copy in one loop step."""
        transport = self.transport
        if self.writing_paused or transport is None or transport.is_closing():
            return
        slots = self.slots
        chunks: list[bytes] = []
        close = False
        while slots:
            head = slots[0]
            if isinstance(head, DeferredSlot):
                if not head.ready:
                    break
                data = head.frame
            else:
                data = head
            slots.popleft()
            if data is None:
                close = True
                break
            if len(data) < LARGE_WRITE:
                chunks.append(data)
                continue
            if chunks:
                transport.write(chunks[0] if len(chunks) == 1 else b"".join(chunks))
                chunks = []
            transport.write(data)
            if self.writing_paused:  # the client reads slower than we answer: the rest waits for resume_writing
                break
        if chunks:
            transport.write(chunks[0] if len(chunks) == 1 else b"".join(chunks))
        if close:  # a deferred answer could not even be encoded as an error response
            slots.clear()
            self._finish("error")  # after the buffered answers are sent

    def _abandon_deferred(self) -> None:
        for slot in self.slots:
            if isinstance(slot, DeferredSlot):
                slot.abandon()

    def abort(self) -> None:
        """Server stop: close at once, deferred requests dropped and unwritten answers too."""
        if not self.closing:
            self.close_cause = "shutdown"
            self.server._count_closed("shutdown")
        self.closing = True
        self.backlog.clear()
        self._abandon_deferred()
        self.slots.clear()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()


def _listening_sockets(host: str, port: int) -> list[socket.socket]:
    """Bound, listening, non-blocking sockets for ``host:port``, as ``loop.create_server`` makes them: every
    address of the host (a wildcard host: IPv4 and IPv6), SO_REUSEADDR, IPv6 sockets IPv6-only, a backlog of
    ``LISTEN_BACKLOG`` (asyncio's default is 100: a burst of connects, or clients waiting for a slot at
    max.connections, wait in the kernel's queue instead of having their SYNs dropped). Raises ``OSError``."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                raise OSError(
                    exc.errno, f"error while attempting to bind on address {address!r}: {exc.strerror}"
                ) from None
            sock.listen(LISTEN_BACKLOG)
            sock.setblocking(False)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def raise_fd_limit() -> int | None:
    """Raise the soft RLIMIT_NOFILE to the hard limit (each connection is a file descriptor); the new soft limit."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        if soft == resource.RLIM_INFINITY or soft >= target:
            return None if soft == resource.RLIM_INFINITY else int(soft)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        return int(target)
    except (OSError, ValueError):
        return None


class KafkaServer:
    def __init__(
        self,
        services: Services,
        *,
        host: str = "127.0.0.1",
        port: int = 9092,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        max_inflight: int = DEFAULT_MAX_INFLIGHT,
        queued_max_request_bytes: int = DEFAULT_QUEUED_MAX_REQUEST_BYTES,
        connections_max_idle_ms: int = DEFAULT_CONNECTIONS_MAX_IDLE_MS,
        max_connections: int = UNLIMITED_CONNECTIONS,
        max_connections_per_ip: int = UNLIMITED_CONNECTIONS,
        max_connections_per_ip_overrides: dict[str, int] | None = None,
        name: str = "PLAINTEXT",
        tls: TlsContext | None = None,
        sasl: SaslConfig | None = None,
        quotas: ConnectionQuotas | None = None,
        listener_max_connections: int = UNLIMITED,
    ) -> None:
        self.services = services
        # The listener (``listeners``): its name, TLS context (SSL, SASL_SSL) and SASL settings (SASL_*).
        self.name = name
        self.node: Node | None = None  # this listener's advertised address once bound (RequestContext.node)
        self.tls = tls
        self.sasl = sasl
        self.host = host
        self.port = port
        self.max_frame_size = max_frame_size
        self.max_inflight = max_inflight
        self.memory = RequestMemory(queued_max_request_bytes)
        self.idle_ms = connections_max_idle_ms
        # Connection counts shared by every listener of the daemon (max.connections, max.connections.per.ip), and
        # this listener's own (listener.name.<name>.max.connections); a server of its own: quotas of its own.
        self.quotas = quotas or ConnectionQuotas(
            max_connections, max_connections_per_ip, max_connections_per_ip_overrides
        )
        self.count = ListenerCount(name, listener_max_connections)
        self.refused: dict[str, int] = {}  # cause -> connections closed as soon as accepted
        self.accept_waits = 0  # times this listener stopped accepting at max.connections (Kafka: acceptor blocked)
        self._sockets: list[socket.socket] = []
        self._accepting = False  # the listening sockets are watched for new connections
        self._handshakes: set[asyncio.Task[Any]] = set()  # connections being set up (TLS handshakes)
        self._bound_port = port
        self.closed_by_cause: dict[str, int] = {}  # cause -> connections closed (by the daemon, or "client")
        self.muted_total = 0  # times a connection was muted for queued.max.request.bytes
        self.open_connections: set[Connection] = set()
        self._ready: list[Connection] = []  # connections whose deferred answers became ready (see _flush_ready)
        self.heartbeat_sample = 0  # heartbeats answered since the last timed one (see handle)
        self.heartbeat_sample_errors = 0  # of those, the ones answered with an error (already counted under it)
        # Heartbeat version -> (body reader, flexible header) for the in-place path (Connection._hot_heartbeats)
        self.heartbeat_readers = {
            v: entry
            for v in range(SUPPORTED_VERSIONS[ApiKey.HEARTBEAT][1] + 1)
            if (entry := request_body_reader(_HEARTBEAT, v)) is not None
        }
        # connections.max.idle.ms: (due, seq, connection) with due >= the last time the connection was checked +
        # idle; a connection active since is pushed back with its new due when its entry comes up, so a sweep only
        # touches the entries that are due (amortised one push per connection per idle period).
        self._idle: list[tuple[float, int, Connection]] = []
        self._idle_seq = itertools.count()
        self._idle_handle: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # The time a connection's activity is stamped with: the next sweep's time, moved on by each sweep. A read
        # costs an attribute load instead of a clock call (~400 instructions of a ~44,000-instruction heartbeat);
        # activity looks up to one tick later than it was, so an idle connection closes up to a tick late, never
        # early.
        self.active_clock = _now() + self._idle_tick()

    @property
    def untimed_heartbeats(self) -> int:
        """Heartbeats answered without error since the last timed one: not in kgc_requests_total yet (added at
        scrape time)."""
        return self.heartbeat_sample - self.heartbeat_sample_errors

    @property
    def bound_port(self) -> int:
        return self._bound_port

    @property
    def connections_per_ip(self) -> dict[str, int]:
        """Open connections per client address, over all listeners (``servers.kafka.quotas``)."""
        return self.quotas.per_ip

    async def start(self) -> None:
        loop = self._loop = asyncio.get_running_loop()
        fds = raise_fd_limit()
        quotas = self.quotas
        if fds is not None and quotas.max_connections > fds - FD_RESERVE:
            # Past the fd limit accept() fails with EMFILE; stop accepting cleanly before it.
            quotas.max_connections = max(1, fds - FD_RESERVE)
            log.info("max.connections capped at %d (file descriptor limit %d)", quotas.max_connections, fds)
        self._sockets = _listening_sockets(self.host, self.port)
        self._bound_port = int(self._sockets[0].getsockname()[1])
        self._start_accepting()
        self._idle_handle = loop.call_later(self._idle_tick(), self._sweep_idle)
        log.info("kafka listener %s started host=%s port=%d", self.name, self.host, self.bound_port)

    async def stop(self) -> None:
        """Stop accepting, then close every connection (deferred requests are dropped with them)."""
        self.services.closing = True
        if self._idle_handle is not None:
            self._idle_handle.cancel()
            self._idle_handle = None
        self._stop_accepting()
        self.quotas.cancel_wait(self.count)
        for sock in self._sockets:
            sock.close()
        self._sockets = []
        for task in list(self._handshakes):
            task.cancel()
        connections = list(self.open_connections)
        for connection in connections:
            connection.abort()
        if connections:
            await asyncio.wait([c.closed for c in connections], timeout=5)
            for connection in connections:
                if not connection.closed.done() and connection.transport is not None:
                    connection.transport.abort()
        if self._handshakes:
            await asyncio.wait(list(self._handshakes), timeout=5)
        log.info("kafka listener stopped")

    @property
    def connections(self) -> int:
        return len(self.open_connections)

    # ------------------------------------------------------------------------------------------------ accepting

    def _start_accepting(self) -> None:
        """Watch the listening sockets (again): at start, and when a slot frees (``ConnectionQuotas.release``)."""
        if self._accepting or not self._sockets or self.services.closing or self._loop is None:
            return
        self._accepting = True
        for sock in self._sockets:
            self._loop.add_reader(sock.fileno(), self._accept, sock)

    def _stop_accepting(self) -> None:
        if not self._accepting or self._loop is None:
            return
        self._accepting = False
        for sock in self._sockets:
            self._loop.remove_reader(sock.fileno())

    def _accept(self, sock: socket.socket) -> None:
        """Accept what the kernel has queued, while there is a slot (Kafka's acceptor: ``waitForConnectionSlot``,
        then ``accept``). Without one, stop watching the sockets: clients wait in the listen backlog until a
        connection closes (``quotas.release`` calls ``_start_accepting``)."""
        quotas = self.quotas
        for _ in range(LISTEN_BACKLOG):
            if not quotas.slot_available(self.count):
                self._stop_accepting()
                self.accept_waits += 1
                quotas.wait_for_slot(self.count, self._start_accepting)
                limit = self.count.max_connections if self.count.count >= self.count.max_connections else None
                log.info(
                    "listener %s stops accepting: %s reached (%d open connections)",
                    self.name,
                    f"listener.name.{self.name.lower()}.max.connections ({limit})"
                    if limit is not None
                    else f"max.connections ({quotas.max_connections})",
                    quotas.total,
                    extra={"throttle": ("accept-wait", self.name)},
                )
                return
            try:
                conn, address = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                # ECONNABORTED and the like concern one client; EMFILE/ENFILE/ENOBUFS: pause for a second (asyncio's
                # own servers do the same), or the loop would spin on a readable socket it cannot accept from.
                log.warning("listener %s: accept failed: %s", self.name, exc, extra={"throttle": ("accept",)})
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    assert self._loop is not None
                    self._stop_accepting()
                    self._loop.call_later(1.0, self._start_accepting)
                    return
                continue
            self._accepted(conn, address)

    def _accepted(self, conn: socket.socket, address: Any) -> None:
        ip = str(address[0]) if isinstance(address, tuple) and address else str(address)
        limit = self.quotas.acquire(self.count, ip)
        if limit is not None:
            # Kafka's acceptor closes a connection over max.connections.per.ip at once (TooManyConnectionsException)
            # and logs it at INFO.
            self.refused["max.connections.per.ip"] = self.refused.get("max.connections.per.ip", 0) + 1
            log.info("rejected connection from %s: max.connections.per.ip (%d) reached", ip, limit,
                     extra={"throttle": ("refused", ip)})  # fmt: skip
            conn.close()
            return
        connection = Connection(self)
        connection.ip = ip
        assert self._loop is not None
        task = self._loop.create_task(self._connect(connection, conn))
        self._handshakes.add(task)
        task.add_done_callback(lambda t: self._setup_done(t, connection, conn))

    def _setup_done(self, task: asyncio.Task[None], connection: Connection, conn: socket.socket) -> None:
        self._handshakes.discard(task)
        if connection.ip is not None and connection.transport is None:  # cancelled (stop) before it even started
            self._release(connection.ip)
            connection.ip = None
            with contextlib.suppress(OSError):
                conn.close()

    async def _connect(self, connection: Connection, conn: socket.socket) -> None:
        """The transport of an accepted socket: after the TLS handshake on SSL listeners (bounded by the idle time,
        at most 60 s). A connection that never gets its transport (failed handshake) gives its slot back here;
        otherwise ``Connection.connection_lost`` does. Once handed to ``connect_accepted_socket`` the socket is the
        transport's (it closes it, on failure too)."""
        assert self._loop is not None
        tls = self.tls
        ip = connection.ip
        handed = False
        try:
            conn.setblocking(False)
            handed = True
            if tls is None:
                await self._loop.connect_accepted_socket(lambda: connection, conn)
            else:
                await self._loop.connect_accepted_socket(
                    lambda: connection,
                    conn,
                    ssl=tls.context,
                    ssl_handshake_timeout=min(60.0, max(1.0, self.idle_ms / 1000)),
                )
        except BaseException as exc:
            if connection.transport is None and connection.ip is not None:
                self._release(connection.ip)
                connection.ip = None
            if not handed:
                with contextlib.suppress(OSError):
                    conn.close()
            if not isinstance(exc, Exception):  # CancelledError (stop), KeyboardInterrupt
                raise
            log.info("connection setup with %s failed on listener %s: %r", ip, self.name, exc,
                     extra={"throttle": ("handshake", self.name)})  # fmt: skip

    def _release(self, ip: str) -> None:
        self.quotas.release(self.count, ip)

    def _count_closed(self, cause: str) -> None:
        self.closed_by_cause[cause] = self.closed_by_cause.get(cause, 0) + 1

    def _idle_tick(self) -> float:
        """Seconds between idle sweeps: a tenth of connections.max.idle.ms, between 10 ms and 1 s."""
        return min(1.0, max(0.01, self.idle_ms / 10_000))

    def _track_idle(self, connection: Connection) -> None:
        heapq.heappush(self._idle, (connection.last_active + self.idle_ms / 1000, next(self._idle_seq), connection))

    def _sweep_idle(self) -> None:
        """Close the connections with no request received and no answer written for connections.max.idle.ms.

        Kafka's own timer counts any byte read; here only a complete request counts, so a client sending a frame
        a byte at a time (slowloris) or never finishing one is closed too."""
        assert self._loop is not None
        now = _now()
        self.active_clock = now + self._idle_tick()
        idle_s = self.idle_ms / 1000
        heap = self._idle
        closed = 0
        while heap and heap[0][0] <= now:
            _, _, connection = heapq.heappop(heap)
            if connection.closing:
                continue
            due = connection.last_active + idle_s
            if due <= now:
                closed += 1
                log.debug("closing idle connection %s", connection.peer)
                connection._finish("idle")
            else:
                heapq.heappush(heap, (due, next(self._idle_seq), connection))
        if closed:
            log.info("closed %d idle connection(s) (connections.max.idle.ms=%d)", closed, self.idle_ms,
                     extra={"throttle": ("idle",)})  # fmt: skip
        if len(heap) > 2 * len(self.open_connections) + 1024:
            # Entries of connections closed by other causes wait until their due time; with much churn, rebuild.
            self._idle = heap = [entry for entry in heap if not entry[2].closing]
            heapq.heapify(heap)
        self._idle_handle = self._loop.call_later(self._idle_tick(), self._sweep_idle)

    def stats(self) -> ConnectionStats:
        """Configured limits, current use and counters, for /metrics (read at scrape time)."""
        memory = self.memory
        return ConnectionStats(
            open=len(self.open_connections),
            inflight=sum(len(c.slots) for c in self.open_connections),
            queued_bytes=memory.used,
            muted=sum(1 for c in memory.muted if c.memory_muted and not c.closing),
            muted_total=self.muted_total,
            refused=dict(self.refused),
            accept_waits=self.accept_waits,
            closed=dict(self.closed_by_cause),
            limits={
                "max.connections": self.quotas.max_connections,
                "max.connections.per.ip": self.quotas.max_connections_per_ip,
                "queued.max.request.bytes": memory.limit,
                "socket.request.max.bytes": self.max_frame_size,
                "connections.max.idle.ms": self.idle_ms,
                "max_inflight": self.max_inflight,
            },
            per_ip_overrides=dict(self.quotas.per_ip_overrides),
        )

    def _schedule_flush(self, connection: Connection) -> None:
        if not self._ready:
            asyncio.get_running_loop().call_soon(self._flush_ready)
        self._ready.append(connection)

    def _flush_ready(self) -> None:
        ready, self._ready = self._ready, []
        for connection in ready:
            connection._flush_ready()

    # ---------------------------------------------------------------------------------------------------- dispatch

    def handle(
        self,
        request: Request,
        client_host: str,
        principal: str = "User:ANONYMOUS",
        joined: set[tuple[str, str]] | None = None,
    ) -> Slot:
        """The slot answering ``request``: the encoded frame, or a ``DeferredSlot`` completed later.

        Heartbeat, the most frequent request, is answered by ``heartbeat``: straight to the core and a packed answer,
        without the request context, adapter and kio response object of the generic path (most heartbeats do not
        even get here: ``Connection._hot_heartbeats`` reads them in place and calls ``heartbeat``). Same answer as
        ``servers.kafka.membership.handle_heartbeat`` + ``encode_response``
        (tests/server/test_heartbeat_path.py). Every heartbeat is counted, one in ``HEARTBEAT_TIMING_SAMPLE`` is
        timed: the two clock reads and the histogram update cost about as much as the core's part of a heartbeat,
        and a heartbeat is answered at once, so its latency is the same handful of microseconds every time.
        ``untimed_heartbeats`` holds the ones answered without error since the last timed one (added to
        ``kgc_requests_total`` at scrape time); one answered with an error is counted under it at once."""
        header, body = request
        key = header.api_key
        if key == _HEARTBEAT:
            return self.heartbeat(header.api_version, header.correlation_id, header.client_id, body, client_host,
                                  principal)  # fmt: skip
        ctx = RequestContext(
            key,
            header.api_version,
            header.correlation_id,
            header.client_id or "",
            client_host,
            principal=principal,
            node=self.node,
            joined=joined,
        )
        observe = self.services.observe_request
        started = perf_counter() if observe is not None else 0.0
        try:
            result = HANDLERS[key](self.services, ctx, body)
        except Exception as exc:
            frame = self._error_frame(request, ctx, exc)
            self._answered(request, ctx, started)
            return frame
        # A kio body (has __api_key__) is encoded at once, a finished frame (bytes) written as it is; anything else
        # is a deferred answer. The error reported is a kio body's top-level error_code, else ``ctx.error`` (set by
        # the adapter of a finished frame or of an answer with per-entry errors).
        if result.__class__ is bytes:
            if observe is not None:
                observe(key, perf_counter() - started, ctx.error)
            if ctx.error:
                refused_request(ctx, body)
            return result  # type: ignore[no-any-return]
        if getattr(result.__class__, "__api_key__", None) is None:
            if isinstance(result, DeferredAnswer):
                return self._defer(request, ctx, result, started)
            if asyncio.iscoroutine(result):
                return self._defer_task(request, ctx, result, started)
        try:
            frame = encode_response(header, result)
        except Exception as exc:
            frame = self._error_frame(request, ctx, exc)
        else:
            ctx.error = getattr(result, "error_code", 0) or ctx.error
        if observe is not None:
            observe(key, perf_counter() - started, ctx.error)
        if ctx.error:
            refused_request(ctx, body)
        return frame

    def heartbeat(
        self, version: int, correlation_id: int, client_id: str | None, body: Any, client_host: str, principal: str
    ) -> bytes | None:
        """The answer to a decoded Heartbeat (``handle``'s path, and ``Connection._hot_heartbeats``' for the timed
        heartbeat and with ACLs on): the ACL check, the core, one packed frame; every heartbeat counted, one in
        ``HEARTBEAT_TIMING_SAMPLE`` timed (see ``handle``). None: not even an error response could be encoded (close
        the connection)."""
        untimed = self.heartbeat_sample + 1
        if untimed < HEARTBEAT_TIMING_SAMPLE:
            self.heartbeat_sample = untimed
            started = 0.0
        else:
            started = perf_counter()
        authorizer = self.services.authorizer  # Read on the group (ACLs, issue #19): one attribute when off
        error: int | Exception
        try:
            if authorizer.enabled and not authorizer.authorize(
                principal, client_host, AclOperation.READ, ResourceType.GROUP, body.group_id
            ):
                error = ErrorCode.group_authorization_failed
            else:
                error = self.services.coordinator.heartbeat_fields(
                    body.group_id,
                    body.generation_id,
                    body.member_id,
                    body.group_instance_id if version >= 3 else None,
                )
        except Exception as exc:
            error = exc
        return self.heartbeat_answer(version, correlation_id, client_id, body, client_host, principal, error, started,
                                     untimed)  # fmt: skip

    def heartbeat_answer(
        self,
        version: int,
        correlation_id: int,
        client_id: str | None,
        body: Any,
        client_host: str,
        principal: str,
        error: int | Exception,
        started: float,
        untimed: int,
    ) -> bytes | None:
        """The frame for a heartbeat answered with ``error`` (or failed with it), counted and, when ``started``, timed
        (``untimed`` as ``heartbeat`` counts it). ``heartbeat``'s second half, and ``Connection._hot_heartbeats``'
        for a heartbeat the core refused."""
        frame: bytes | None
        if isinstance(error, Exception):
            frame, error = self._heartbeat_error_frame(version, correlation_id, client_id, body, client_host,
                                                       principal, error)  # fmt: skip
        else:
            try:
                if version >= 4:  # what heartbeat_response_frame packs, without the call (the version clients send)
                    frame = _PACK_HEARTBEAT_V4(12, correlation_id, 0, 0, error, 0)
                else:
                    frame = heartbeat_response_frame(version, correlation_id, error)
            except Exception as exc:
                frame, error = self._heartbeat_error_frame(version, correlation_id, client_id, body, client_host,
                                                           principal, exc)  # fmt: skip
        if error is not _NO_ERROR:
            self._observe_heartbeat_error(started, untimed, error)
            refused(_HEARTBEAT, int(error), body.group_id, client_id, client_host, body.member_id)
        elif started:
            self._observe_heartbeats(started, untimed)
        return frame

    def _heartbeat_error_frame(
        self,
        version: int,
        correlation_id: int,
        client_id: str | None,
        body: Any,
        client_host: str,
        principal: str,
        exc: Exception,
    ) -> tuple[bytes | None, int]:
        """The generic error answer to a heartbeat that raised ``exc``, and the error it reports."""
        ctx = RequestContext(_HEARTBEAT, version, correlation_id, client_id or "", client_host, principal=principal)
        request = Request(RequestHeader(_HEARTBEAT, version, correlation_id, client_id), body)
        frame = self._error_frame(request, ctx, exc)
        return frame, ctx.error

    def _answered(self, request: Request, ctx: RequestContext, started: float) -> None:
        """A request answered with ``ctx.error``: counted (and timed from ``started``) for the metrics, and logged
        (throttled) when it was a refused group request (``servers.kafka.audit``)."""
        observe = self.services.observe_request
        if observe is not None:
            observe(ctx.api_key, perf_counter() - started, ctx.error)
        if ctx.error:
            refused_request(ctx, request.body)

    def _observe_heartbeats(self, started: float, answered: int) -> None:
        """The timed heartbeat: ``answered`` heartbeats since the last timed one, this one included; those answered
        with an error were counted already."""
        answered -= self.heartbeat_sample_errors
        self.heartbeat_sample = self.heartbeat_sample_errors = 0
        observe = self.services.observe_request
        if observe is not None:
            observe(_HEARTBEAT, perf_counter() - started, 0, answered)

    def _observe_heartbeat_error(self, started: float, answered: int, error: int) -> None:
        """A heartbeat answered with ``error`` (``answered`` and ``started`` as for ``_observe_heartbeats``): counted
        at once under its error, not among the ones answered without error. It takes its turn in the timing sample
        like any other."""
        observe = self.services.observe_request
        if started:
            self._observe_heartbeats(started, answered - 1)
        else:
            self.heartbeat_sample_errors += 1
        if observe is not None:
            observe(_HEARTBEAT, None, error)

    def _defer(
        self, request: Request, ctx: RequestContext, answer: DeferredAnswer[Any, Any], started: float
    ) -> DeferredSlot:
        """Answer when the core resolves the Deferred: build and encode in its callback, no task."""
        slot = DeferredSlot()

        def ready(value: Any) -> None:
            if slot.abandoned:
                return
            try:
                frame = self._encode(request, ctx, answer.fn(value))
            except Exception as exc:
                frame = self._error_frame(request, ctx, exc)
            self._answered(request, ctx, started)
            slot.complete(frame)

        answer.deferred.add_callback(ready)
        return slot

    def _defer_task(
        self, request: Request, ctx: RequestContext, result: Coroutine[Any, Any, Any], started: float
    ) -> DeferredSlot:
        """An answer produced by a coroutine (a Fetch waiting max_wait_ms): run it as a task."""
        slot = DeferredSlot()
        slot.task = task = asyncio.get_running_loop().create_task(self._finish(request, ctx, result))

        def done(t: asyncio.Task[bytes | None]) -> None:
            self._answered(request, ctx, started)
            if not t.cancelled():
                slot.complete(t.result())

        task.add_done_callback(done)
        return slot

    async def _finish(self, request: Request, ctx: RequestContext, result: Coroutine[Any, Any, Any]) -> bytes | None:
        try:
            body = await result
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return self._error_frame(request, ctx, exc)
        return self._encode(request, ctx, body)

    def _encode(self, request: Request, ctx: RequestContext, body: Any) -> bytes | None:
        if body.__class__ is bytes:  # an adapter's finished frame (its error in ctx.error)
            return body  # type: ignore[no-any-return]
        try:
            frame = encode_response(request.header, body)
        except Exception as exc:
            return self._error_frame(request, ctx, exc)
        ctx.error = getattr(body, "error_code", 0) or ctx.error
        return frame

    def _error_frame(self, request: Request, ctx: RequestContext, exc: BaseException) -> bytes | None:
        """The API's error response, or None (close the connection) if even that cannot be built."""
        try:
            return encode_response(request.header, error_body(ctx, exc, request.body))
        except Exception:
            log.exception("cannot encode an error response api_key=%d api_version=%d", ctx.api_key, ctx.api_version)
            return None

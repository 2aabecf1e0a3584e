"""Length-prefixed JSON messages over raw file descriptors, with size caps and deadlines.

Standard library only: used on both sides of the sandbox boundary. A message is a 4-byte big-endian
length followed by that many bytes of UTF-8 JSON. Nothing is ever unpickled; a length above the
reader's cap, invalid JSON or a non-object payload is a ``ProtocolError``.

``read_message``/``write_message`` work on any descriptor and read exactly one frame. ``Connection``
is the hot-path variant: it keeps a read buffer (a frame usually arrives in one ``read`` instead of
two, and bytes after a frame stay buffered for the next one, so the stream is consumed exactly as with
``read_message``), and in its non-blocking mode it writes before it polls. ``SocketConnection``, used
by the host for episode calls, goes further: a blocking read bounded by the socket's receive timeout
replaces poll + read, and a write that would block is retried after a poll, so a round trip costs
the host one write and one read; it may first poll for the reply for a few microseconds without
sleeping (``spin_s``), which saves the wake-up of a sleeping thread when the reply comes quickly.
"""

from __future__ import annotations

import json
import os
import select
import socket
import struct
import time

HEADER = struct.Struct(">I")
READ_CHUNK = 1 << 16  # how much a Connection asks for at once beyond what the current frame needs

# Calls an episode accepts, and the reply keys the host takes from an episode (anything else it sent,
# such as a forged "ended" flag, is dropped).
METHODS = ("reset", "step", "solution", "close", "get_tools", "reset_gate")
REPLY_KEYS = ("kind", "value", "error_type", "message", "traceback")


class ProtocolError(Exception):
    """The peer sent something that is not a well-formed message within the caps."""


class PeerClosed(Exception):
    """The peer closed its end (it exited, crashed or was killed)."""


class DeadlineExceeded(Exception):
    """No complete message arrived (or could be sent) before the deadline."""


def _reject_constant(name: str):
    raise ValueError(f"non-finite number {name} is not allowed")


# Built once: json.loads with options builds a new decoder on every call. (Encoding keeps calling
# json.dumps: in an episode process that is the generated code's module too, and a reply it corrupts
# by patching json.dumps must still reach the host corrupted, to be classified as a protocol breach.)
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def encode(message: dict, cap: int) -> bytes:
    """Serialise ``message``; raise ``ProtocolError`` if it is larger than ``cap`` bytes."""
    payload = json.dumps(message, allow_nan=False, separators=(",", ":")).encode("utf-8")
    if len(payload) > cap:
        raise ProtocolError(f"message of {len(payload)} bytes exceeds the cap of {cap} bytes")
    return HEADER.pack(len(payload)) + payload


def _wait(fd: int, event: int, deadline: float | None) -> None:
    poller = select.poll()
    poller.register(fd, event)
    while True:
        timeout_ms = None if deadline is None else max(0, int((deadline - time.monotonic()) * 1000) + 1)
        if poller.poll(timeout_ms):
            return
        if deadline is not None and time.monotonic() >= deadline:
            raise DeadlineExceeded()


def wait_readable(fd: int, deadline: float | None) -> None:
    """Block until ``fd`` has data (or its peer closed); ``DeadlineExceeded`` past ``deadline``."""
    _wait(fd, select.POLLIN, deadline)


def write_message(fd: int, message: dict, cap: int, deadline: float | None = None) -> None:
    write_frame(fd, encode(message, cap), deadline)


def write_frame(fd: int, frame: bytes, deadline: float | None = None) -> None:
    """Write an already ``encode``d message completely."""
    data = memoryview(frame)
    while data:
        _wait(fd, select.POLLOUT, deadline)
        try:
            written = os.write(fd, data)
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise PeerClosed(str(exc)) from None
        data = data[written:]


def _read_exact(fd: int, size: int, deadline: float | None) -> bytes:
    chunks, remaining = [], size
    while remaining:
        _wait(fd, select.POLLIN, deadline)
        try:
            chunk = os.read(fd, min(remaining, 1 << 20))
        except ConnectionResetError as exc:
            raise PeerClosed(str(exc)) from None
        if not chunk:
            raise PeerClosed("end of stream")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_message(fd: int, cap: int, deadline: float | None = None) -> dict:
    (size,) = HEADER.unpack(_read_exact(fd, HEADER.size, deadline))
    _check_size(size, cap)
    return decode(_read_exact(fd, size, deadline))


def _check_size(size: int, cap: int) -> None:
    if size > cap:
        raise ProtocolError(f"peer announced a message of {size} bytes; the cap is {cap} bytes")


def decode(data: bytes) -> dict:
    """Parse one frame's payload; anything but a strict JSON object is a ``ProtocolError``."""
    try:
        message = _DECODER.decode(data.decode("utf-8"))
    except (ValueError, RecursionError, MemoryError) as exc:  # bad UTF-8/JSON, NaN, huge ints, deep nesting
        raise ProtocolError(f"peer sent invalid JSON: {type(exc).__name__}: {str(exc)[:200]}") from None
    if not isinstance(message, dict):
        raise ProtocolError(f"peer sent a JSON {type(message).__name__}, expected an object")
    return message


class Connection:
    """One end of a message stream with a read buffer; see the module docstring.

    ``blocking=False`` switches the descriptor to non-blocking mode, so a write never waits past its
    deadline; ``blocking=True`` leaves it as it is and only accepts ``deadline=None`` (no poll at all).
    """

    def __init__(self, fd: int, blocking: bool = False):
        self.fd, self.blocking = fd, blocking
        self.buffer = bytearray()
        if not blocking:
            os.set_blocking(fd, False)

    def send(self, message: dict, cap: int, deadline: float | None = None) -> None:
        self.send_frame(encode(message, cap), deadline)

    def send_frame(self, frame: bytes, deadline: float | None = None) -> None:
        if self.blocking:
            if deadline is not None:
                raise ValueError("a blocking Connection cannot honour a deadline")
            write_frame(self.fd, frame, None)
            return
        self._send_all(frame, deadline)

    def _write_some(self, data) -> int:
        """One write that never blocks (``BlockingIOError`` when the peer's buffer is full)."""
        return os.write(self.fd, data)

    def _send_all(self, frame: bytes, deadline: float | None) -> None:
        data = memoryview(frame)
        while data:
            try:
                written = self._write_some(data)
            except BlockingIOError:  # the peer's buffer is full: wait until it reads
                _wait(self.fd, select.POLLOUT, deadline)
                continue
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise PeerClosed(str(exc)) from None
            data = data[written:]

    def receive(self, cap: int, deadline: float | None = None) -> dict:
        buffer = self.buffer
        while True:
            if len(buffer) >= HEADER.size:
                (size,) = HEADER.unpack_from(buffer)
                _check_size(size, cap)
                end = HEADER.size + size
                if len(buffer) >= end:
                    payload = bytes(buffer[HEADER.size:end])
                    del buffer[:end]
                    return decode(payload)
                missing = end - len(buffer)
            else:
                missing = HEADER.size - len(buffer)
            chunk = self._read(min(max(missing, READ_CHUNK), 1 << 20), deadline)
            if chunk is None:  # woken without data after all
                continue
            if not chunk:
                raise PeerClosed("end of stream")
            buffer += chunk

    def _read(self, size: int, deadline: float | None) -> bytes | None:
        if not self.blocking:
            _wait(self.fd, select.POLLIN, deadline)
        elif deadline is not None:
            raise ValueError("a blocking Connection cannot honour a deadline")
        try:
            return os.read(self.fd, size)
        except BlockingIOError:
            return None
        except ConnectionResetError as exc:
            raise PeerClosed(str(exc)) from None


class SocketConnection(Connection):
    """A ``Connection`` over a stream socket, for the host's side of episode calls.

    The socket stays in blocking mode. A read blocks in the kernel for at most the socket's receive
    timeout (``SO_RCVTIMEO``), which is set to the time left before the deadline whenever it differs
    from the one in force by more than ``TIMEOUT_SLACK_S`` (so consecutive calls with the same limit set it once).
    A write is sent with ``MSG_DONTWAIT`` and polls only when the peer's buffer is full.
    """

    TIMEOUT_SLACK_S = 0.001

    def __init__(self, sock: socket.socket, spin_s: float = 0.0):
        sock.settimeout(None)
        super().__init__(sock.fileno(), blocking=True)
        self.sock = sock
        self.spin_s = spin_s  # how long a read polls without sleeping before it blocks in the kernel
        self._timeout: float | None = None  # the receive timeout in force (None: not set, blocks forever)

    def _spin(self, size: int, deadline: float | None) -> bytes | None:
        """Poll for data for up to ``spin_s`` (never past the deadline) without sleeping: a reply that
        arrives meanwhile is read without the cost of waking a sleeping thread. None if nothing came."""
        end = time.monotonic() + self.spin_s
        if deadline is not None:
            end = min(end, deadline)
        while True:
            try:
                return self.sock.recv(size, socket.MSG_DONTWAIT)
            except BlockingIOError:
                if time.monotonic() >= end:
                    return None
            except ConnectionResetError as exc:
                raise PeerClosed(str(exc)) from None

    def send_frame(self, frame: bytes, deadline: float | None = None) -> None:
        self._send_all(frame, deadline)  # the socket stays blocking; each send alone does not wait

    def _write_some(self, data) -> int:
        return self.sock.send(data, socket.MSG_DONTWAIT)

    def _read(self, size: int, deadline: float | None) -> bytes | None:
        if self.spin_s > 0 and (data := self._spin(size, deadline)) is not None:
            return data
        if deadline is None:
            wanted = 0.0  # no timeout: block until data or end of stream
        else:
            wanted = deadline - time.monotonic()
            if wanted <= 0:
                raise DeadlineExceeded()
        if self._timeout is None or abs(self._timeout - wanted) > self.TIMEOUT_SLACK_S:
            seconds = int(wanted)
            micros = max(1, int((wanted - seconds) * 1e6)) if deadline is not None else 0
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("@ll", seconds, micros))
            self._timeout = wanted
        try:
            return os.read(self.fd, size)
        except BlockingIOError:  # the receive timeout ran out: past the deadline, or set too short
            if deadline is not None and time.monotonic() >= deadline:
                raise DeadlineExceeded() from None
            return None
        except ConnectionResetError as exc:
            raise PeerClosed(str(exc)) from None

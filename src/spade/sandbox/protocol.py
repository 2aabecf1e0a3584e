"""Length-prefixed JSON messages over raw file descriptors, with size caps and deadlines.

Standard library only: used on both sides of the sandbox boundary. A message is a 4-byte big-endian
length followed by that many bytes of UTF-8 JSON. Nothing is ever unpickled; a length above the
reader's cap, invalid JSON or a non-object payload is a ``ProtocolError``.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time

HEADER = struct.Struct(">I")


class ProtocolError(Exception):
    """The peer sent something that is not a well-formed message within the caps."""


class PeerClosed(Exception):
    """The peer closed its end (it exited, crashed or was killed)."""


class DeadlineExceeded(Exception):
    """No complete message arrived (or could be sent) before the deadline."""


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


def _reject_constant(name: str):
    raise ValueError(f"non-finite number {name} is not allowed")


def read_message(fd: int, cap: int, deadline: float | None = None) -> dict:
    (size,) = HEADER.unpack(_read_exact(fd, HEADER.size, deadline))
    if size > cap:
        raise ProtocolError(f"peer announced a message of {size} bytes; the cap is {cap} bytes")
    data = _read_exact(fd, size, deadline)
    try:
        message = json.loads(data.decode("utf-8"), parse_constant=_reject_constant)
    except (ValueError, RecursionError, MemoryError) as exc:  # bad UTF-8/JSON, NaN, huge ints, deep nesting
        raise ProtocolError(f"peer sent invalid JSON: {type(exc).__name__}: {str(exc)[:200]}") from None
    if not isinstance(message, dict):
        raise ProtocolError(f"peer sent a JSON {type(message).__name__}, expected an object")
    return message

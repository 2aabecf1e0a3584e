"""Length-prefixed JSON framing: round trip, caps, bad payloads, deadlines, closed peers."""

from __future__ import annotations

import os
import time

import pytest

from spade.sandbox import protocol


@pytest.fixture()
def pipe():
    read_fd, write_fd = os.pipe()
    yield read_fd, write_fd
    for fd in (read_fd, write_fd):
        try:
            os.close(fd)
        except OSError:
            pass


def test_round_trip(pipe):
    read_fd, write_fd = pipe
    message = {"kind": "ok", "value": ["obs \u00e9\U0001F600", 0.5, True, False, {"k": [1, None]}]}
    protocol.write_message(write_fd, message, cap=1024)
    assert protocol.read_message(read_fd, cap=1024) == message


def test_encode_refuses_oversized_and_nan():
    with pytest.raises(protocol.ProtocolError, match="exceeds the cap of 16 bytes"):
        protocol.encode({"text": "x" * 100}, cap=16)
    with pytest.raises(ValueError):
        protocol.encode({"reward": float("nan")}, cap=1024)


@pytest.mark.parametrize(
    "raw, fragment",
    [
        (protocol.HEADER.pack(10**9), "announced a message of 1000000000 bytes"),
        (protocol.HEADER.pack(3) + b"{x}", "invalid JSON"),
        (protocol.HEADER.pack(2) + b"[]", "expected an object"),
        (protocol.HEADER.pack(2) + b"\xff\xfe", "invalid JSON"),
    ],
)
def test_bad_payloads(pipe, raw, fragment):
    read_fd, write_fd = pipe
    os.write(write_fd, raw)
    with pytest.raises(protocol.ProtocolError, match=fragment):
        protocol.read_message(read_fd, cap=1024)


def test_deadline_and_closed_peer(pipe):
    read_fd, write_fd = pipe
    os.write(write_fd, protocol.HEADER.pack(10) + b"{")  # a partial message, then silence
    start = time.monotonic()
    with pytest.raises(protocol.DeadlineExceeded):
        protocol.read_message(read_fd, cap=1024, deadline=time.monotonic() + 0.2)
    assert time.monotonic() - start < 1.0
    os.close(write_fd)
    with pytest.raises(protocol.PeerClosed):
        protocol.read_message(read_fd, cap=1024)

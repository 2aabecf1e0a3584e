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


BAD_PAYLOADS = [
    (protocol.HEADER.pack(10**9), "announced a message of 1000000000 bytes"),
    (protocol.HEADER.pack(3) + b"{x}", "invalid JSON"),
    (protocol.HEADER.pack(2) + b"[]", "expected an object"),
    (protocol.HEADER.pack(2) + b"\xff\xfe", "invalid JSON"),
    (protocol.HEADER.pack(20) + b'{"r": NaN, "k": 1.0}', "invalid JSON"),
]
READERS = {  # both ways of reading a frame reject the same payloads the same way
    "read_message": lambda fd: protocol.read_message(fd, cap=1024),
    "Connection": lambda fd: protocol.Connection(fd).receive(1024, time.monotonic() + 1),
}


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("raw, fragment", BAD_PAYLOADS)
def test_bad_payloads(pipe, raw, fragment, reader):
    read_fd, write_fd = pipe
    os.write(write_fd, raw)
    with pytest.raises(protocol.ProtocolError, match=fragment):
        READERS[reader](read_fd)


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


# ----- Connection: the buffered variant used for episode calls ------------------------------------


def test_connection_keeps_bytes_after_a_frame_for_the_next_one(pipe):
    read_fd, write_fd = pipe
    first, second = {"kind": "ok", "value": 1}, {"kind": "ok", "value": "two"}
    os.write(write_fd, protocol.encode(first, 1024) + protocol.encode(second, 1024))  # one write, two frames
    reader = protocol.Connection(read_fd)
    assert reader.receive(1024, time.monotonic() + 1) == first
    assert reader.receive(1024, time.monotonic() + 1) == second  # it was read with the first, and kept
    with pytest.raises(protocol.DeadlineExceeded):
        reader.receive(1024, time.monotonic() + 0.1)


def test_connection_assembles_a_frame_sent_in_pieces(pipe):
    import threading

    read_fd, write_fd = pipe
    frame = protocol.encode({"text": "x" * 200_000}, 1 << 20)  # larger than a pipe's buffer

    cuts = [0, 2, 3, 1000, 150_000, len(frame)]  # a split header, then body pieces of every size

    def dribble():
        for start, end in zip(cuts, cuts[1:]):
            time.sleep(0.02)
            os.write(write_fd, frame[start:end])

    writer = threading.Thread(target=dribble)
    writer.start()
    try:
        assert protocol.Connection(read_fd).receive(1 << 20, time.monotonic() + 5) == {"text": "x" * 200_000}
    finally:
        writer.join()


def test_connection_deadlines_and_closed_peer(pipe):
    read_fd, write_fd = pipe
    writer, reader = protocol.Connection(write_fd), protocol.Connection(read_fd)
    start = time.monotonic()
    with pytest.raises(protocol.DeadlineExceeded):  # nobody reads: a write must not block past its deadline
        writer.send({"text": "x" * (1 << 20)}, 2 << 20, time.monotonic() + 0.2)
    assert time.monotonic() - start < 1.0
    os.close(read_fd)
    with pytest.raises(protocol.PeerClosed):
        writer.send({"k": 1}, 1024, time.monotonic() + 1)
    read2, write2 = os.pipe()
    os.write(write2, protocol.HEADER.pack(10) + b"{")  # a partial frame, then the writer goes away
    os.close(write2)
    with pytest.raises(protocol.PeerClosed):
        protocol.Connection(read2).receive(1024, time.monotonic() + 1)
    os.close(read2)
    del reader


def test_blocking_connection_refuses_deadlines(pipe):
    read_fd, write_fd = pipe
    os.write(write_fd, protocol.encode({"k": 1}, 1024) + protocol.encode({"k": 2}, 1024))
    reader = protocol.Connection(read_fd, blocking=True)
    assert os.get_blocking(read_fd)
    assert [reader.receive(1024), reader.receive(1024)] == [{"k": 1}, {"k": 2}]
    with pytest.raises(ValueError, match="deadline"):
        reader.receive(1024, time.monotonic() + 1)


# ----- SocketConnection: the host's end of an episode's socket --------------------------------------


@pytest.mark.parametrize("spin_s", [0.0, 0.05])
def test_socket_connection_reads_replies_with_and_without_polling_first(spin_s):
    import socket
    import threading

    host, episode = socket.socketpair()
    try:
        conn = protocol.SocketConnection(host, spin_s=spin_s)
        os.write(episode.fileno(), protocol.encode({"k": 1}, 1024))  # already there
        assert conn.receive(1024, time.monotonic() + 1) == {"k": 1}
        late = threading.Timer(0.1, lambda: episode.sendall(protocol.encode({"k": 2}, 1024)))  # after the spin
        late.start()
        assert conn.receive(1024, time.monotonic() + 2) == {"k": 2}
        late.join()
        start = time.monotonic()
        with pytest.raises(protocol.DeadlineExceeded):  # a spin never outlasts the call's deadline
            protocol.SocketConnection(host, spin_s=5.0).receive(1024, time.monotonic() + 0.1)
        assert time.monotonic() - start < 1.0
        episode.sendall(protocol.HEADER.pack(10) + b"{")
        episode.close()
        with pytest.raises(protocol.PeerClosed):  # the episode went away while the host polled
            conn.receive(1024, time.monotonic() + 1)
    finally:
        host.close()
        episode.close()

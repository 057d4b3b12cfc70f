"""The worker's frame reader on a real socket pair: frames split and joined however the peer's
writes fall, large frames, and the ways a connection can end."""

import socket
import struct
import threading

import pytest

from ttlstate import protocol as p
from ttlstate.errors import AuthError, ProtocolError
from ttlstate.frame_source import FrameSource


def framed(body: bytes) -> bytes:
    return struct.pack("<I", len(body)) + body


@pytest.fixture
def pair():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    yield a, b
    a.close()
    b.close()


def send_later(sock, pieces):
    """Sends each piece in its own write, from another thread (the reader blocks meanwhile)."""
    def run():
        for piece in pieces:
            sock.sendall(piece)
        sock.shutdown(socket.SHUT_WR)
    t = threading.Thread(target=run)
    t.start()
    return t


def test_many_frames_in_one_write_and_one_frame_in_many(pair):
    a, b = pair
    bodies = [bytes([i]) * (i * 7 + 1) for i in range(50)]
    stream = b"".join(framed(x) for x in bodies)
    # one write holding them all, then the same bytes one at a time
    t = send_later(a, [stream] + [stream[i:i + 1] for i in range(len(stream))])
    frames = FrameSource(b, buffer_bytes=64)
    got = [frames.next() for _ in range(2 * len(bodies))]
    assert frames.next() is None  # clean EOF between frames
    t.join()
    assert got == bodies + bodies


def test_frames_larger_than_the_buffer_arrive_whole(pair):
    a, b = pair
    big = bytes(range(256)) * 5000  # 1.28 MB: several pieces
    small = b"after"
    t = send_later(a, [framed(big)[:100], framed(big)[100:] + framed(small)])
    frames = FrameSource(b, buffer_bytes=4096)
    assert frames.next() == big
    assert frames.next() == small
    assert frames.next() is None
    t.join()


def test_a_header_over_the_limit_is_refused_before_its_body(pair):
    a, b = pair
    a.sendall(struct.pack("<I", 5000))  # announces 5000 bytes, sends none
    with pytest.raises(AuthError, match="5000 bytes"):
        FrameSource(b).next(limit=1024)


@pytest.mark.parametrize("cut", [2, 4, 9])
def test_a_connection_closed_inside_a_frame_is_a_protocol_error(pair, cut):
    a, b = pair
    t = send_later(a, [framed(b"0123456789")[:cut]])
    with pytest.raises(ProtocolError):
        FrameSource(b, buffer_bytes=8).next()
    t.join()


def test_an_empty_or_oversized_header_is_a_protocol_error(pair):
    a, b = pair
    a.sendall(struct.pack("<I", 0))
    with pytest.raises(ProtocolError, match="empty frame"):
        FrameSource(b).next()
    a.sendall(struct.pack("<I", p.MAX_FRAME + 1))
    with pytest.raises(ProtocolError, match="exceeds"):
        FrameSource(b).next()

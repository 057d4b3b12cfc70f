"""The frames a worker receives on one connection, read with as few system calls as the
peer's writes allow.

One `recv` takes whatever has arrived, up to the buffer's size: a JVM that sends a
`WRITE_BATCH` and then a `GET` usually costs one call, not four (a header and a body each).
A frame larger than the buffer is received in pieces of at most `PIECE_BYTES`, so memory
follows the bytes that really arrive, never the length a header announces.
"""

from __future__ import annotations

import socket

from . import protocol as p
from .errors import AuthError, ProtocolError

BUFFER_BYTES = 1 << 16
PIECE_BYTES = 1 << 20


class FrameSource:
    """Frame bodies from `conn`, in order. Not thread-safe (one per connection)."""

    def __init__(self, conn: socket.socket, buffer_bytes: int = BUFFER_BYTES):
        self.conn = conn
        self.buf = bytearray(buffer_bytes)
        self.view = memoryview(self.buf)
        self.start = 0  # first byte not yet returned
        self.end = 0  # one past the last byte received

    def next(self, limit: int = p.MAX_FRAME) -> bytes | None:
        """The next frame's body; None at a clean EOF (between frames). A header announcing
        more than `limit` bytes is refused before its body is read."""
        if not self._buffered(4):
            return None
        n = p.frame_length(bytes(self.view[self.start:self.start + 4]))
        if n > limit:
            raise AuthError(f"first frame of {n} bytes is not a HELLO (at most {limit} bytes)")
        self.start += 4
        if n <= len(self.buf):
            if not self._buffered(n):
                raise ProtocolError("connection closed after a frame header")
            body = bytes(self.view[self.start:self.start + n])
            self.start += n
            return body
        return self._large(n)

    def _buffered(self, n: int) -> bool:
        """Makes `n` (<= the buffer's size) bytes available from `start`; False if the peer
        closed before sending any of them, ProtocolError if it closed in between."""
        if self.end - self.start >= n:
            return True
        if self.start + n > len(self.buf):  # move what is left to the front
            left = self.end - self.start
            self.buf[:left] = self.view[self.start:self.end]
            self.start, self.end = 0, left
        had = self.end - self.start
        while self.end - self.start < n:
            k = self.conn.recv_into(self.view[self.end:], len(self.buf) - self.end)
            if k == 0:
                if self.end - self.start == had == 0:
                    return False
                raise ProtocolError(f"connection closed inside a frame "
                                    f"({self.end - self.start} of {n} bytes)")
            self.end += k
        return True

    def _large(self, n: int) -> bytes:
        """A body larger than the buffer: what is buffered, then pieces as they arrive."""
        pieces = [bytes(self.view[self.start:self.end])]
        got = self.end - self.start
        self.start = self.end = 0
        while got < n:
            piece = bytearray(min(n - got, PIECE_BYTES))
            view = memoryview(piece)
            filled = 0
            while filled < len(piece):
                k = self.conn.recv_into(view[filled:], len(piece) - filled)
                if k == 0:
                    raise ProtocolError(f"connection closed inside a frame ({got + filled} of {n} bytes)")
                filled += k
            pieces.append(piece)
            got += filled
        return b"".join(pieces)

"""Reading a child's pipe without ever blocking: whole records only, decoded from multiprocessing's own
framing, so a half-written record (a child killed mid-send) never stalls the trainer."""

from __future__ import annotations

import os
import struct
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from typing import Any

READ_CHUNK = 1 << 20  # at most one pipe's worth (64 KiB by default) is there per read anyway

# Connection's framing (CPython 3.11 Lib/multiprocessing/connection.py, Connection._send_bytes and
# _recv_bytes, checked against the 3.11.7 source on the dev machine): a 4-byte big-endian signed length, or
# -1 followed by an 8-byte big-endian unsigned length for payloads over 0x7fffffff bytes; then the payload,
# a ForkingPickler pickle (Connection.send / recv).
_HEADER = struct.Struct("!i")
_LONG_HEADER = struct.Struct("!Q")


class RecordReader:
    """The read end of a child's one-way pipe, read without ever blocking.

    ``Connection.recv`` blocks until a whole message is there: after ``poll()`` saw its first bytes, a writer
    stopped mid-message (SIGSTOP) would block the trainer forever, its hang timeout included. This reads
    whatever bytes are available into a buffer and decodes a record only when all of it is buffered.
    ``fileno()`` makes it a valid object for ``multiprocessing.connection.wait``.
    """

    def __init__(self, connection: Connection):
        self.connection = connection
        self.fd = connection.fileno()
        os.set_blocking(self.fd, False)  # only the trainer holds this read end (spawn/forkserver children)
        self.buffer = bytearray()
        self.at_eof = False
        self.bytes_read = 0

    def fileno(self) -> int:
        """The pipe's file descriptor, for ``multiprocessing.connection.wait``."""
        return self.fd

    def _whole(self) -> tuple[int, int] | None:
        """(start, end) of the first record's payload in the buffer, or None until all of it has arrived."""
        if len(self.buffer) < _HEADER.size:
            return None
        (size,) = _HEADER.unpack_from(self.buffer)
        start = _HEADER.size
        if size == -1:
            if len(self.buffer) < start + _LONG_HEADER.size:
                return None
            (size,) = _LONG_HEADER.unpack_from(self.buffer, start)
            start += _LONG_HEADER.size
        return (start, start + size) if len(self.buffer) >= start + size else None

    def pending(self) -> bool:
        """Whether a whole record is buffered (then a wait on the pipe must not block)."""
        return self._whole() is not None

    def next(self, read_until: float = float("inf")) -> tuple[bool, Any]:
        """``(True, record)`` for the next whole record; ``(False, None)`` when none is whole yet: nothing
        more to read now, or ``bytes_read`` has reached ``read_until``.

        Raises EOFError once the writer is gone and no whole record is left; a record it did not finish
        (killed mid-write) is dropped, as ``Connection.recv`` would have raised on it.
        """
        while True:
            frame = self._whole()
            if frame is not None:
                start, end = frame
                payload = bytes(self.buffer[start:end])
                del self.buffer[:end]
                return True, ForkingPickler.loads(payload)
            if self.at_eof:
                self.buffer.clear()
                raise EOFError
            if self.bytes_read >= read_until:
                return False, None
            try:
                chunk = os.read(self.fd, READ_CHUNK)
            except BlockingIOError:  # the pipe is empty for now: the rest of a record may come later
                return False, None
            self.at_eof = not chunk
            self.buffer += chunk
            self.bytes_read += len(chunk)

    def close(self) -> None:
        """Close the read end of the pipe."""
        self.connection.close()

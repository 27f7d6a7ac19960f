"""The grader's side of the runner's two pipes (see runner.py for the other side): signed frames."""

from __future__ import annotations

import ast
import contextlib
import hashlib
import hmac
import os
import threading


# Held by every ast.parse / ast.literal_eval in the grader's threads: in CPython 3.11 they share one
# recursion counter per interpreter (gh-106905), and two at once can fail with "SystemError: AST
# constructor recursion depth mismatch", more often the busier the machine.
PARSE_LOCK = threading.Lock()


class Channel:
    """The grader's side of the runner's two pipes: frames in, replies out.

    A frame is [length][kind][signature][repr of a plain tuple]: kind 1 is signed with ``key`` (a keyed
    BLAKE2b digest that only the runner's graded child can make, see runner._make_signer), kind 0 is an
    unsigned note. ``handler(message, signed)`` gets each message (parsed with ``ast.literal_eval``; a
    signed one only if its signature is right) and returns bytes to send back, or None. A frame that
    cannot be parsed or whose signature is wrong, or a handler that raises ``Channel.Stop``, ends the
    conversation and stops the run."""

    class Stop(Exception):
        pass

    def __init__(self, handler, key: bytes = b""):
        self.handler = handler
        self.key = key
        self.finished = threading.Event()  # the runner said it is done, or the conversation broke down
        self.problem = ""
        self.failure: Exception | None = None  # the grader's own error while serving: no grade can come of it
        self.read_end, self.runner_out = os.pipe()
        self.runner_in, self.write_end = os.pipe()

    def serve(self) -> None:
        with open(self.read_end, "rb", buffering=0) as incoming:
            try:
                while True:
                    header = _read_exactly(incoming, 4)
                    if header is None:
                        return
                    size = int.from_bytes(header, "big")
                    if size > MAX_FRAME_BYTES:
                        raise Channel.Stop(f"the runner sent a frame of {size:,} bytes")
                    data = _read_exactly(incoming, size)
                    if data is None:
                        return
                    signed = data[:1] == b"\x01"
                    if signed:
                        signature, data = data[1:1 + SIGNATURE_BYTES], data[1 + SIGNATURE_BYTES:]
                        expected = hashlib.blake2b(data, key=self.key, digest_size=SIGNATURE_BYTES).digest()
                        if not self.key or not hmac.compare_digest(signature, expected):
                            raise Channel.Stop("a message signed with a key other than the grader's")
                    elif data[:1] == b"\x00":
                        data = data[1:]
                    else:
                        raise Channel.Stop("a frame out of the grader's protocol")
                    try:
                        with PARSE_LOCK:
                            message = ast.literal_eval(data.decode("utf-8"))
                    except (ValueError, SyntaxError, UnicodeDecodeError, MemoryError, RecursionError) as error:
                        raise Channel.Stop(f"unreadable message from the sandbox ({type(error).__name__})")
                    reply = self.handler(message, signed)
                    if reply is not None:
                        os.write(self.write_end, len(reply).to_bytes(4, "big"))
                        view = memoryview(reply)
                        while view:
                            view = view[os.write(self.write_end, view):]
            except Channel.Stop as stop:
                self.problem = str(stop)
            except OSError:
                pass
            except Exception as error:  # the grader's fault, not the runner's: say so, never charge the student
                self.failure = error
            finally:
                self.finished.set()

    def close_runner_ends(self) -> None:
        """Our copies of the ends the runner uses (it has its own once started). Each fd is closed once:
        closing a number twice could close another thread's file that reused it."""
        for name in ("runner_out", "runner_in"):
            fd = getattr(self, name)
            if fd >= 0:
                setattr(self, name, -1)
                with contextlib.suppress(OSError):
                    os.close(fd)

    def close(self) -> None:
        self.close_runner_ends()
        if self.write_end >= 0:
            fd, self.write_end = self.write_end, -1
            with contextlib.suppress(OSError):
                os.close(fd)


MAX_FRAME_BYTES = 32 << 20
SIGNATURE_BYTES = 32


def _read_exactly(stream, count: int) -> bytes | None:
    chunks = []
    while count:
        chunk = stream.read(min(count, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)

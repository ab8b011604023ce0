"""stdout and stderr of the `trainsim` executable (sim/cli/entry.py takes them): a closed
stdout is refused (exit 2); a reader that goes away (`| head -1`) ends the command quietly
with exit 0, as Unix tools do; a stream that cannot be written (/dev/full) is exit 2 naming
it; an encoding without the characters trainsim prints (PYTHONIOENCODING=ascii) gets their
ASCII look-alikes. Light: imported while the command loads."""

from __future__ import annotations

import codecs
import contextlib
import errno
import io
import os
import sys

STREAMS = ((1, "stdout"), (2, "stderr"))


class StreamFailed(Exception):
    """Writing to stdout or stderr failed (`stream`: which; `error`: the OSError). Not an
    OSError, so that nothing taking it for a run file's disk error handles it on the way."""

    def __init__(self, stream: str, error: OSError):
        self.stream, self.error = stream, error
        super().__init__(f"{stream}: {error}")

    @property
    def reader_gone(self) -> bool:
        """The pipe's reader closed it (`| head -1`): not an error, the answer was not wanted."""
        return isinstance(self.error, BrokenPipeError) or self.error.errno == errno.EPIPE

    def message(self) -> str:
        where = self.stream
        with _last_word():
            target = os.readlink(f"/proc/self/fd/{1 if self.stream == 'stdout' else 2}")
            if target.startswith("/"):
                where = f"{self.stream} ({target})"
        why = self.error.strerror or str(self.error)
        return f"error: cannot write to {where}: {why} (the answer is lost: send {self.stream} elsewhere)"


def _last_word() -> contextlib.AbstractContextManager:
    """What a last word on a failing stream may raise, suppressed."""
    return contextlib.suppress(OSError, StreamFailed, ValueError)


class _StreamFile(io.FileIO):
    """The file under sys.stdout or sys.stderr: a failed write raises StreamFailed naming it."""

    def __init__(self, fd: int, stream: str):
        super().__init__(fd, "w", closefd=False)
        self.stream = stream

    def write(self, data) -> int | None:  # type: ignore[override]
        try:
            return super().write(data)
        except OSError as exc:
            raise StreamFailed(self.stream, exc) from None


# what an encoding without them (PYTHONIOENCODING=ascii) prints for trainsim's characters
ASCII_LOOKALIKES = {
    "—": "-", "–": "-", "−": "-", "‑": "-", "±": "+/-", "×": "x", "·": ".", "…": "...",
    "≤": "<=", "≥": ">=", "≈": "~", "→": "->", "←": "<-", "↑": "^", "↓": "v", "°": " deg",
    "µ": "u", "μ": "u", "‘": "'", "’": "'", "“": '"', "”": '"', "•": "*", "√": "sqrt",
    "τ": "tau", "δ": "delta", "σ": "sigma", "β": "beta", "λ": "lambda", "Δ": "delta",
    "\u00a0": " ", "\u202f": " ", "\u2009": " ", "²": "^2", "³": "^3", "½": "1/2",
    "━": "-", "─": "-", "│": "|", "┃": "|", "█": "#", "▏": "|", "▌": "|", "✓": "ok", "✗": "x",
}  # fmt: skip
ASCII_ERRORS = "trainsim-ascii"


def _ascii_lookalike(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    text = error.object[error.start : error.end]
    return "".join(ASCII_LOOKALIKES.get(c, "?") for c in text), error.end


codecs.register_error(ASCII_ERRORS, _ascii_lookalike)


def _can_encode(encoding: str) -> bool:
    try:
        "—±×…·≤".encode(encoding)
    except (UnicodeError, LookupError):
        return False
    return True


def _wrap(original, fd: int, stream: str):
    """A text stream like `original` (encoding, buffering; None: Python found it closed)
    over `_StreamFile`. What `original` holds is written first."""
    if original is not None:
        with _last_word():
            original.flush()
    encoding = getattr(original, "encoding", None) or "utf-8"
    errors = getattr(original, "errors", None) or "strict"
    if not _can_encode(encoding):
        errors = ASCII_ERRORS
    return io.TextIOWrapper(
        io.BufferedWriter(_StreamFile(fd, stream)),
        encoding=encoding,
        errors=errors,
        line_buffering=bool(getattr(original, "line_buffering", stream == "stderr")),
        write_through=bool(getattr(original, "write_through", False)),
    )


def _closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


def take_streams() -> None:
    """Refuse a closed stdout (exit 2); put /dev/null on a closed stderr (warnings are lost,
    the answer is not); then wrap both (`_wrap`)."""
    if _closed(2):
        null = os.open(os.devnull, os.O_WRONLY)  # the lowest free descriptor: 2
        if null != 2:
            os.dup2(null, 2)
            os.close(null)
    sys.stderr = _wrap(sys.stderr, 2, "stderr")
    if _closed(1):
        print(
            "error: stdout is closed: trainsim prints its answer there; give it a terminal, "
            "a file or a pipe (> /dev/null to discard it)",
            file=sys.stderr,
        )
        sys.exit(2)
    sys.stdout = _wrap(sys.stdout, 1, "stdout")


def flush(code: int | str | None) -> int | str | None:
    """Write what stdout and stderr still hold; the exit code then (`stream_failed`'s if one
    fails, else `code`)."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except StreamFailed as failure:
        return stream_failed(failure) or code
    return code


def stream_failed(failure: StreamFailed) -> int:
    """The exit code for a stream that failed, after saying so (unless the reader left or it
    is stderr that failed): 0 when the reader left, else 2. The stream is pointed at
    /dev/null, so that nothing later (the interpreter's last flush) fails on it again."""
    said = None if failure.reader_gone or failure.stream == "stderr" else failure.message()
    fd = dict((name, fd) for fd, name in STREAMS)[failure.stream]
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, fd)
    os.close(null)
    if said is not None:
        with _last_word():
            print(said, file=sys.stderr)
            sys.stderr.flush()
    return 0 if failure.reader_gone else 2

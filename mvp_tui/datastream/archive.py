"""The frame archive: every frame of a run as one JSON line, in the seed's record format.

    {"arrival_seq": 0, "source": "orchestrator", "stream": "test-node#42",
     "channel": "stdout", "position": 7,
     "payload": {"encoding": "utf8", "value": "hello λ"}}

A payload that is not valid UTF-8 is kept exactly: `{"encoding": "bytes", "value": [255, 0,
65]}`. With `timing=True` each record also carries `"t"` (seconds since the archive was
opened, after the seed's keys) so a replay can keep the original pacing; readers accept
records with or without it.

Flushing: the seed flushes after every record. Here, inside a running event loop, the
records queued during one turn of the loop (every line of one read from a node's pipe or SSH
stream) are handed to the OS in one write at the end of that turn, so a crash of mvp-tui
loses no record that was ingested in an earlier turn (`kill -9` included: the kernel holds
what was written; a power loss is the OS's page cache, as for the seed). Without a loop
(scripts, replays), writes are buffered and flushed every `flush_records` records, every
`flush_interval_s` seconds (checked on write) and on `close()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import json
import os
import stat
import time
from collections.abc import Callable, Iterator
from json.encoder import encode_basestring
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple, NoReturn, TextIO

import msgspec

from mvp_tui.datastream.frame import Frame, StreamId

DEFAULT_FLUSH_RECORDS = 4096
DEFAULT_FLUSH_INTERVAL_S = 1.0

_encode_str: Callable[[str], str] = encode_basestring


# The loop this thread runs, or None: C-fast and without raising (~50 ns; asked once per
# loop turn with records, and per record only where no loop runs).
_running_loop: Callable[[], asyncio.AbstractEventLoop | None] = asyncio._get_running_loop


class ArchiveError(ValueError):
    """An archive that cannot be opened or read, naming the file (and line) and the fix."""


class ArchiveRecord(NamedTuple):
    """One archive line read back: the frame and how it arrived (a NamedTuple, like Frame,
    as replay and seek build one per line)."""

    arrival_seq: int
    source: str
    frame: Frame
    t: float | None = None


def _open_private(path: Path) -> TextIO:
    """The archive opened for appending, readable by its owner only (it holds node logs and
    run events), never through a symlink (one planted at the path would redirect them)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, 0o600)
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            os.fchmod(fd, 0o600)  # an archive an older version left readable by others
        return os.fdopen(fd, "a", encoding="utf-8", newline="\n")
    except BaseException:
        os.close(fd)
        raise


class FrameArchive:
    """Appends frames to a JSONL file in the seed's format; keeps every frame."""

    def __init__(
        self,
        path: Path | str,
        *,
        timing: bool = False,
        flush_records: int = DEFAULT_FLUSH_RECORDS,
        flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = _open_private(self.path)
        except OSError as error:
            why = error.strerror or str(error)
            if error.errno == errno.ELOOP:
                why = "it is a symbolic link, which the archive never follows"
            raise ArchiveError(
                f"open datastream frame log {self.path}: {why}; "
                "fix: choose a writable path for the frame archive"
            ) from error
        self.next_seq = 0
        self._timing = timing
        self._clock = clock
        self._opened_at = clock()
        self._last_flush = self._opened_at
        self._flush_records = max(1, flush_records)
        self._flush_interval_s = flush_interval_s
        self._pending: list[str] = []
        self._flush_due = False  # a flush is scheduled for the end of this loop turn
        self.error: ArchiveError | None = None
        self.lost = 0
        # JSON text of `"source":…,"stream":…,"channel":…,"position":` per channel, with the
        # source and stream it was made for: the same strings repeat for every frame.
        self._heads: dict[str, tuple[str, StreamId, str]] = {}

    def record(self, source: str, frame: Frame, value: str | None = None) -> None:
        """Queue one frame's record; flushes when enough records or time have gathered.

        `value`, when the caller has it, is the payload's UTF-8 text already as a JSON
        string (a frame line's own string payload): it is written as is.
        """
        stream, channel, position, payload = frame
        cached = self._heads.get(channel)
        if (
            cached is None
            or (cached[0] is not source and cached[0] != source)
            or (cached[1] is not stream and cached[1] != stream)
        ):
            cached = self._head(source, frame)
        if value is not None:
            encoding = "utf8"
        else:
            try:
                value = _encode_str(payload.decode())
                encoding = "utf8"
            except UnicodeDecodeError:
                value = "[" + ",".join(map(str, payload)) + "]"
                encoding = "bytes"
        now = self._clock()
        end = f',"t":{round(now - self._opened_at, 6)}}}\n' if self._timing else "}\n"
        pending = self._pending
        pending.append(
            f'{{"arrival_seq":{self.next_seq}{cached[2]}{position},'
            f'"payload":{{"encoding":"{encoding}","value":{value}}}{end}'
        )
        self.next_seq += 1
        if len(pending) >= self._flush_records or now - self._last_flush >= self._flush_interval_s:
            self.flush()
        elif not self._flush_due:
            loop = _running_loop()
            if loop is not None:  # one write for everything this turn of the loop queues
                self._flush_due = True
                loop.call_soon(self._flush_turn)

    def _flush_turn(self) -> None:
        self._flush_due = False
        if self._pending and not self._file.closed:
            self.flush()

    def _head(self, source: str, frame: Frame) -> tuple[str, StreamId, str]:
        """JSON text from `,"source"` to `"position":` for frames like this one, cached per
        channel with the source and stream it was made for."""
        head = (
            f',"source":{_encode_str(source)},"stream":{_encode_str(str(frame.stream))},'
            f'"channel":{_encode_str(frame.channel)},"position":'
        )
        if len(self._heads) > 4096:
            self._heads.clear()
        cached = self._heads[frame.channel] = (source, frame.stream, head)
        return cached

    def flush(self) -> None:
        """Write queued records and flush the file.

        A write error (disk full, I/O error) stops the archive, not the run: `error` then
        says what happened and the fix, and `lost` counts records that were not written.
        """
        pending = self._pending
        self._last_flush = self._clock()
        if self.error is not None:
            self.lost += len(pending)
            pending.clear()
            return
        try:
            if pending:
                self._file.write("".join(pending))
            self._file.flush()
        except OSError as error:
            self.lost += len(pending)
            self.error = ArchiveError(
                f"write frame archive {self.path}: {error.strerror or error}; fix: free disk "
                "space or point the frame archive elsewhere (frames from here on are not "
                "archived; the run goes on)"
            )
        finally:
            pending.clear()

    def close(self) -> None:
        """Flush and close; a write error here lands in `error` like any other."""
        if not self._file.closed:
            self.flush()
            # A buffer that failed to flush is already counted in `lost`.
            with contextlib.suppress(OSError):
                self._file.close()

    @property
    def closed(self) -> bool:
        return self._file.closed

    def __enter__(self) -> FrameArchive:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def read_archive(path: Path | str) -> Iterator[ArchiveRecord]:
    """Every record of an archive, in file order.

    A line that is not a record raises ArchiveError naming the file and line. A last line
    cut short without its newline (the mark of a crash mid-write) is skipped.
    """
    path = Path(path)
    try:
        handle = path.open("r", encoding="utf-8", newline="\n")
    except OSError as error:
        raise ArchiveError(
            f"open frame archive {path}: {error.strerror or error}; fix: check the path"
        ) from error
    with handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield parse_record(line)
            except ValueError as error:
                if not line.endswith("\n"):
                    return  # torn final write
                raise ArchiveError(
                    f"{path}:{number}: not a frame archive record ({error}); fix: remove or "
                    "repair that line, or point at an archive written by mvp-tui"
                ) from None


def read_frames(path: Path | str) -> Iterator[Frame]:
    """Just the frames of an archive, in arrival order."""
    return (record.frame for record in read_archive(path))


def parse_record(line: str) -> ArchiveRecord:
    """One archive line as a record; ValueError saying which field is wrong."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(f"invalid JSON: {error.msg} at column {error.colno}") from None
    if not isinstance(data, dict):
        raise ValueError("a record is a JSON object")
    get = data.get
    seq, source, stream = get("arrival_seq"), get("source"), get("stream")
    channel, position, payload = get("channel"), get("position"), get("payload")
    if not (
        type(seq) is int
        and type(source) is str
        and type(stream) is str
        and type(channel) is str
        and type(position) is int
        and type(payload) is dict
    ):
        _explain(data)  # raises, naming the first bad field
    t = data.get("t")
    if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float))):
        raise ValueError(f"'t' is {t!r}, not a number of seconds")
    frame = Frame(_stream_id(stream), channel, position, _payload(payload))
    return ArchiveRecord(seq, source, frame, t)


class _Payload(msgspec.Struct):
    encoding: str
    value: str | list[int]


class _Record(msgspec.Struct):
    arrival_seq: int
    source: str
    stream: str
    channel: str
    position: int
    payload: _Payload
    t: float | None = None


_decode_record = msgspec.json.Decoder(_Record).decode
_new_tuple = tuple.__new__


def parse_record_bytes(line: bytes) -> ArchiveRecord:
    """`parse_record` of the line's UTF-8 bytes, same results and errors, msgspec-fast (a
    seek re-reads thousands of records). What msgspec reads differently from the standard
    library (lone surrogates, NaN, a bad field) goes through `parse_record`."""
    try:
        record = _decode_record(line)
        payload = record.payload
        value = payload.value
        if payload.encoding == "utf8" and type(value) is str:
            data = value.encode()
        elif payload.encoding == "bytes" and type(value) is list:
            data = bytes(value)
        else:
            raise ValueError("payload")
        frame = _new_tuple(
            Frame, (_stream_id(record.stream), record.channel, record.position, data)
        )
        return _new_tuple(ArchiveRecord, (record.arrival_seq, record.source, frame, record.t))
    except (msgspec.MsgspecError, ValueError):
        return parse_record(line.decode())


_KINDS: dict[str, type[Any]] = {
    "arrival_seq": int,
    "source": str,
    "stream": str,
    "channel": str,
    "position": int,
    "payload": dict,
}


@functools.lru_cache(maxsize=256)
def _stream_id(text: str) -> StreamId:
    """StreamId.parse, remembered: an archive holds a handful of streams."""
    return StreamId.parse(text)


def _explain(data: dict[str, Any]) -> NoReturn:
    for key, kind in _KINDS.items():
        _field(data, key, kind)
    raise ValueError("a record field has an unexpected type")


def _field(data: dict[str, Any], key: str, kind: type[Any]) -> Any:
    value = data.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"{key!r} is {value!r}, not a {kind.__name__}")
    return value


def _payload(payload: dict[str, Any]) -> bytes:
    encoding, value = payload.get("encoding"), payload.get("value")
    if encoding == "utf8" and isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    if encoding == "bytes" and isinstance(value, list):
        try:
            return bytes(value)
        except (TypeError, ValueError):
            raise ValueError("payload bytes are not a list of 0..255 integers") from None
    raise ValueError(f"payload {payload!r} is not {{encoding: utf8|bytes, value}}")

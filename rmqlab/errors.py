"""The rmqlab error hierarchy: every error a user can cause names the file and the offset.

One root, :class:`RmqlabError`; subclasses carry structured fields so the CLI can print one clear
line and tests can assert on *where* and *why* without parsing messages.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "CorruptRecord",
    "DiskFull",
    "InvalidArgument",
    "InvalidTopic",
    "MappedFileError",
    "NotAMessage",
    "NotAStore",
    "ReadOnlyStore",
    "RmqlabError",
    "ScheduleRecordError",
    "StoreLocked",
    "TruncatedRecord",
]


class RmqlabError(Exception):
    """Root of every error rmqlab raises on purpose."""


class CorruptRecord(RmqlabError):
    """A record (message, unit, header) failed a check at an exact place.

    ``file`` may be None when the buffer is not a file (codec tests); ``offset`` is the byte
    offset inside that buffer or file where the bad record starts; ``reason`` is a short
    machine-friendly word (``bad_magic``, ``size_out_of_range``, ``crc_mismatch``,
    ``truncated``, ``length_mismatch``, ``bad_field``) and ``detail`` says more for a person.
    """

    def __init__(self, file: str | None, offset: int, reason: str, detail: str = "") -> None:
        self.file = file
        self.offset = offset
        self.reason = reason
        self.detail = detail
        where = f"{file} at offset {offset}" if file else f"offset {offset}"
        msg = f"corrupt record in {where}: {reason}"
        super().__init__(f"{msg} ({detail})" if detail else msg)

    def with_file(self, file: str, base: int = 0) -> CorruptRecord:
        """Return a copy that names ``file``; ``base`` is added to the offset."""
        cls = type(self)
        return cls.__new__(cls)._init_copy(file, self.offset + base, self.reason, self.detail)

    def _init_copy(self, file: str, offset: int, reason: str, detail: str) -> CorruptRecord:
        CorruptRecord.__init__(self, file, offset, reason, detail)
        return self


class TruncatedRecord(CorruptRecord):
    """The buffer ends before the record does (a torn write, or a short last file)."""

    def __init__(self, file: str | None, offset: int, detail: str = "") -> None:
        super().__init__(file, offset, "truncated", detail)

    def _init_copy(self, file: str, offset: int, reason: str, detail: str) -> CorruptRecord:
        TruncatedRecord.__init__(self, file, offset, detail)
        return self


class NotAMessage(CorruptRecord, TypeError):
    """A message was expected where the bytes hold a blank record or end of data (zeros): a
    consume queue unit or an offset pointing where no message starts. Also a ``TypeError``, what
    rmqlab raised here before it named the place."""

    def __init__(self, file: str | None, offset: int, detail: str = "") -> None:
        super().__init__(file, offset, "not_a_message", detail)

    def _init_copy(self, file: str, offset: int, reason: str, detail: str) -> CorruptRecord:
        NotAMessage.__init__(self, file, offset, detail)
        return self


class MappedFileError(RmqlabError):
    """A mapped file cannot be created, opened, sized or written as asked."""

    def __init__(self, file: str, detail: str) -> None:
        self.file = file
        self.detail = detail
        super().__init__(f"{file}: {detail}")


class DiskFull(MappedFileError):
    """No space left for the next pages of a mapped file: writing them would raise SIGBUS, which
    kills the whole process (a Jupyter kernel), so nothing is written there."""

    def __init__(self, file: str, offset: int) -> None:
        self.offset = offset
        super().__init__(file, (
            f"no space left on the file system for the pages from offset {offset} (a write there "
            "would kill the process with SIGBUS): nothing was written; free space, or let cleanup "
            "delete expired files, and try again"))


class ReadOnlyStore(RmqlabError):
    """A write was attempted through a read-only mapping or a read-only store."""


class StoreLocked(RmqlabError):
    """Another writer holds the store's ``lock`` file."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"{path}: store is locked by another writer (lock failed, MQ already started)")


class InvalidTopic(RmqlabError):
    """A topic name RocketMQ would reject (and which could otherwise escape the store dir)."""

    def __init__(self, topic: str, reason: str) -> None:
        self.topic = topic
        self.reason = reason
        super().__init__(f"invalid topic {topic!r}: {reason}")


class NotAStore(RmqlabError):
    """A path that is not a RocketMQ store directory (or does not exist)."""

    def __init__(self, path: str, detail: str) -> None:
        self.path = path
        super().__init__(f"{path}: {detail}")


class ConfigError(RmqlabError):
    """A configuration value out of its allowed range."""


class InvalidArgument(RmqlabError, TypeError):
    """A store call given an argument of the wrong type (a ``str`` queue id, a float offset, no
    topic): refused at once, where it would otherwise answer for a queue or offset that does not
    exist (an empty queue, offset 0) or fail deep inside."""


class ScheduleRecordError(RmqlabError):
    """A due delayed message whose schedule record cannot be put back (no ``REAL_TOPIC``, a
    ``REAL_QID`` that is not an int): RocketMQ's delivery task throws and retries it every 10 s."""

    def __init__(self, offset: int, detail: str) -> None:
        self.offset = offset
        super().__init__(f"schedule record at commit log offset {offset}: {detail}")

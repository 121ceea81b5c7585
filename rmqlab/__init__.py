"""rmqlab: Apache RocketMQ's storage engine, byte-compatible, for learning, teaching and operating.

The supported public API is re-exported here; nothing optional (pandas, plotly, pyspark) is
imported by ``import rmqlab``.
"""

from __future__ import annotations

from rmqlab.codec.batch import MessageBatch
from rmqlab.config import MessageStoreConfig
from rmqlab.errors import (
    ConfigError,
    CorruptRecord,
    InvalidArgument,
    InvalidTopic,
    NotAStore,
    ReadOnlyStore,
    RmqlabError,
    StoreLocked,
    TruncatedRecord,
)
from rmqlab.inspect.snapshot import open_snapshot
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "CorruptRecord",
    "InvalidArgument",
    "InvalidTopic",
    "Message",
    "MessageBatch",
    "MessageStore",
    "MessageStoreConfig",
    "NotAStore",
    "ReadOnlyStore",
    "RmqlabError",
    "StoreLocked",
    "TruncatedRecord",
    "__version__",
    "open_snapshot",
]

"""rmqlab.files: bytes on disk — mapped files, their queues, write-buffer pool and pre-allocation.

Knows nothing about messages: the store layer encodes records into the buffers these classes
expose. Every OS call beyond open/mmap lives in :mod:`rmqlab.files.fs`.
"""

from __future__ import annotations

from rmqlab.files.allocate_mapped_file_service import AllocateMappedFileService, AllocateRequest
from rmqlab.files.fs import (
    DiskUsageProbe,
    FileLock,
    FixedDiskUsage,
    fsync_dir,
    madvise_willneed,
    sparse_create,
    system_disk_usage,
    try_mlock,
    try_munlock,
    used_percent,
)
from rmqlab.files.mapped_file import (
    OS_PAGE_SIZE,
    AppendFn,
    MappedFile,
    SelectMappedBufferResult,
    WarmResult,
)
from rmqlab.files.mapped_file_queue import DELETE_FILES_BATCH_MAX, Gap, LoadError, MappedFileQueue
from rmqlab.files.transient_store_pool import TransientStorePool

__all__ = [
    "DELETE_FILES_BATCH_MAX",
    "OS_PAGE_SIZE",
    "AllocateMappedFileService",
    "AllocateRequest",
    "AppendFn",
    "DiskUsageProbe",
    "FileLock",
    "FixedDiskUsage",
    "Gap",
    "LoadError",
    "MappedFile",
    "MappedFileQueue",
    "SelectMappedBufferResult",
    "TransientStorePool",
    "WarmResult",
    "fsync_dir",
    "madvise_willneed",
    "sparse_create",
    "system_disk_usage",
    "try_mlock",
    "try_munlock",
    "used_percent",
]

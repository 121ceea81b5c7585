"""MessageStore hot paths vs baselines measured in the same run.

    python bench/bench_store.py [--n 100000] [--quick] [--dir /tmp] [--batch 32] [--tag-filter-only]

Rows (targets from the speed issue; every figure also printed as a ratio to its baseline):

* baseline copy        the same encoded 1 KiB records copied into a bare ``memoryview(mmap)``
                       of a fresh sparse file: the floor of the copy alone
* baseline encode      the plainest Python loop that makes each record (properties, body CRC,
                       one head ``pack_into``) and appends it to a bare mmap (``encode_append``):
                       what any writer of RocketMQ records in Python pays at least; the put
                       target's 0.3x is read against this one. Both baselines are measured
                       five times (after each threaded put run, the stepped and the batch puts; medians shown),
                       because a fresh mapping's page faults swing 2-3x with the VM's memory
* put_message          1 KiB body + tag + key, ASYNC_FLUSH, threaded store (reput, flush,
                       stats threads running); rate of the put loop, and of put + dispatch
                       drained ("end-to-end"); three runs, each followed by the baselines,
                       the median run shown (and the spread). Once the writer is 16 MiB
                       (``max_dispatch_behind_bytes``) ahead of dispatch it waits for it, so
                       the put loop runs at the rate of put and dispatch together; its first
                       10,000 puts (~12 MB, a burst under the bound) are shown apart
* put_messages         the same messages in batches of ``--batch``: lists of messages, and
                       the same batches pre-encoded by the producer (``MessageBatch``; the
                       producer's encode is timed apart and printed on its own row); three
                       runs of each, alternating, the median run shown (and the spread): one
                       run swings 1.5-2x with the VM's memory, and the ratio to single puts
                       with it
* get_message          32 messages of 1 KiB per call, zero-copy, lazy (never decoded)
* get + decode         the same calls, every returned message decoded and the fields a consumer
                       reads read (topic, body, tags, keys, queue offset); then also the whole
                       properties dict (parsed lazily, on first access)
* baseline decode      the plainest Python decode of the same records (``bare_decode``: one
                       head unpack, slices, the properties split into a dict) from a ``bytes``
                       copy of the CommitLog, positions known up front: get + decode is also
                       printed as a ratio to it, so a slow VM shows as a slow baseline
* query_message        by key, chain of 1 (unique key) and of 4 (key shared by 4 messages),
                       exact-key filtering included (median of single calls)
* offset by time       ``get_offset_in_queue_by_time`` (median)
* CQ numpy view        ``ConsumeQueue.units()`` and all three columns converted to native ints
* tag filter, ext on   ``get_message(32)`` with a tag filter pulled through a whole queue of
                       4 tags, with ``enable_consume_queue_ext`` off and on (every tags code an
                       ext address to resolve), two stepped stores built in the same run and
                       timed alternately: filter ``TagX`` (nothing matches: the scan) and
                       ``TagA`` (1 in 4), ms per 20k units; the ext-on row printed as a ratio to
                       the ext-off row (``--tag-filter-only`` runs these rows alone)
* CPU budget           last, the CPU per message of put and of dispatch apart (``bench_cpu_split``,
                       a stepped store) for single puts, lists and MessageBatches, against what
                       each put target leaves for both: a threaded store runs both on one GIL

Nothing here asserts; it prints. Take the best of a few runs on a quiet machine.
"""

from __future__ import annotations

import argparse
import gc
import mmap
import os
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable

import numpy as np

from rmqlab import MessageBatch, MessageStore, MessageStoreConfig
from rmqlab.codec.crc import crc32
from rmqlab.codec.flags import MESSAGE_MAGIC_CODE_V1
from rmqlab.codec.message import decode_message, head_struct
from rmqlab.store.message import Message
from rmqlab.store.message_filter import TagFilter

TOPIC = "BenchTopic"
BODY = bytes(range(256)) * 4  # 1 KiB


def _messages(n: int, start: int = 0) -> list[Message]:
    # Each message carries a unique key and a key shared with 3 neighbours (chain of 4).
    return [
        Message(TOPIC, BODY, tags="TagA", keys=[f"key{i}", f"grp{i // 4}"], born_host=("10.0.0.7", 4242))
        for i in range(start, start + n)
    ]


def _config(root: str) -> MessageStoreConfig:
    return MessageStoreConfig(store_path_root_dir=root)


def _fresh(workdir: str, name: str) -> str:
    path = os.path.join(workdir, name)
    shutil.rmtree(path, ignore_errors=True)
    return path


def bench_baseline(workdir: str, records: list[bytes]) -> float:
    """Records/s copying ``records`` into a bare mmap of a fresh sparse file (cold pages)."""
    path = os.path.join(workdir, "baseline")
    size = sum(len(r) for r in records) + 4096
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.ftruncate(fd, size)
    mm = mmap.mmap(fd, size)
    os.close(fd)
    mv = memoryview(mm)
    t0 = time.perf_counter()
    pos = 0
    for r in records:
        n = len(r)
        mv[pos : pos + n] = r
        pos += n
    dt = time.perf_counter() - t0
    mv.release()
    mm.close()
    os.unlink(path)
    return len(records) / dt


_HEAD_V4 = head_struct(4, 4)  # TOTALSIZE .. BODYLENGTH, IPv4 hosts (spec §2.1)
_HEX4 = [f"{i:04X}" for i in range(1 << 16)]


def _props_template(store: MessageStore) -> tuple[str, str, str, bool]:
    """Where the KEYS string and the UNIQ_KEY go in the properties the store writes for this
    workload (RocketMQ's order for these three properties), as format segments: built once
    from one record the store encodes, outside any timing."""
    msg = _messages(1)[0]
    rec = decode_message(memoryview(bytes(store.commit_log.encode_record(msg, 0).data)))  # type: ignore[union-attr]
    raw = rec.properties_raw.decode()  # type: ignore[union-attr]
    ks, uniq = " ".join(msg.keys), rec.properties["UNIQ_KEY"]  # type: ignore[union-attr]
    ik, iu = raw.index(f"\x01{ks}\x02") + 1, raw.index(f"\x01{uniq}\x02") + 1
    if ik < iu:
        return raw[:ik], raw[ik + len(ks) : iu], raw[iu + len(uniq) :], True
    return raw[:iu], raw[iu + len(uniq) : ik], raw[ik + len(ks) :], False


def encode_append(path: str, msgs: list[Message], template: tuple[str, str, str, bool], keep: bool = False) -> float:
    """Records/s of the plainest loop that *makes* each record and appends it to a bare mmap.

    Per message: the KEYS string and a UNIQ_KEY (prefix + 16-bit hex counter) into the
    properties, the body CRC (the same ``rmqlab.codec.crc.crc32``), one ``pack_into`` of the
    head with queue offset, physical offset and store time, then body and tail copied. No lock,
    no offset table, no file roll, no msgId or result object, no stats, no dispatch: what any
    writer of a RocketMQ record must pay at least, in Python. ``keep`` leaves the file (sized to
    fit, zeros past the records), which decodes record by record: tests/bench checks it."""
    seg0, seg1, seg2, keys_first = template
    m = msgs[0]
    longest = _HEAD_V4.size + len(m.body) + 3 + len(m.topic) + len(f"{seg0}{' '.join(m.keys)}{seg1}{seg2}") + 64
    size = longest * len(msgs) + 4096
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.ftruncate(fd, size)
    mm = mmap.mmap(fd, size)
    os.close(fd)
    mv = memoryview(mm)
    pack, head_size, hex4 = _HEAD_V4.pack_into, _HEAD_V4.size, _HEX4
    born_ip, store_ip = bytes([10, 0, 0, 7]), bytes([127, 0, 0, 1])
    prefix = "7F0000010000" + "0" * 16  # UNIQ_KEY without its counter (28 hex digits)
    now_ms = time.time_ns
    t0 = time.perf_counter()
    pos = 0
    for i, m in enumerate(msgs):
        ks = " ".join(m.keys)
        uniq = prefix + hex4[i & 0xFFFF]
        props = (f"{seg0}{ks}{seg1}{uniq}{seg2}" if keys_first else f"{seg0}{uniq}{seg1}{ks}{seg2}").encode()
        topic = m.topic.encode()
        body = m.body
        tail = len(topic).to_bytes(1, "big") + topic + len(props).to_bytes(2, "big") + props
        total = head_size + len(body) + len(tail)
        now = now_ms() // 1_000_000
        pack(mv, pos, total, MESSAGE_MAGIC_CODE_V1, crc32(body) & 0x7FFFFFFF, m.queue_id, m.flag, i, pos, 0, now,
             born_ip, m.born_host[1], now, store_ip, 10911, 0, 0, len(body))
        p = pos + head_size
        mv[p : p + len(body)] = body
        mv[p + len(body) : pos + total] = tail
        pos += total
    dt = time.perf_counter() - t0
    mv.release()
    mm.close()
    if not keep:
        os.unlink(path)
    return len(msgs) / dt


def baselines(workdir: str, records: list[bytes], template: tuple) -> tuple[float, float]:
    """(copy, encode + append) records/s, each into a fresh file of ``workdir``. The messages are
    made here and dropped after: messages held across a store run are scanned by its GCs."""
    return (bench_baseline(workdir, records),
            encode_append(os.path.join(workdir, "baseline-enc"), _messages(len(records)), template))


PUT_RUNS = 3  # threaded put_message runs, each followed by the baselines


def _median_pair(values: list[tuple[float, float]]) -> tuple[float, float]:
    """The (wall, cpu) pair of the run with the median wall rate."""
    return sorted(values)[len(values) // 2]


def _encoded_records(store: MessageStore, n: int) -> list[bytes]:
    """n records of exactly the size the store writes (encoded by the store's own codec)."""
    cl = store.commit_log
    msg = _messages(1)[0]
    data = bytes(cl.encode_record(msg, store.clock.now_ms()).data)  # type: ignore[union-attr]
    return [data] * n


SPLIT_CHUNK = 8192  # messages put between dispatches in bench_cpu_split
BURST = 10_000  # puts timed apart at the start of a run: ~12 MB, under max_dispatch_behind_bytes


def bench_put(
    workdir: str, n: int, threaded: bool = True
) -> tuple[MessageStore, tuple[float, float], tuple[float, float], float, tuple[float, float]]:
    """(store, put msgs/s, end-to-end msgs/s incl. dispatch drained, record size, the first
    ``BURST`` puts' msgs/s); each rate as (wall, process CPU) — the CPU rate counts every
    thread's work, dispatch included. Past ``max_dispatch_behind_bytes`` (16 MiB) of records
    the threaded store's producer waits for dispatch, so the whole run is put and dispatch
    together; the burst is the put alone."""
    store = MessageStore.open(_fresh(workdir, "put"), _config(""), threaded=threaded)
    msgs = _messages(n)
    put = store.put_message
    burst = min(n, BURST)
    gc.freeze()  # the harness's inputs are not the store's garbage: no collection scans them
    c0 = time.process_time()
    t0 = time.perf_counter()
    for m in msgs[:burst]:
        put(m)
    tb = time.perf_counter()
    cb = time.process_time()
    for m in msgs[burst:]:
        put(m)
    t1 = time.perf_counter()
    c1 = time.process_time()
    gc.unfreeze()
    store.wait_dispatched(120)
    t2 = time.perf_counter()
    c2 = time.process_time()
    size = store.commit_log.get_max_offset() / n
    rates = (n / (t1 - t0), n / (c1 - c0)), (n / (t2 - t0), n / (c2 - c0))
    return store, *rates, size, (burst / (tb - t0), burst / (cb - c0))


def _encode_batches(store: MessageStore, groups: list[list[Message]]) -> list[MessageBatch]:
    """Each group as a producer of the store's version encodes it (``MessageBatch.from_messages``,
    UNIQ_KEYs from the store's generator)."""
    cl, clock = store.commit_log, store.clock
    version = store.config.rocketmq_version
    return [MessageBatch.from_messages(g, lambda: cl.new_uniq_key(clock.now_ms()), client_version=version)
            for g in groups]  # fmt: skip


def bench_put_batch(
    workdir: str, n: int, batch: int, encoded: bool = False
) -> tuple[tuple[float, float], tuple[float, float], float]:
    """(put msgs/s, end-to-end msgs/s) as (wall, process CPU) for put_messages of lists of
    ``batch`` messages, or with ``encoded`` of the same batches pre-encoded by the producer
    (``MessageBatch.from_messages``, outside the timed loop: its thread CPU us per message is
    the third value, 0.0 for lists). The lists put one shared 1 KiB body object, as bench_put
    does; a MessageBatch holds a copy of each body in its buffer, so its bodies are cache-cold."""
    store = MessageStore.open(_fresh(workdir, "batch-enc" if encoded else "batch"), _config(""), threaded=True)
    msgs = _messages(n)
    batches: list = [msgs[i : i + batch] for i in range(0, n, batch)]
    encode_us = 0.0
    if encoded:
        e0 = time.thread_time()
        batches = _encode_batches(store, batches)
        encode_us = (time.thread_time() - e0) / n * 1e6
        del msgs  # a producer holds its encoded batches, not the messages too
    put = store.put_messages
    gc.freeze()  # the harness's inputs are not the store's garbage: no collection scans them
    c0 = time.process_time()
    t0 = time.perf_counter()
    for b in batches:
        put(b)
    t1 = time.perf_counter()
    c1 = time.process_time()
    gc.unfreeze()
    store.wait_dispatched(120)
    t2 = time.perf_counter()
    c2 = time.process_time()
    store.shutdown()
    return (n / (t1 - t0), n / (c1 - c0)), (n / (t2 - t0), n / (c2 - c0)), encode_us


def bench_cpu_split(
    workdir: str, n: int, batch: int = 0, encoded: bool = False, chunk: int = SPLIT_CHUNK
) -> tuple[float, float]:
    """(put, dispatch) CPU us per message on a stepped store: ``chunk`` messages put (one by
    one, or in lists of ``batch``, or as MessageBatches), then dispatched, and again; each
    side timed apart. The chunk is about the size of a threaded store's reput round under a
    put loop (~8,500 records), so dispatch works on as much cold data as it does there."""
    store = MessageStore.open(_fresh(workdir, "split"), _config(""), threaded=False)
    msgs = _messages(n)
    if batch:
        groups: list = [msgs[i : i + batch] for i in range(0, n, batch)]
        if encoded:
            groups = _encode_batches(store, groups)
        put, per = store.put_messages, max(1, chunk // batch)
        chunks = [groups[i : i + per] for i in range(0, len(groups), per)]
    else:
        put, chunks = store.put_message, [msgs[i : i + chunk] for i in range(0, n, chunk)]
    put_s = dispatch_s = 0.0
    gc.freeze()
    try:
        for part in chunks:
            c0 = time.thread_time()
            for m in part:
                put(m)
            c1 = time.thread_time()
            store.wait_dispatched()
            c2 = time.thread_time()
            put_s += c1 - c0
            dispatch_s += c2 - c1
        # the work timed was the work meant: every message stored and in its consume queue
        queued = store.get_max_offset_in_queue(TOPIC, 0)
        if queued != n or store.reput.dispatch_behind_bytes():
            raise RuntimeError(f"bench_cpu_split: {queued} of {n} messages put and dispatched")
    finally:
        gc.unfreeze()
        store.shutdown()
    return put_s / n * 1e6, dispatch_s / n * 1e6


def _get_offsets(n: int, calls: int) -> list[int]:
    """The random queue offsets of the get rows (the same in every row and run)."""
    rnd = random.Random(1)
    return [rnd.randrange(0, max(1, n - 32)) for _ in range(calls)]


def bench_get(store: MessageStore, n: int, calls: int, decode: int) -> tuple[float, float, float, float]:
    """(calls/s, messages/s) of get_message(32) at random offsets: wall, then thread CPU.

    ``decode`` 0: lazy, no message decoded. 1: every message decoded and what a consumer reads
    read (topic, body, tags, keys, queue_offset); the first ``decode()`` of a result decodes all
    of its messages in one pass, the others return their record. 2: that plus the full ``properties`` dict
    (``MessageRecord`` parses it on first access, so this row shows what the lazy map saves).
    """
    offsets = _get_offsets(n, calls)
    get = store.get_message
    got = 0
    sink: object = None
    c0 = time.thread_time()
    t0 = time.perf_counter()
    for off in offsets:
        r = get("g", TOPIC, 0, off, 32)
        msgs = r.messages
        if decode == 1:
            for m in msgs:
                rec = m.decode()
                sink = (rec.topic, rec.body, rec.tags, rec.keys, rec.queue_offset)
        elif decode == 2:
            for m in msgs:
                rec = m.decode()
                sink = (rec.topic, rec.body, rec.tags, rec.keys, rec.queue_offset, rec.properties)
        got += len(msgs)
        r.release()
    dt = time.perf_counter() - t0
    ct = time.thread_time() - c0
    del sink
    return calls / dt, got / dt, calls / ct, got / ct


def bare_decode(data: bytes, pos: int) -> tuple[str, bytes, str | None, list[str], int]:
    """The plainest Python decode of the record at ``pos`` of ``data`` (IPv4 hosts): (topic,
    body, tags, keys, queue offset), what a consumer reads. One head unpack, body and topic
    sliced out, the properties split into a dict."""
    h = _HEAD_V4.unpack_from(data, pos)
    body_at = pos + _HEAD_V4.size
    t = body_at + h[-1]
    p = t + 1 + data[t]
    props = data[p + 2 : p + 2 + int.from_bytes(data[p : p + 2], "big")].decode()
    d = dict(kv.split("\x01", 1) for kv in props.split("\x02") if kv)
    keys = [k for k in d.get("KEYS", "").split(" ") if k]
    return data[t + 1 : p].decode(), data[body_at:t], d.get("TAGS"), keys, h[5]


def bench_bare_decode(store: MessageStore, n: int, calls: int) -> tuple[float, float]:
    """Baseline for get + decode: (msgs/s wall, msgs/s thread CPU) of :func:`bare_decode` over
    the same 32-record windows at the same random offsets as ``bench_get``, from a ``bytes``
    copy of the CommitLog held in memory, every position known up front. No store, no queue
    lookup, no file reference, no record object: what decoding these records costs in Python
    on this VM in this run."""
    windows = []
    for off in _get_offsets(n, calls):
        r = store.get_message("g", TOPIC, 0, off, 32)
        windows.append(r.commit_log_offsets)
        r.release()
    files = store.commit_log.mapped_file_queue.mapped_files
    end = store.commit_log.get_max_offset()
    if len(files) > 1:
        raise SystemExit("bench_bare_decode reads the first CommitLog file only: use a smaller --n")
    with open(files[0].file_name, "rb") as f:
        data = f.read(end)
    decode = bare_decode
    got = 0
    sink: object = None
    c0 = time.thread_time()
    t0 = time.perf_counter()
    for window in windows:
        for pos in window:
            sink = decode(data, pos)
        got += len(window)
    dt = time.perf_counter() - t0
    ct = time.thread_time() - c0
    del sink
    return got / dt, got / ct


def _median_us(fn: Callable[[int], object], args: list[int]) -> tuple[float, float]:
    """(wall median, thread-CPU median) in us: on a busy machine the CPU figure is the stable one."""
    wall, cpu = [], []
    pc, tc = time.perf_counter_ns, time.thread_time_ns
    for a in args:
        t0, c0 = pc(), tc()
        fn(a)
        cpu.append(tc() - c0)
        wall.append(pc() - t0)
    return statistics.median(wall) / 1000.0, statistics.median(cpu) / 1000.0


def bench_query(store: MessageStore, n: int, calls: int) -> tuple[tuple[float, float], tuple[float, float], int]:
    rnd = random.Random(2)
    idx = [rnd.randrange(n) for _ in range(calls)]
    found = len(store.query_message(TOPIC, f"grp{idx[0] // 4}").messages)

    def unique(i: int) -> object:
        return store.query_message(TOPIC, f"key{i}")

    def shared(i: int) -> object:
        return store.query_message(TOPIC, f"grp{i // 4}")

    return _median_us(unique, idx), _median_us(shared, idx), found


def bench_by_time(store: MessageStore, n: int, calls: int) -> tuple[float, float]:
    first = store.get_message_store_timestamp(TOPIC, 0, 0)
    last = store.get_message_store_timestamp(TOPIC, 0, n - 1)
    rnd = random.Random(3)
    stamps = [rnd.randint(first, last) for _ in range(calls)]
    return _median_us(lambda ts: store.get_offset_in_queue_by_time(TOPIC, 0, ts), stamps)


def bench_cq_view(store: MessageStore, repeat: int) -> tuple[float, float]:
    """(entries/s of units() view alone, entries/s with all columns converted to native)."""
    cq = store.consume_queue_store.find_consume_queue(TOPIC, 0, create=False)
    assert cq is not None
    n = len(cq.units())
    t0 = time.perf_counter()
    for _ in range(repeat):
        cq.units()
    t_view = (time.perf_counter() - t0) / repeat
    t0 = time.perf_counter()
    total = 0
    for _ in range(repeat):
        u = cq.units()
        total += int(u["commit_log_offset"].astype(np.int64).sum())
        total += int(u["size"].astype(np.int32).sum())
        total += int(u["tags_code"].astype(np.int64).sum())
    t_read = (time.perf_counter() - t0) / repeat
    return n / t_view, n / t_read


TAG_FILTER_TAGS = ("TagA", "TagB", "TagC", "TagD")
TAG_FILTERS = ("TagX", "TagA")


def _tag_filter_store(workdir: str, n: int, ext: bool) -> MessageStore:
    """A stepped store of ``n`` 100-byte messages in one queue, tags round robin; with ``ext``,
    every CQ unit's tags code is a ConsumeQueueExt address (1 MiB ext files: a few rolls)."""
    root = _fresh(workdir, f"tags-ext-{ext}")
    config = MessageStoreConfig(store_path_root_dir=root, enable_consume_queue_ext=ext,
                                mapped_file_size_commit_log=64 * 1024 * 1024,
                                mapped_file_size_consume_queue_ext=1024 * 1024)
    store = MessageStore.open(root, config, threaded=False)
    for i in range(n):
        store.put_message(Message(TOPIC, BODY[:100], tags=TAG_FILTER_TAGS[i % 4], queue_id=0))
        if i % 4096 == 0:
            store.step()
    store.step()
    store.wait_dispatched()
    return store


def _pull_through(store: MessageStore, n: int, expression: str) -> int:
    """Pull the whole queue with ``get_message(32)`` and a tag filter; messages got."""
    message_filter = TagFilter(expression)
    offset = got = 0
    while offset < n:
        r = store.get_message("g", TOPIC, 0, offset, 32, message_filter)
        got += len(r.messages)
        offset = r.next_begin_offset
        r.release()
    return got


def bench_tag_filter(workdir: str, n: int, repeat: int = 5) -> dict[tuple[bool, str], tuple[float, float]]:
    """{(ext, filter): (wall ms, thread CPU ms) per 20k units}, best of ``repeat``, the two
    stores timed alternately so both see the same machine."""
    stores = {ext: _tag_filter_store(workdir, n, ext) for ext in (False, True)}
    best: dict[tuple[bool, str], tuple[float, float]] = {}
    try:
        for expression in TAG_FILTERS:
            counts = {ext: _pull_through(store, n, expression) for ext, store in stores.items()}
            assert counts[False] == counts[True], counts  # the same answers, or the figures mean nothing
            for _ in range(repeat):
                for ext, store in stores.items():
                    c0, t0 = time.thread_time(), time.perf_counter()
                    _pull_through(store, n, expression)
                    wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
                    scale = 1e3 * 20_000 / n
                    old = best.get((ext, expression), (float("inf"), float("inf")))
                    best[ext, expression] = (min(old[0], wall * scale), min(old[1], cpu * scale))
    finally:
        for store in stores.values():
            store.shutdown()
    return best


def print_tag_filter(n: int, figures: dict[tuple[bool, str], tuple[float, float]]) -> None:
    print()
    print(f"get_message(32) with a tag filter through a queue of {n:,} units, 4 tags (ms per 20k units, best)")
    print(f"  {'':<28} {'wall':>8} {'cpu':>8}   ratio to ext off (wall, cpu)")
    for expression in TAG_FILTERS:
        off = figures[False, expression]
        for ext in (False, True):
            wall, cpu = figures[ext, expression]
            ratio = f"{wall / off[0]:.2f}x, {cpu / off[1]:.2f}x" if ext else ""
            name = f"{expression!r}, ext {'on' if ext else 'off'}"
            print(f"  {name:<28} {wall:8.2f} {cpu:8.2f}   {ratio}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000, help="messages to put (default 100000)")
    ap.add_argument("--batch", type=int, default=32, help="put_messages batch size")
    ap.add_argument("--quick", action="store_true", help="n=20000 and fewer read calls")
    ap.add_argument("--dir", default=None, help="work directory (default: a temp dir)")
    ap.add_argument("--tag-filter-only", action="store_true", help="only the tag filter rows (ext off and on)")
    args = ap.parse_args()
    n = 20_000 if args.quick else args.n
    calls = 2_000 if args.quick else 10_000
    workdir = tempfile.mkdtemp(prefix="rmqlab-bench-", dir=args.dir)
    if args.tag_filter_only:
        try:
            print_tag_filter(n, bench_tag_filter(workdir, n))
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        return
    try:
        probe = MessageStore.open(_fresh(workdir, "probe"), _config(""), threaded=False)
        records, template = _encoded_records(probe, n), _props_template(probe)
        probe.shutdown()
        # the threaded put three times, each followed by the baselines: medians of both sides
        runs: list[tuple[float, float]] = []
        puts: list[tuple[tuple[float, float], tuple[float, float]]] = []
        bursts: list[tuple[float, float]] = []
        for i in range(PUT_RUNS):
            store, put_rate, e2e_rate, rec_size, burst_rate = bench_put(workdir, n, threaded=True)
            puts.append((put_rate, e2e_rate))
            bursts.append(burst_rate)
            runs.append(baselines(workdir, records, template))
            if i < PUT_RUNS - 1:
                store.shutdown()  # the last run's store serves the read rows
        put_rate = _median_pair([p[0] for p in puts])
        e2e_rate = _median_pair([p[1] for p in puts])
        burst_rate = _median_pair(bursts)
        get_calls, _, get_calls_cpu, _ = bench_get(store, n, calls, decode=0)
        _, dec_msgs, _, dec_msgs_cpu = bench_get(store, n, calls, decode=1)
        _, full_msgs, _, full_msgs_cpu = bench_get(store, n, calls, decode=2)
        bare_dec = bench_bare_decode(store, n, calls)
        q1, q4, found4 = bench_query(store, n, calls)
        by_time = bench_by_time(store, n, calls)
        cq_view, cq_read = bench_cq_view(store, 20)
        store.shutdown()
        tag_filter = bench_tag_filter(workdir, n)
        step_store, step_rate, step_e2e, _, _ = bench_put(workdir, n, threaded=False)
        step_store.shutdown()
        runs.append(baselines(workdir, records, template))  # ... after the stepped one ...
        lists, encoded = [], []
        for _ in range(PUT_RUNS):
            lists.append(bench_put_batch(workdir, n, args.batch))
            encoded.append(bench_put_batch(workdir, n, args.batch, encoded=True))
        batch_rate, batch_e2e = _median_pair([r[0] for r in lists]), _median_pair([r[1] for r in lists])
        mb_rate, mb_e2e = _median_pair([r[0] for r in encoded]), _median_pair([r[1] for r in encoded])
        mb_encode_us = statistics.median(r[2] for r in encoded)
        splits = [bench_cpu_split(workdir, n), bench_cpu_split(workdir, n, args.batch),
                  bench_cpu_split(workdir, n, args.batch, encoded=True)]  # fmt: skip
        runs.append(baselines(workdir, records, template))  # ... and after the batches
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    base = statistics.median(r[0] for r in runs)
    base_enc = statistics.median(r[1] for r in runs)

    print(f"n={n} messages, record {rec_size:.0f} B (1 KiB body, tag, 2 keys), batch={args.batch}")
    print("wall: elapsed time; cpu: CPU time (process for puts, all threads; thread for reads)")
    print(f"{'figure':<34} {'wall':>12} {'cpu':>12} {'unit':<10} {'target':<14} ratio (wall)")
    print("-" * 104)

    def row(name: str, value: tuple[float, float] | float, unit: str, target: str, ratio: str = "") -> None:
        wall, cpu = value if isinstance(value, tuple) else (value, float("nan"))
        print(f"{name:<34} {wall:>12,.1f} {cpu:>12,.1f} {unit:<10} {target:<14} {ratio}")

    def spread(i: int) -> str:
        got = sorted(r[i] for r in runs)
        return f"median of {len(got)}: {got[0] / 1e3:,.0f}k-{got[-1] / 1e3:,.0f}k"

    def vs(rate: float) -> str:
        return f"{rate / base_enc:.3f} x encode+append, {rate / base:.3f} x copy"

    row("baseline: copy records to mmap", base, "rec/s", "", spread(0))
    row("baseline: encode + append", base_enc, "rec/s", "", spread(1))
    row("put_message (threaded, async)", put_rate, "msg/s", ">=100k, 0.3x", vs(put_rate[0]))
    walls = sorted(p[0][0] for p in puts)
    print(f"{'':<34} median of {len(walls)} runs: {walls[0] / 1e3:,.0f}k-{walls[-1] / 1e3:,.0f}k msg/s wall, "
          f"{walls[0] / base_enc:.3f}-{walls[-1] / base_enc:.3f} x encode+append")
    row("  end-to-end incl. dispatch", e2e_rate, "msg/s", "", vs(e2e_rate[0]))
    row(f"  first {min(n, BURST):,} puts (a burst)", burst_rate, "msg/s", "", vs(burst_rate[0]))
    row("put_message (stepped, no threads)", step_rate, "msg/s", "", vs(step_rate[0]))
    row("  stepped incl. dispatch", step_e2e, "msg/s", "", vs(step_e2e[0]))
    def batch_spread(got: list) -> None:
        walls = sorted(r[0][0] for r in got)
        print(f"{'':<34} median of {len(walls)} runs: {walls[0] / 1e3:,.0f}k-{walls[-1] / 1e3:,.0f}k msg/s wall, "
              f"{walls[0] / put_rate[0]:.2f}-{walls[-1] / put_rate[0]:.2f} x single")

    row(f"put_messages (list of {args.batch})", batch_rate, "msg/s", ">= 3x single",
        f"{batch_rate[0] / put_rate[0]:.2f} x single (cpu {batch_rate[1] / put_rate[1]:.2f})")
    batch_spread(lists)
    row("  end-to-end incl. dispatch", batch_e2e, "msg/s", "", f"{batch_e2e[0] / e2e_rate[0]:.2f} x single e2e")
    row(f"put_messages (MessageBatch {args.batch})", mb_rate, "msg/s", ">= 3x single",
        f"{mb_rate[0] / put_rate[0]:.2f} x single (cpu {mb_rate[1] / put_rate[1]:.2f}); store side only")
    batch_spread(encoded)
    row("  end-to-end incl. dispatch", mb_e2e, "msg/s", "", f"{mb_e2e[0] / e2e_rate[0]:.2f} x single e2e")
    row("  producer-side encode (not above)", (float("nan"), 1e6 / mb_encode_us), "msg/s", "",
        f"{mb_encode_us:.2f} us/msg thread CPU, MessageBatch.from_messages")
    row("get_message(32), lazy", (get_calls, get_calls_cpu), "calls/s", ">= 20k")
    row("baseline: bare decode (same records)", bare_dec, "msg/s", "", "bytes in memory, positions known")
    row("get_message(32) + decode all", (dec_msgs, dec_msgs_cpu), "msg/s", ">= 300k",
        f"{dec_msgs / bare_dec[0]:.2f} x bare decode (cpu {dec_msgs_cpu / bare_dec[1]:.2f})")
    row("  + full properties dict", (full_msgs, full_msgs_cpu), "msg/s", "")
    row("query_message, chain 1", q1, "us median", "<= 50 us")
    row(f"query_message, chain 4 ({found4} hits)", q4, "us median", "<= 50 us")
    row("get_offset_in_queue_by_time", by_time, "us median", "<= 30 us")
    row("CQ units() view", cq_view / 1e6, "M units/s", "")
    row("CQ units() + 3 columns to native", cq_read / 1e6, "M units/s", ">= 50 M")
    print_budget(base_enc, splits, args.batch)
    print_tag_filter(n, tag_filter)


def print_budget(base_enc: float, splits: list[tuple[float, float]], batch: int) -> None:
    """Why the threaded put rows land where they do: the store's CPU per message for put and
    for dispatch (:func:`bench_cpu_split`), which a threaded store runs on one GIL, against
    what each target leaves for both together. Where put plus dispatch exceeds that budget,
    no sharing of the GIL between the producer and the reput thread can meet the target."""
    (s_put, s_disp), *batches = splits
    single = s_put + s_disp
    print()
    print(f"CPU us per message, put and dispatch apart (stepped store, chunks of {SPLIT_CHUNK:,})")
    print(f"  {'':<32} {'put':>6} {'dispatch':>9} {'both':>6}   what the target leaves for both")
    print(f"  {'put_message':<32} {s_put:6.2f} {s_disp:9.2f} {single:6.2f}   "
          f"{1e6 / (0.3 * base_enc):.2f} (0.3x encode+append)")
    for name, (put, disp) in zip((f"put_messages (list of {batch})", f"put_messages (MessageBatch {batch})"), batches,
                                 strict=True):  # fmt: skip
        print(f"  {name:<32} {put:6.2f} {disp:9.2f} {put + disp:6.2f}   {single / 3:.2f} (3x single); "
              f"put alone {s_put / put:.2f}x single")


if __name__ == "__main__":
    main()

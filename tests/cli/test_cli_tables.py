"""What a person reads: tables that keep ids and offsets whole, and the index views in words."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rmqlab import render
from rmqlab.cli import main

MSG_ID = "C0A8380A00002A9F0000000000000000"


@pytest.fixture
def clean(reference_store: Callable[[str], Path]) -> str:
    return str(reference_store("clean-small"))


@pytest.fixture
def width() -> Iterator[Callable[[int], None]]:
    before = render.console.width

    def set_width(w: int) -> None:
        render.console.width = w

    yield set_width
    render.console.width = before


def out(*args: str) -> str:
    r = CliRunner().invoke(main, list(args))
    assert r.exit_code == 0, r.output
    return r.stdout


def test_token_widths_keep_ids_whole_when_they_fit() -> None:
    cols = ["commit_log_offset", "msg_id", "keys"]
    cells = [["0", MSG_ID, "a b c"], ["583309", MSG_ID, "shared-1 k-42-0-0"]]
    assert render._token_widths(cols, cells, 200) == [None, None, None]  # everything fits: rich decides
    fixed = render._token_widths(cols, cells, 70)
    assert fixed[1] == len(MSG_ID)
    assert fixed[2] is None
    assert 6 <= fixed[0] <= len("commit_log_offset")  # the header folds, the offsets never
    assert render._token_widths(cols, cells, 40) == [None, None, None]  # no room: fold all
    # sentences keep 30 characters or the whole table folds evenly: a reason column is never
    # squeezed to a word a line to keep a long path whole
    sentence = "the consume queue unit ends past the log, so it is cut there and said so"
    steps = [["consume_queue", "consumequeue/TopicB/0/00000000000000000000", sentence]]
    assert render._token_widths(["phase", "file", "reason"], steps, 100) == [13, 42, None]
    assert render._token_widths(["phase", "file", "reason"], steps, 80) == [None, None, None]


@pytest.mark.parametrize("columns", [110, 120, 160])
def test_message_ids_stay_on_one_line(clean: str, width: Callable[[int], None], columns: int) -> None:
    width(columns)
    text = out("messages", clean, "--limit", "3")
    assert MSG_ID in text
    assert max(len(line) for line in text.splitlines()) <= columns
    text = out("query", clean, "--topic", "TopicA", "--key", "k-42-0-0")
    assert MSG_ID in text
    assert "20261122102056184" in text


def test_index_files_table_fits_and_names_the_sizes(clean: str, width: Callable[[int], None]) -> None:
    width(120)
    text = out("index", clean)
    assert "6 index files" in text
    assert "every file: 64 hash slots, 255 items at most" in text
    assert "20261122102107719" in text
    assert "1795342867715" in text
    assert max(len(line) for line in text.splitlines()) <= 120


def test_chain_table_says_what_each_step_is(clean: str, width: Callable[[int], None]) -> None:
    width(120)
    text = out("index", clean, "--chain", "TopicA", "shared-1")
    rows = [line for line in text.splitlines() if line.startswith("│")]
    assert any("match; walk stops: end of chain" in r for r in rows)
    assert any("other key (same slot)" in r for r in rows)
    # the count in the caption is the query's answer
    matches = CliRunner().invoke(main, ["query", clean, "--topic", "TopicA", "--key", "shared-1", "--json"])
    n = len(json.loads(matches.stdout)["matches"])
    assert f", {n} matching messages" in text
    assert sum("│ match" in r for r in rows) == n


def test_chain_rejects_what_query_rejects(clean: str) -> None:
    r = CliRunner().invoke(main, ["index", clean, "--chain", "Topic A", "x"])
    assert r.exit_code == 2
    assert "invalid topic 'Topic A'" in r.output
    assert "Traceback" not in r.output
    r = CliRunner().invoke(main, ["index", clean, "--chain", "TopicA", ""])
    assert r.exit_code == 2
    assert "must not be empty" in r.output


def test_json_array_is_written_as_read_and_equals_one_document(clean: str) -> None:
    text = out("messages", clean, "--json", "--body", "text")
    rows = json.loads(text)
    assert len(rows) == 600
    assert text == json.dumps(rows, ensure_ascii=False, indent=2) + "\n"  # same bytes as before streaming
    assert out("messages", clean, "--json", "--limit", "0") == "[]\n"


@pytest.mark.parametrize("mode", ["--json-lines", "--json"])
def test_messages_stream_to_scripts(clean: str, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    # a store too big for memory: rows must leave as they are read. The walk fails after 3
    # records here, so only a streaming command has printed them by then.
    from rmqlab.errors import RmqlabError
    from rmqlab.inspect.snapshot import StoreSnapshot

    walk = StoreSnapshot.iter_records

    def three_then_fail(self: StoreSnapshot, **kw: Any) -> Iterator[Any]:
        for i, item in enumerate(walk(self, **kw)):
            if i == 3:
                raise RmqlabError("disk went away")
            yield item

    monkeypatch.setattr(StoreSnapshot, "iter_records", three_then_fail)
    r = CliRunner().invoke(main, ["messages", clean, mode])
    assert r.exit_code == 2
    assert "disk went away" in r.stderr
    assert r.stdout.count('"commit_log_offset"') == 3


@pytest.fixture(scope="module")
def thousand(tmp_path_factory: pytest.TempPathFactory) -> str:
    """1,005 messages in T/0: more than a table shows."""
    from rmqlab import Message, MessageStore, MessageStoreConfig

    root = tmp_path_factory.mktemp("thousand") / "s"
    store = MessageStore.open(str(root), MessageStoreConfig.small(str(root)), threaded=False)
    try:
        for n in (*[100] * 10, 5):
            assert store.put_messages([Message("T", b"x") for _ in range(n)]).status.name == "PUT_OK"
        store.step()
    finally:
        store.shutdown()
    return str(root)


def test_a_table_shows_the_first_thousand(thousand: str) -> None:
    r = CliRunner().invoke(main, ["messages", thousand])
    assert r.exit_code == 0
    assert "first 1000 messages" in r.stdout
    assert "showing the first 1,000 messages; --limit N shows N" in r.stderr
    r = CliRunner().invoke(main, ["messages", thousand, "--limit", "1005"])
    assert "1005 messages" in r.stdout
    assert "showing the first" not in r.stderr
    assert len(json.loads(out("messages", thousand, "--json"))) == 1005


def test_cq_table_shows_the_first_thousand_and_json_has_all(thousand: str) -> None:
    r = CliRunner().invoke(main, ["cq", thousand, "T", "0"])
    assert r.exit_code == 0
    assert "T/0: 1005 units (the first 1,000)" in r.stdout
    assert "showing the first 1,000 of 1,005 units; --json or --json-lines has them all" in r.stderr
    first = [line.split()[1] for line in r.stdout.splitlines() if line.startswith("│ ") and line.split()[1].isdigit()]
    assert first[-1] == "999"
    r = CliRunner().invoke(main, ["cq", thousand, "T", "0", "--limit", "1005"])
    assert "\n│ 1004 " in r.stdout
    assert "showing the first" not in r.stderr
    text = out("cq", thousand, "T", "0", "--json")
    units = json.loads(text)
    assert [u["queue_offset"] for u in units] == list(range(1005))
    assert text == json.dumps(units, ensure_ascii=False, indent=2) + "\n"
    lines = out("cq", thousand, "T", "0", "--json-lines").splitlines()
    assert [json.loads(line) for line in lines] == units


def test_iter_frame_rows_is_frame_rows_in_chunks() -> None:
    import numpy as np
    import pandas as pd

    df = pd.DataFrame({"a": np.arange(10, dtype=np.int64), "b": [None, 1.5] * 5, "c": list("abcdefghij")})
    assert list(render.iter_frame_rows(df, chunk=3)) == render.frame_rows(df)
    assert render.frame_rows(df)[0] == {"a": 0, "b": None, "c": "a"}
    assert type(render.frame_rows(df)[1]["a"]) is int


def test_from_offset_takes_any_byte(clean: str) -> None:
    # a person types a round number: the walk starts at the next message and says so, instead
    # of reporting the bytes in the middle of a record as a damaged one
    from rmqlab import open_snapshot

    r = CliRunner().invoke(main, ["messages", clean, "--from-offset", "7", "--limit", "1", "--json"])
    assert r.exit_code == 0
    assert [m["commit_log_offset"] for m in json.loads(r.stdout)] == [235]
    assert r.stderr == "rmqlab: note: no message starts at CommitLog offset 7; starting at the next one, 235\n"
    # in a file's end filler: the next file's first message
    r = CliRunner().invoke(main, ["messages", clean, "--from-offset", "65400", "--limit", "1", "--json"])
    assert [m["commit_log_offset"] for m in json.loads(r.stdout)] == [65536]
    assert "damaged" not in r.stderr
    r = CliRunner().invoke(main, ["messages", clean, "--from-offset", "235", "--limit", "1", "--json"])
    assert (json.loads(r.stdout)[0]["commit_log_offset"], r.stderr) == (235, "")
    with open_snapshot(clean) as snap:
        assert snap.messages(start=7, limit=1)["commit_log_offset"].tolist() == [235]
        assert snap.record_start_at_or_after(0) == 0
        assert snap.record_start_at_or_after(10**12) is None

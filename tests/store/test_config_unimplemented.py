"""MessageStoreConfig refuses the RocketMQ options rmqlab keeps as fields but does not implement,
and the 5.x-only options on 4.9.8.

``duplicationEnable`` (5.x ``checkMessageAndReturnSize``, spec §2.12) changes the records recovery
accepts; a config saying True while rmqlab does what False does would be a silent divergence.
``enabledAppendPropCRC`` / ``forceVerifyPropCRC`` (spec §2.6, §2.12) are implemented for 5.3.3
(``tests/store/test_prop_crc_store.py``); 4.9.8 has no such options, so True is refused there.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rmqlab import Message, MessageStore
from rmqlab.config import MessageStoreConfig
from rmqlab.errors import ConfigError


def test_unimplemented_option_true_is_refused() -> None:
    with pytest.raises(ConfigError, match="duplication_enable"):
        MessageStoreConfig(rocketmq_version="5.3.3", duplication_enable=True)
    with pytest.raises(ConfigError, match="duplication_enable"):
        MessageStoreConfig().with_(duplication_enable=True)


@pytest.mark.parametrize("name", ["enabled_append_prop_crc", "force_verify_prop_crc"])
def test_prop_crc_options_are_5x_only(name: str) -> None:
    with pytest.raises(ConfigError, match=f"{name}=True needs rocketmq_version='5.3.3'.*4.9.8 has no such option"):
        MessageStoreConfig(rocketmq_version="4.9.8", **{name: True})
    with pytest.raises(ConfigError, match=name):
        MessageStoreConfig().with_(**{name: True})  # the default version is 4.9.8
    assert getattr(MessageStoreConfig(rocketmq_version="5.3.3", **{name: True}), name) is True


def test_unimplemented_options_default_false() -> None:
    config = MessageStoreConfig(rocketmq_version="5.3.3")
    assert (config.enabled_append_prop_crc, config.force_verify_prop_crc, config.duplication_enable) == (
        False, False, False)


def test_a_multi_path_commit_log_is_refused_with_the_way_to_open_it(tmp_path: Path) -> None:
    """RocketMQ splits ``storePathCommitLog`` on ',' (MultiPathMappedFileQueue: file i goes to path
    i mod n, and loading merges every path's files sorted by name). rmqlab keeps one directory:
    such a config is refused, and the way it names (every file in one directory) opens the store
    with the same answers."""
    root = tmp_path / "s"
    config = MessageStoreConfig.small(str(root))
    with MessageStore.open(str(root), config, threaded=False) as store:
        for i in range(200):
            assert store.put_message(Message("TopicA", b"x" * 1000, keys=[f"k{i}"], queue_id=i % 2)).ok
        store.step()
        end = store.get_max_phy_offset()
    files = sorted((root / "commitlog").iterdir())
    assert len(files) >= 3
    disks = [tmp_path / "disk0" / "commitlog", tmp_path / "disk1" / "commitlog"]
    for d in disks:
        d.mkdir(parents=True)
    for i, f in enumerate(files):  # as a broker with two paths lays them out
        shutil.move(f, disks[i % 2] / f.name)
    (root / "commitlog").rmdir()
    with pytest.raises(ConfigError, match=r"lists several directories .* link \(or copy\) them all into one"):
        config.with_(store_path_commit_log=",".join(map(str, disks)))
    merged = tmp_path / "merged"
    merged.mkdir()
    for d in disks:
        for f in d.iterdir():
            (merged / f.name).symlink_to(f)
    with MessageStore.open(str(root), config.with_(store_path_commit_log=str(merged)), threaded=False) as store:
        assert store.get_max_phy_offset() == end
        assert store.get_max_offset_in_queue("TopicA", 1) == 100
        assert [m.body[:1] for m in store.query_message("TopicA", "k199").messages] == [b"x"]

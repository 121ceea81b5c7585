"""MessageStoreConfig refuses the RocketMQ options rmqlab keeps as fields but does not implement,
and the 5.x-only options on 4.9.8.

``duplicationEnable`` (5.x ``checkMessageAndReturnSize``, spec §2.12) changes the records recovery
accepts; a config saying True while rmqlab does what False does would be a silent divergence.
``enabledAppendPropCRC`` / ``forceVerifyPropCRC`` (spec §2.6, §2.12) are implemented for 5.3.3
(``tests/store/test_prop_crc_store.py``); 4.9.8 has no such options, so True is refused there.
"""

from __future__ import annotations

import pytest

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

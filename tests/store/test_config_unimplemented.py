"""MessageStoreConfig refuses the RocketMQ options rmqlab keeps as fields but does not implement.

``enabledAppendPropCRC`` (5.x append path, spec §2.6), ``forceVerifyPropCRC`` and
``duplicationEnable`` (5.x ``checkMessageAndReturnSize``, spec §2.12) change the bytes written or
the records recovery accepts; a config saying True while rmqlab does what False does would be a
silent divergence.
"""

from __future__ import annotations

import pytest

from rmqlab.config import MessageStoreConfig
from rmqlab.errors import ConfigError


@pytest.mark.parametrize("name", ["enabled_append_prop_crc", "force_verify_prop_crc", "duplication_enable"])
def test_unimplemented_option_true_is_refused(name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        MessageStoreConfig(rocketmq_version="5.3.3", **{name: True})
    with pytest.raises(ConfigError, match=name):
        MessageStoreConfig().with_(**{name: True})


def test_unimplemented_options_default_false() -> None:
    config = MessageStoreConfig(rocketmq_version="5.3.3")
    assert (config.enabled_append_prop_crc, config.force_verify_prop_crc, config.duplication_enable) == (
        False, False, False)

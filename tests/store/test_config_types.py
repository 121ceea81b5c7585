"""MessageStoreConfig checks each field's type: a wrong one is a ConfigError naming the field.

``file_reserved_time="72"`` and ``transient_store_pool_enable="yes"`` used to be taken (the
string compared, or truthy, far from where it was set), a float file size too.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

from rmqlab import ConfigError, MessageStoreConfig


@pytest.mark.parametrize(("changes", "said"), [
    ({"file_reserved_time": "72"}, "file_reserved_time must be int, not str '72'"),
    ({"mapped_file_size_commit_log": 1.5}, "mapped_file_size_commit_log must be int, not float 1.5"),
    ({"transient_store_pool_enable": "yes"}, "transient_store_pool_enable must be bool, not str 'yes'"),
    ({"message_index_enable": 1}, "message_index_enable must be bool, not int 1"),
    ({"file_reserved_time": True}, "file_reserved_time must be int, not bool True"),
    ({"delete_when": 4}, "delete_when must be str, not int 4"),
    ({"memory_store_max_ratio": "0.5"}, "memory_store_max_ratio must be float or int, not str"),
    ({"memory_store_max_bytes": 1.0}, "memory_store_max_bytes must be int or None, not float"),
])
def test_a_field_of_the_wrong_type_is_refused(tmp_path: Path, changes: dict, said: str) -> None:
    with pytest.raises(ConfigError) as err:
        MessageStoreConfig.small(str(tmp_path), **changes)
    assert str(err.value) == said or str(err.value).startswith(said)


def test_numpy_scalars_and_paths_become_plain_values(tmp_path: Path) -> None:
    c = MessageStoreConfig.small(tmp_path, mapped_file_size_commit_log=np.int64(65536),
                                 transient_store_pool_enable=np.bool_(True), store_path_commit_log=tmp_path / "cl")
    assert type(c.mapped_file_size_commit_log) is int
    assert c.transient_store_pool_enable is True
    assert c.store_path_root_dir == str(tmp_path)
    assert c.store_path_commit_log == str(tmp_path / "cl")


def test_every_default_has_its_annotated_type() -> None:
    c = MessageStoreConfig()
    for f in fields(c):
        assert f.type in ("int", "bool", "str", "float", "str | None", "int | None"), f
    assert type(c.flush_least_pages_when_warm_mapped_file) is int

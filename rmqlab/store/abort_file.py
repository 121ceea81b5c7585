"""The ``abort`` marker: present while a store runs, removed by a clean shutdown.

Its presence at load means the last exit was not clean, so recovery runs abnormally (spec §5.2).
4.9.8 writes an empty file; 5.x writes the PID as text and first copies the old content to
``abort.bak``.
"""

from __future__ import annotations

import os
import shutil

__all__ = ["AbortFile"]


class AbortFile:
    def __init__(self, root: str, *, rocketmq_version: str = "4.9.8") -> None:
        self.path = os.path.join(root, "abort")
        self.v4 = rocketmq_version.startswith("4.")

    def exists(self) -> bool:
        return os.path.exists(self.path)

    def create(self) -> None:
        if self.v4:
            with open(self.path, "wb"):
                pass
            return
        if os.path.exists(self.path):
            shutil.copyfile(self.path, self.path + ".bak")
        else:
            with open(self.path + ".bak", "wb"):
                pass
        with open(self.path, "w") as f:
            f.write(str(os.getpid()))
            f.flush()
            os.fsync(f.fileno())

    def remove(self) -> None:
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass

"""``python -m rmqlab.testing.crash_writer --spec JSON``: the workload a crash test kills.

Prints ``READY`` once the store is open, then runs :func:`rmqlab.testing.crash.run_workload`.
Afterwards it keeps the store's services running until killed; if a crash point is armed
(``RMQLAB_CRASH_AT``) and did not fire within 2 s, it exits with status 3.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from rmqlab import faults
from rmqlab.testing.crash import WriterSpec, run_workload


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spec", required=True, help="WriterSpec as JSON")
    args = parser.parse_args(argv)
    spec = WriterSpec.from_json(args.spec)

    def ready() -> None:
        sys.stdout.write("READY\n")
        sys.stdout.flush()

    run_workload(spec, on_ready=ready)
    if os.environ.get(faults.ENV_VAR):
        time.sleep(2.0)
        return 3
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())

"""rmqlab.spark: PySpark data sources over store dirs and the audit/stats jobs.

``register(spark)`` registers ``rmq_commitlog``, ``rmq_consumequeue``, ``rmq_batchconsumequeue`` and ``rmq_index``;
``get_session()`` builds a local session with them registered. Imports are lazy so that
``import rmqlab.spark`` costs nothing until a function is called.
"""

from __future__ import annotations

from typing import Any

__all__ = ["audit", "get_session", "register", "stats"]


def register(spark: Any) -> None:
    """Register the three data sources on ``spark`` (idempotent)."""
    from rmqlab.spark.sources import SOURCES

    for cls in SOURCES:
        spark.dataSource.register(cls)


def get_session(*args: Any, **kwargs: Any) -> Any:
    from rmqlab.spark.session import get_session as _get

    return _get(*args, **kwargs)


def audit(*args: Any, **kwargs: Any) -> Any:
    from rmqlab.spark.jobs import audit as _audit

    return _audit(*args, **kwargs)


def stats(*args: Any, **kwargs: Any) -> Any:
    from rmqlab.spark.jobs import stats as _stats

    return _stats(*args, **kwargs)

"""Durable storage for the coordinator: the record log, rebalance/commit history and the current-state snapshot.

Public interface::

    log = await SqlRecordLog.open(url, data_dir="./data")   # SQLite file by default; migrates the schema
    for record in await log.load(): coordinator.replay(record)
    log.append(records, on_done)                            # the core's RecordLog
    await log.prune_history(now_ms - DEFAULT_HISTORY_RETENTION_MS)
    page = await log.queries.rebalance_history("group")     # read APIs, see storage.queries
    await log.close()
"""

from .database import create_engine, database_url, migrate
from .errors import StorageError
from .queries import StorageQueries
from .record_log import DEFAULT_HISTORY_RETENTION_MS, SqlRecordLog, WriterStats

__all__ = [
    "DEFAULT_HISTORY_RETENTION_MS",
    "SqlRecordLog",
    "StorageError",
    "StorageQueries",
    "WriterStats",
    "create_engine",
    "database_url",
    "migrate",
]

"""Extract: the daemon's stored tables -> the canonical DataFrames of ``schema``.

Two kinds of source:

* a **database URL** — the daemon's SQLite file or PostgreSQL, read with Spark JDBC. SQLAlchemy-style URLs are
  accepted as the daemon's settings spell them (``sqlite:///rel.db``, ``sqlite:////abs.db``,
  ``sqlite+aiosqlite:///…``, ``postgresql+asyncpg://user:pw@host:5432/db``), as are ``jdbc:`` URLs. A big table is
  read in parallel, partitioned on its log ``position`` (between its min and max).
* a **Parquet export directory** — one sub-directory per table, with the database's column names.

``COLUMNS`` is the whole mapping from storage to canonical columns: today the storage names equal the canonical ones;
if a storage column is renamed, only its entry here changes. Every column is cast to the canonical type (SQLite's
JDBC driver reports BIGINT as DECIMAL(20,0) and booleans as integers). A table the source does not have (an older
export, a pruned table) reads as empty.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from .jdbc_drivers import driver_class
from .schema import OPTIONAL_TABLES, TABLES, Inputs

log = logging.getLogger(__name__)

# canonical table -> canonical column -> source column. Identity today (storage/models.py uses the same names).
COLUMNS: dict[str, dict[str, str]] = {t: {f.name: f.name for f in schema.fields} for t, schema in TABLES.items()}

# Tables with fewer rows than this are read through one JDBC connection.
PARALLEL_READ_MIN_ROWS = 200_000


def conform(table: str, df: DataFrame) -> DataFrame:
    """Select and cast the canonical columns of ``table`` from a source DataFrame. A missing nullable column reads
    as null; a missing required column is an error (the source is not what this job understands)."""
    have = set(df.columns)
    cols = []
    for field in TABLES[table].fields:
        source = COLUMNS[table][field.name]
        if source in have:
            cols.append(F.col(source).cast(field.dataType).alias(field.name))
        elif field.nullable:
            cols.append(F.lit(None).cast(field.dataType).alias(field.name))
        else:
            raise ValueError(f"{table}: the source has no column {source!r} (it has {sorted(have)})")
    return df.select(*cols)


def read_parquet(spark: SparkSession, directory: str | os.PathLike[str]) -> Inputs:
    root = Path(directory)
    if not root.is_dir():
        raise FileNotFoundError(f"not a Parquet export directory: {root}")
    tables: dict[str, DataFrame] = {}
    for table in TABLES:
        path = root / table
        if path.exists() and any(path.glob("**/*.parquet")):
            tables[table] = conform(table, spark.read.parquet(str(path)))
        elif table in OPTIONAL_TABLES:
            log.info("export %s has no table %s; reading it as empty", root, table)
        else:
            log.warning("export %s has no table %s; reading it as empty", root, table)
    return Inputs.from_tables(spark, tables)


@dataclass(frozen=True)
class JdbcSource:
    url: str  # jdbc:…
    driver: str
    properties: dict[str, str]


def jdbc_source(
    url: str, user: str | None = None, password: str | None = None, schema: str | None = None
) -> JdbcSource:
    """Translate a database URL (SQLAlchemy style or ``jdbc:``) into a JDBC URL, driver class and properties.
    ``schema``: the PostgreSQL schema holding the daemon's tables (its ``storage.schema`` setting), if not public."""
    props: dict[str, str] = {}
    if url.startswith("jdbc:"):
        kind = "sqlite" if url.startswith("jdbc:sqlite:") else "postgresql"
        jdbc_url = url
    else:
        parts = urlsplit(url)
        scheme = parts.scheme.split("+", 1)[0]
        if scheme == "sqlite":
            # sqlite:///relative/path.db, sqlite:////absolute/path.db (SQLAlchemy's convention)
            path = url.split("://", 1)[1]
            path = path[1:] if path.startswith("/") else path
            if not path or path == ":memory:":
                raise ValueError("an in-memory SQLite database cannot be read by another process")
            kind, jdbc_url = "sqlite", f"jdbc:sqlite:{Path(path).resolve()}"
        elif scheme in ("postgresql", "postgres"):
            kind = "postgresql"
            host = parts.hostname or "localhost"
            port = f":{parts.port}" if parts.port else ""
            jdbc_url = f"jdbc:postgresql://{host}{port}{parts.path or '/'}"
            if parts.query:
                jdbc_url += f"?{parts.query}"
            if parts.username:
                props["user"] = unquote(parts.username)
            if parts.password:
                props["password"] = unquote(parts.password)
        else:
            raise ValueError(f"unsupported database URL scheme: {parts.scheme!r}")
    if user is not None:
        props["user"] = user
    if password is not None:
        props["password"] = password
    if kind == "postgresql":
        props.setdefault("fetchsize", "10000")
        if schema:
            props["currentSchema"] = schema
    return JdbcSource(url=jdbc_url, driver=driver_class(kind), properties=props)


def _jdbc_reader(spark: SparkSession, src: JdbcSource):  # type: ignore[no-untyped-def]
    reader = spark.read.format("jdbc").option("url", src.url).option("driver", src.driver)
    for key, value in src.properties.items():
        reader = reader.option(key, value)
    return reader


def read_jdbc(
    spark: SparkSession,
    url: str,
    *,
    user: str | None = None,
    password: str | None = None,
    schema: str | None = None,
    num_partitions: int = 4,
) -> Inputs:
    """Read every table over JDBC. Tables of at least ``PARALLEL_READ_MIN_ROWS`` rows are read with
    ``num_partitions`` parallel range queries on ``position``."""
    src = jdbc_source(url, user, password, schema)
    tables: dict[str, DataFrame] = {}
    for table in TABLES:
        try:
            bounds = (
                _jdbc_reader(spark, src)
                # Never NULL: Xerial's SQLite driver fails Spark's read of an all-NULL column ("column -1 out of
                # bounds"), which made every empty table look missing, with a stack trace in the log.
                .option(
                    "query",
                    f"SELECT COALESCE(MIN(position), 0) AS lo, COALESCE(MAX(position), 0) AS hi, COUNT(*) AS n"
                    f" FROM {table}",
                )
                .load()
                .first()
            )
        except Exception as e:  # a table this database does not have (older schema) reads as empty
            log.warning("cannot read table %s (%s); reading it as empty", table, str(e).splitlines()[0])
            continue
        reader = _jdbc_reader(spark, src).option("dbtable", table)
        n = int(bounds["n"]) if bounds and bounds["n"] is not None else 0
        if n >= PARALLEL_READ_MIN_ROWS and num_partitions > 1:
            reader = (
                reader.option("partitionColumn", "position")
                .option("lowerBound", str(int(bounds["lo"])))
                .option("upperBound", str(int(bounds["hi"]) + 1))
                .option("numPartitions", str(num_partitions))
            )
        tables[table] = conform(table, reader.load())
    return Inputs.from_tables(spark, tables)


def source_bytes(source: str) -> int | None:
    """The size on disk of a Parquet export directory or a SQLite file; None for a database server (unknown)."""
    if source.startswith("jdbc:sqlite:"):
        path = Path(source.removeprefix("jdbc:sqlite:"))
    elif "://" in source:
        if urlsplit(source).scheme.split("+", 1)[0] != "sqlite":
            return None
        rest = source.split("://", 1)[1]
        path = Path(rest[1:] if rest.startswith("/") else rest)
    else:
        path = Path(source)
    if path.is_file():
        return path.stat().st_size
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return None


def read_source(
    spark: SparkSession,
    source: str,
    *,
    user: str | None = None,
    password: str | None = None,
    schema: str | None = None,
    num_partitions: int = 4,
) -> Inputs:
    """A directory is a Parquet export; anything else is a database URL (a bare ``*.db`` path is SQLite)."""
    if "://" not in source and not source.startswith("jdbc:"):
        path = Path(source)
        if path.is_dir():
            return read_parquet(spark, path)
        if path.is_file():
            return read_jdbc(spark, f"jdbc:sqlite:{path.resolve()}", num_partitions=num_partitions)
        raise FileNotFoundError(f"no such export directory or database file: {source}")
    return read_jdbc(spark, source, user=user, password=password, schema=schema, num_partitions=num_partitions)

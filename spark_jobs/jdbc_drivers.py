"""Where the JDBC drivers come from: Debian's packages, which need no download step of their own.

* PostgreSQL: ``libpostgresql-jdbc-java`` -> ``/usr/share/java/postgresql.jar`` (pgJDBC 42.x on bookworm).
* SQLite: ``libxerial-sqlite-jdbc-java`` -> ``/usr/share/java/sqlite-jdbc.jar`` (Xerial 3.40 on bookworm), whose
  native library comes from ``libxerial-sqlite-jdbc-jni`` (a dependency) in the JVM's default library path.

``spark_jobs/setup_jdbc.sh`` installs both. ``SPARK_JOBS_JDBC_JARS`` (a ``:``-separated list of jar paths)
overrides the search, e.g. on a machine where the jars live elsewhere.

``python -m spark_jobs.jdbc_drivers`` prints the jars found, comma-separated (for ``spark-submit --jars``), and
exits 1 if one is missing.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DRIVERS: dict[str, tuple[str, tuple[str, ...]]] = {
    # name -> (JDBC driver class, candidate jar paths, first found wins)
    "postgresql": ("org.postgresql.Driver", ("/usr/share/java/postgresql.jar",)),
    "sqlite": ("org.sqlite.JDBC", ("/usr/share/java/sqlite-jdbc.jar", "/usr/share/java/xerial-sqlite-jdbc.jar")),
}

ENV_VAR = "SPARK_JOBS_JDBC_JARS"


def driver_class(name: str) -> str:
    return DRIVERS[name][0]


def find_jars() -> dict[str, str | None]:
    """Driver name -> jar path (None when not found)."""
    override = [p for p in os.environ.get(ENV_VAR, "").split(":") if p]
    found: dict[str, str | None] = {}
    for name, (_cls, candidates) in DRIVERS.items():
        hit = next((p for p in override if name in Path(p).name.lower()), None)
        if hit is None:
            hit = next((p for p in candidates if Path(p).is_file()), None)
        found[name] = hit
    return found


def jar_list() -> list[str]:
    return [p for p in find_jars().values() if p]


def main() -> int:
    found = find_jars()
    missing = [name for name, path in found.items() if path is None]
    print(",".join(p for p in found.values() if p))
    if missing:
        print(f"missing JDBC drivers: {', '.join(missing)} (run spark_jobs/setup_jdbc.sh)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

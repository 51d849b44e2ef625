"""The export tests run against SQLite and PostgreSQL with the storage tests' ``database`` fixture."""

from tests.storage.conftest import database, postgres_available

__all__ = ["database", "postgres_available"]

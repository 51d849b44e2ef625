"""Alembic migrations of the storage schema (a package so that they ship inside the storage package)."""

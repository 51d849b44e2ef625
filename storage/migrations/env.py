"""Alembic environment: runs on the connection handed in by ``storage.database.migrate`` (no alembic.ini needed).

For development (``alembic revision --autogenerate``) a sync URL can be given with ``-x url=sqlite:///path``.
"""

from __future__ import annotations

from typing import Any

from alembic import context
from sqlalchemy import create_engine

from storage.models import Base

config = context.config
target_metadata = Base.metadata
RENDER_AS_BATCH = True


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no connection: call storage.database.migrate() or pass -x url=...")
    engine = create_engine(url)
    with engine.begin() as conn:
        _run(conn)


def _run(connection: Any) -> None:
    # SQLite cannot ALTER most things: later migrations need Alembic's copy-and-move "batch" mode there.
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=RENDER_AS_BATCH and connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations_online()

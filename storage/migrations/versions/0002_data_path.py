"""data path: topics, partitions, partition_batches (see storage/models.py for what each holds)

Revision ID: 0002
Revises: 0001
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "topics",
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("partitions", sa.Integer(), nullable=False),
        sa.Column("configs", sa.String(), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.Column("updated_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_topics")),
    )
    op.create_table(
        "partitions",
        sa.Column("topic", sa.String(), nullable=False),
        sa.Column("partition_index", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("log_start_offset", sa.BigInteger(), nullable=False),
        sa.Column("next_offset", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("topic", "partition_index", name=op.f("pk_partitions")),
    )
    op.create_table(
        "partition_batches",
        sa.Column("topic", sa.String(), nullable=False),
        sa.Column("partition_index", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("base_offset", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("last_offset", sa.BigInteger(), nullable=False),
        sa.Column("max_timestamp_ms", sa.BigInteger(), nullable=False),
        sa.Column("partition_epoch", sa.Integer(), nullable=False),
        sa.Column("size_bytes", sa.Integer(), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.Column("appended_ms", sa.BigInteger(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("topic", "partition_index", "base_offset", name=op.f("pk_partition_batches")),
    )
    if op.get_bind().dialect.name == "postgresql":
        # Batches are mostly compressed already: skip pglz and keep them out of line (TOAST without compression).
        op.execute("ALTER TABLE partition_batches ALTER COLUMN data SET STORAGE EXTERNAL")


def downgrade() -> None:
    op.drop_table("partition_batches")
    op.drop_table("partitions")
    op.drop_table("topics")

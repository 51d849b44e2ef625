"""idempotent producers: producer columns and index on partition_batches, partition_producers, producer_id_blocks

The batch header already carries the producer id, epoch and base sequence; the columns repeat them (-1 for the
batches stored before, and for producers that are not idempotent) so the producer state can be rebuilt at start-up
from an index, without reading batch rows.

Revision ID: 0003
Revises: 0002
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_WHERE = "producer_id >= 0"


def upgrade() -> None:
    with op.batch_alter_table("partition_batches") as batch:
        batch.add_column(sa.Column("producer_id", sa.BigInteger(), nullable=False, server_default="-1"))
        batch.add_column(sa.Column("producer_epoch", sa.Integer(), nullable=False, server_default="-1"))
        batch.add_column(sa.Column("base_sequence", sa.Integer(), nullable=False, server_default="-1"))
    op.create_index(
        op.f("ix_partition_batches_producers"),
        "partition_batches",
        [
            "topic",
            "partition_index",
            "producer_id",
            "base_offset",
            "producer_epoch",
            "base_sequence",
            "last_offset",
            "max_timestamp_ms",
            "appended_ms",
        ],
        sqlite_where=sa.text(_WHERE),
        postgresql_where=sa.text(_WHERE),
    )
    op.create_table(
        "partition_producers",
        sa.Column("topic", sa.String(), nullable=False),
        sa.Column("partition_index", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("producer_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("producer_epoch", sa.Integer(), nullable=False),
        sa.Column("retained_from", sa.BigInteger(), nullable=False),
        sa.Column("last_offset", sa.BigInteger(), nullable=False),
        sa.Column("last_appended_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("topic", "partition_index", "producer_id", name=op.f("pk_partition_producers")),
    )
    op.create_table(
        "producer_id_blocks",
        sa.Column("first_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("block_size", sa.Integer(), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.Column("allocated_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("first_id", name=op.f("pk_producer_id_blocks")),
    )


def downgrade() -> None:
    op.drop_table("producer_id_blocks")
    op.drop_table("partition_producers")
    op.drop_index(op.f("ix_partition_batches_producers"), table_name="partition_batches")
    with op.batch_alter_table("partition_batches") as batch:
        batch.drop_column("base_sequence")
        batch.drop_column("producer_epoch")
        batch.drop_column("producer_id")

"""SCRAM credentials: scram_credentials (one row per user and mechanism: salt, stored key, server key, iterations)

The salted credential Kafka keeps (KIP-554), never the password.

Revision ID: 0004
Revises: 0003
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "scram_credentials",
        sa.Column("user_name", sa.String(), nullable=False),
        sa.Column("mechanism", sa.String(), nullable=False),
        sa.Column("salt", sa.LargeBinary(), nullable=False),
        sa.Column("stored_key", sa.LargeBinary(), nullable=False),
        sa.Column("server_key", sa.LargeBinary(), nullable=False),
        sa.Column("iterations", sa.Integer(), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.Column("updated_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("user_name", "mechanism", name=op.f("pk_scram_credentials")),
    )


def downgrade() -> None:
    op.drop_table("scram_credentials")

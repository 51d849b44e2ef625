"""audit: admin_actions, one row per admin action with its actor (security.audit.AdminAction)

Revision ID: 0006
Revises: 0003 (0005 once the credentials (0004) and ACL (0005) migrations of issue #19 are in: chain it after them)
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "admin_actions",
        sa.Column("position", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("timestamp_ms", sa.BigInteger(), nullable=False),
        sa.Column("via", sa.String(), nullable=False),
        sa.Column("action", sa.String(), nullable=False),
        sa.Column("resource", sa.String(), nullable=False),
        sa.Column("group_id", sa.String(), nullable=True),
        sa.Column("principal", sa.String(), nullable=False),
        sa.Column("client_id", sa.String(), nullable=True),
        sa.Column("client_host", sa.String(), nullable=True),
        sa.Column("detail", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("position", name=op.f("pk_admin_actions")),
    )
    op.create_index(op.f("ix_admin_actions_group_id_position"), "admin_actions", ["group_id", "position"])
    op.create_index(op.f("ix_admin_actions_timestamp_ms"), "admin_actions", ["timestamp_ms"])


def downgrade() -> None:
    op.drop_index(op.f("ix_admin_actions_timestamp_ms"), table_name="admin_actions")
    op.drop_index(op.f("ix_admin_actions_group_id_position"), table_name="admin_actions")
    op.drop_table("admin_actions")

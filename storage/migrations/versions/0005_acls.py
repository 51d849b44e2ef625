"""acls: the ACL bindings of CreateAcls / DeleteAcls (issue #19)

Revision ID: 0005
Revises: 0003 (0004, the SCRAM credentials, is built beside it: the integrator sets down_revision to "0004")
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "acls",
        sa.Column("resource_type", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("resource_name", sa.String(), nullable=False),
        sa.Column("pattern_type", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("principal", sa.String(), nullable=False),
        sa.Column("host", sa.String(), nullable=False),
        sa.Column("operation", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("permission", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint(
            "resource_type",
            "resource_name",
            "pattern_type",
            "principal",
            "host",
            "operation",
            "permission",
            name=op.f("pk_acls"),
        ),
    )


def downgrade() -> None:
    op.drop_table("acls")

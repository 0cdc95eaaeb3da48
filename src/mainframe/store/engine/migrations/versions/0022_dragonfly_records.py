"""What a dragonfly deployment's bot keeps beside the scans (store/dragonfly/): its reports to
PyPI (one per package name and endpoint), its alert threshold per endpoint and its
suppressions. New tables: it rewrites nothing.

Revision ID: 0022
Revises: 0021
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _endpoint(*, primary_key: bool) -> sa.Column[int]:
    return sa.Column(
        "endpoint_id",
        Id,
        sa.ForeignKey("endpoints.id"),
        primary_key=primary_key,
        nullable=False,
    )


def upgrade() -> None:
    op.create_table(
        "dragonfly_reports",
        _endpoint(primary_key=True),
        sa.Column("name", sa.String(300), primary_key=True),
        sa.Column("version", sa.String(200), nullable=False),
        sa.Column("scan_id", Id, nullable=False),
        sa.Column("reported_at", sa.BigInteger, nullable=False),
        sa.Column("reported_by", sa.String(200), nullable=False),
        sa.Column("summary", sa.Text, nullable=False),
        sa.Column("inspector_url", sa.Text, nullable=False),
    )
    op.create_index(
        "ix_dragonfly_reports_recent", "dragonfly_reports", ["endpoint_id", "reported_at", "name"]
    )
    op.create_table(
        "dragonfly_alerting",
        _endpoint(primary_key=True),
        sa.Column("threshold", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
        sa.Column("updated_by", sa.String(200), nullable=False),
    )
    op.create_table(
        "dragonfly_suppressions",
        sa.Column("id", sa.String(36), primary_key=True),
        _endpoint(primary_key=False),
        sa.Column("name", sa.String(300), nullable=False),
        sa.Column("version", sa.String(200), nullable=False),
        sa.Column("rules", sa.Text),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("created_by", sa.String(200), nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
        sa.Column("updated_by", sa.String(200), nullable=False),
    )
    op.create_index(
        "ix_dragonfly_suppressions_key",
        "dragonfly_suppressions",
        ["endpoint_id", "name", "version", "created_at", "id"],
    )


def downgrade() -> None:
    op.drop_index("ix_dragonfly_suppressions_key", table_name="dragonfly_suppressions")
    op.drop_table("dragonfly_suppressions")
    op.drop_table("dragonfly_alerting")
    op.drop_index("ix_dragonfly_reports_recent", table_name="dragonfly_reports")
    op.drop_table("dragonfly_reports")

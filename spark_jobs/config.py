"""Job parameters, passed explicitly to every transform that needs them."""

from __future__ import annotations

from dataclasses import dataclass

HOUR_MS = 3_600_000
DAY_MS = 86_400_000

# Window granularities every windowed metric is computed for.
GRANULARITIES: dict[str, int] = {"hour": HOUR_MS, "day": DAY_MS}


@dataclass(frozen=True)
class ReportConfig:
    """What the report covers and its thresholds.

    ``since_ms``/``until_ms`` bound the report ([since, until), epoch ms UTC); ``None`` means "from the first
    stored event" / "up to the time the report runs" (the same for every group). ``until_ms`` is also the "as of"
    time: open state intervals end there and a rebalance still running then is reported as in progress.
    """

    since_ms: int | None = None
    until_ms: int | None = None
    group_glob: str | None = None
    offsets_retention_minutes: int = 10080  # Kafka's offsets.retention.minutes default (7 days)
    expiry_horizon_ms: int = DAY_MS  # report Empty groups whose offsets expire within this long after until
    stale_commit_ms: int = 15 * 60_000  # an assigned partition with no commit this long while Stable is reported
    percentile_accuracy: int = 10_000  # percentile_approx accuracy (exact below roughly this many values)

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000


@dataclass(frozen=True)
class ReportRange:
    """The resolved [since, until) of a run, in epoch ms."""

    since_ms: int
    until_ms: int

    def __post_init__(self) -> None:
        if self.until_ms < self.since_ms:
            raise ValueError(f"until ({self.until_ms}) is before since ({self.since_ms})")

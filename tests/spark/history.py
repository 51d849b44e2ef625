"""A tiny builder of stored history for the transform tests: rows in the canonical table shapes."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from pyspark.sql import SparkSession

from spark_jobs.schema import TABLES, Inputs

H = 3_600_000  # one hour in ms
M = 60_000  # one minute in ms


class History:
    """Append rows table by table; positions are given explicitly so tests read like a log."""

    def __init__(self) -> None:
        self.rows: dict[str, list[dict[str, Any]]] = defaultdict(list)

    def started(
        self,
        pos: int,
        group: str,
        ts: int,
        gen: int,
        cause: str = "new_member",
        prev: str = "Stable",
        member: str | None = None,
    ) -> History:
        self.rows["rebalance_started"].append(
            dict(
                position=pos,
                group_id=group,
                generation_id=gen,
                cause=cause,
                member_id=member,
                group_instance_id=None,
                reason=None,
                previous_state=prev,
                timestamp_ms=ts,
            )
        )
        return self

    def joined(
        self,
        pos: int,
        group: str,
        ts: int,
        gen: int,
        join_ms: int,
        state: str = "CompletingRebalance",
        members: int = 1,
        static: int = 0,
    ) -> History:
        self.rows["join_phase_completed"].append(
            dict(
                position=pos,
                group_id=group,
                generation_id=gen,
                state=state,
                protocol_type="consumer",
                protocol="range" if state != "Empty" else None,
                leader=None,
                member_count=members,
                static_member_count=static,
                join_duration_ms=join_ms,
                timestamp_ms=ts,
            )
        )
        return self

    def stabilized(self, pos: int, group: str, ts: int, gen: int, sync_ms: int, total_ms: int) -> History:
        self.rows["group_stabilized"].append(
            dict(
                position=pos,
                group_id=group,
                generation_id=gen,
                sync_duration_ms=sync_ms,
                rebalance_duration_ms=total_ms,
                timestamp_ms=ts,
            )
        )
        return self

    def snapshot(
        self,
        pos: int,
        group: str,
        ts: int,
        gen: int,
        members: dict[str, tuple[str | None, list[tuple[str, int]]]] | None = None,
        protocol_type: str = "consumer",
        state_ts: int | None = None,
    ) -> History:
        """members: member_id -> (group_instance_id, [(topic, partition), ...])."""
        members = members or {}
        self.rows["group_metadata_log"].append(
            dict(
                position=pos,
                group_id=group,
                protocol_type=protocol_type,
                generation_id=gen,
                protocol="range" if members else None,
                leader=next(iter(members), None),
                current_state_timestamp_ms=ts if state_ts is None else state_ts,
                member_count=len(members),
                timestamp_ms=ts,
            )
        )
        for member_id, (instance, partitions) in members.items():
            self.rows["generation_members"].append(
                dict(
                    position=pos,
                    group_id=group,
                    generation_id=gen,
                    member_id=member_id,
                    group_instance_id=instance,
                    client_id="c",
                    client_host="/127.0.0.1",
                    session_timeout_ms=45000,
                    rebalance_timeout_ms=300000,
                    assignment_decoded=True if protocol_type == "consumer" else None,
                )
            )
            for topic, partition in partitions:
                self.rows["assigned_partitions"].append(
                    dict(
                        position=pos,
                        group_id=group,
                        generation_id=gen,
                        member_id=member_id,
                        group_instance_id=instance,
                        topic=topic,
                        partition_index=partition,
                    )
                )
        return self

    def removed(self, pos: int, group: str, ts: int, cause: str = "deleted") -> History:
        self.rows["group_removals"].append(dict(position=pos, group_id=group, cause=cause, timestamp_ms=ts))
        return self

    def commit(
        self,
        pos: int,
        group: str,
        topic: str,
        partition: int,
        offset: int,
        ts: int,
        member: str = "m1",
        gen: int = 1,
        expire_ts: int | None = None,
    ) -> History:
        self.rows["offset_commits"].append(
            dict(
                position=pos,
                group_id=group,
                topic=topic,
                partition_index=partition,
                committed_offset=offset,
                leader_epoch=-1,
                commit_timestamp_ms=ts,
                expire_timestamp_ms=expire_ts,
                member_id=member,
                generation_id=gen,
            )
        )
        return self

    def offset_removed(
        self, pos: int, group: str, topic: str, partition: int, ts: int, cause: str = "deleted"
    ) -> History:
        self.rows["offset_removals"].append(
            dict(position=pos, group_id=group, topic=topic, partition_index=partition, cause=cause, timestamp_ms=ts)
        )
        return self

    def member_joined(self, pos: int, group: str, ts: int, member: str, instance: str | None = None) -> History:
        self.rows["member_joined"].append(
            dict(
                position=pos,
                group_id=group,
                member_id=member,
                group_instance_id=instance,
                client_id="c",
                client_host="/127.0.0.1",
                session_timeout_ms=45000,
                rebalance_timeout_ms=300000,
                timestamp_ms=ts,
            )
        )
        return self

    def member_removed(
        self, pos: int, group: str, ts: int, member: str, cause: str, gen: int = 1, instance: str | None = None
    ) -> History:
        self.rows["member_removed"].append(
            dict(
                position=pos,
                group_id=group,
                member_id=member,
                group_instance_id=instance,
                cause=cause,
                reason=None,
                generation_id=gen,
                timestamp_ms=ts,
            )
        )
        return self

    def batch(self, pos: int, topic: str, partition: int, base: int, last: int, appended_ms: int) -> History:
        """A record batch of the data path (``partition_batches``, without its bytes)."""
        self.rows["partition_batches"].append(
            dict(topic=topic, partition_index=partition, base_offset=base, last_offset=last, appended_ms=appended_ms,
                 position=pos)
        )  # fmt: skip
        return self

    def admin_action(
        self,
        pos: int,
        group: str | None,
        ts: int,
        action: str,
        principal: str,
        client_id: str | None = None,
        host: str | None = "10.0.0.9",
        via: str = "http",
    ) -> History:
        """An entry of the audit trail (``admin_actions``): who did an admin action."""
        self.rows["admin_actions"].append(
            dict(
                position=pos,
                timestamp_ms=ts,
                via=via,
                action=action,
                resource=group or "",
                group_id=group,
                principal=principal,
                client_id=client_id,
                client_host=host,
                detail=action,
            )
        )
        return self

    def inputs(self, spark: SparkSession) -> Inputs:
        tables = {}
        for name, schema in TABLES.items():
            rows = [tuple(r[f.name] for f in schema.fields) for r in self.rows.get(name, [])]
            tables[name] = spark.createDataFrame(rows, schema)
        return Inputs.from_tables(spark, tables)

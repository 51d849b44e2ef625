"""The classic group and its members: data and the predicates Kafka's coordinator uses.

This module holds no request logic (the handlers are ``coordinator.join``, ``sync``, ``heartbeat``, ``leave`` over
``coordinator.rebalance``). Every state change goes through ``ClassicGroup.apply(event)``, which checks the event
table of ``coordinator.states`` and stamps the time.

States, with how each request is answered ("action") and where the group can go ("transition"):

* ``EMPTY`` - no members; lingers while offsets exist; also the state of "simple" groups (offsets only).
  action: JoinGroup from a new member starts the initial (delayed) rebalance; existing-member Join/Sync/Heartbeat
  get UNKNOWN_MEMBER_ID; admin commits (generation -1) are accepted.
  transition: PreparingRebalance on the first join; deleted by DeleteGroups or the retention cleanup.
* ``PREPARING_REBALANCE`` - join phase: JoinGroups are parked until everyone rejoined or the timer fired.
  action: Heartbeat -> REBALANCE_IN_PROGRESS; SyncGroup -> REBALANCE_IN_PROGRESS; member commits accepted.
  transition: CompletingRebalance (>= 1 member) or Empty (0 members), generation + 1 either way.
* ``COMPLETING_REBALANCE`` - sync phase: waiting for the leader's assignment (a.k.a. AwaitingSync).
  action: Heartbeat -> NONE; SyncGroup parked; member commits -> REBALANCE_IN_PROGRESS.
  transition: Stable once the leader's assignment is durable; PreparingRebalance on any membership change.
* ``STABLE`` - assignment persisted and handed out.
  action: Heartbeat -> NONE; SyncGroup answered at once; unchanged follower JoinGroup answered at once.
  transition: PreparingRebalance on leader rejoin, metadata change, new member, leave, expiry.
* ``DEAD`` - terminal (unloaded); Join/Sync/Heartbeat/Leave/Commit -> COORDINATOR_NOT_AVAILABLE.

The transitions, event by event, are ``coordinator.states.TRANSITIONS``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from protocol.consumer_protocol import subscription_topics
from protocol.errors import ErrorCode

from .deferred import Deferred
from .group_type import BaseTimestamp, commit_time
from .messages import DescribedGroup, DescribedMember, JoinGroupMember, JoinGroupResult, ListedGroup, SyncGroupResult
from .states import TRANSITIONS, VALID_PREVIOUS_STATES, GroupEvent, GroupState, IllegalStateTransition

__all__ = [
    "CLASSIC_GROUP_TYPE",
    "CONSUMER_PROTOCOL_TYPE",
    "VALID_PREVIOUS_STATES",
    "ClassicGroup",
    "GroupEvent",
    "GroupState",
    "IllegalStateTransition",
    "Member",
    "MemberValidationError",
]

CONSUMER_PROTOCOL_TYPE = "consumer"
CLASSIC_GROUP_TYPE = "classic"  # ListGroups' group_type (KIP-848)

_NONE = ErrorCode.none


def _distinct_names(protocols: list[tuple[str, bytes]]) -> dict[str, None]:
    """A member's protocol names, each once, in preference order.

    Kafka keys a member's protocols by name (``mapKey`` in JoinGroupRequest.json) and its support checks, the vote
    and ``metadata`` all see a name once (the first entry wins). Counting a name listed twice as two supporters
    made ``supported_protocols`` exceed the member count, so no protocol was ever a candidate: the join phase
    raised and the group stayed in PreparingRebalance for good (issue #15). Kafka 3.9 counts every entry
    (ClassicGroup.incrementSupportedProtocols) and so has the same flaw; we count each name once.
    """
    return dict.fromkeys(name for name, _ in protocols)


def no_session_timers(member: Member) -> None:
    """The ``keep_alive`` of a group built outside a shard (unit tests): it has no session timers to re-arm."""
    raise RuntimeError(f"member {member.member_id}: a group built outside a shard has no session timers")


class MemberValidationError(Exception):
    def __init__(self, error: ErrorCode) -> None:
        super().__init__(error.name)
        self.error = error


@dataclass(slots=True, eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # ordered by preference
    assignment: bytes = b""
    join_reply: Deferred[JoinGroupResult] | None = None  # parked JoinGroup
    sync_reply: Deferred[SyncGroupResult] | None = None  # parked SyncGroup
    is_new: bool = True
    joined_at_ms: int = 0
    # Monotonic (Clock.monotonic_ms): the last heartbeat (shown to operators as the time since), when the session
    # expires, and when the armed session timer fires. A heartbeat only moves the deadline; the armed timer re-arms
    # for it when it fires. Only a deadline earlier than the armed timer (a heartbeat of a new member whose timer
    # runs for the new-member join timeout) re-arms the timer at once.
    last_heartbeat_monotonic_ms: int = 0
    session_deadline_monotonic_ms: int = 0
    session_timer_monotonic_ms: int = 0
    # Session-timer plumbing, built once per member (``coordinator.rebalance.track``) so that a heartbeat allocates
    # nothing: the timer key (group id, member id) and the expiry operation bound to this group and member.
    heartbeat_key: tuple[str, str] = ("", "")
    expire_op: Callable[[], None] | None = None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_reply is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_reply is not None

    def has_satisfied_heartbeat(self) -> bool:
        """A parked member is alive by definition, except a new one (the 5-minute new-member timeout applies)."""
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        raise KeyError(protocol)

    def metadata_or_empty(self, protocol: str | None) -> bytes:
        if protocol is None:
            return b""
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


@dataclass(slots=True, eq=False)
class ClassicGroup:
    group_id: str
    created_ms: int
    state: GroupState = GroupState.EMPTY
    previous_state: GroupState = GroupState.DEAD
    state_timestamp_ms: int = -1
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)  # insertion ordered: deterministic re-election
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    pending_join_members: set[str] = field(default_factory=set)
    num_members_awaiting_join: int = 0
    supported_protocols: Counter[str] = field(default_factory=Counter)
    pending_sync_members: set[str] = field(default_factory=set)
    subscribed_topics: frozenset[str] | None = None
    new_member_added: bool = False
    # history bookkeeping (not part of Kafka's state)
    rebalance_started_ms: int | None = None
    join_completed_ms: int | None = None
    # The leader's latest SyncGroup assignment write of this generation: a repeated leader SyncGroup writes again,
    # and only the completion of the latest write acts (log order: it is the one a reload sees).
    assignment_write: object | None = None
    # What an accepted member OffsetCommit in Stable/PreparingRebalance does to keep the member alive: the shard's
    # ``rebalance.schedule_session`` (set where the shard creates or replays a group; one object per shard).
    keep_alive: Callable[[Member], None] = field(default=no_session_timers, repr=False)

    def __post_init__(self) -> None:
        if self.state_timestamp_ms < 0:
            self.state_timestamp_ms = self.created_ms

    # ---------------------------------------------------------------------------------------------- state table
    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    def accepts(self, event: GroupEvent) -> bool:
        """Whether ``event`` moves the group from its current state (``coordinator.states.TRANSITIONS``)."""
        return self.state in TRANSITIONS[event].sources

    def apply(self, event: GroupEvent, now_ms: int) -> None:
        """Move the group as ``event`` says; an event the current state does not accept is an internal error."""
        sources, target = TRANSITIONS[event]
        if self.state not in sources:
            raise IllegalStateTransition(
                f"group {self.group_id}: {event.name} is illegal in {self.state.value} (-> {target.value})"
            )
        self.previous_state = self.state
        self.state = target
        self.state_timestamp_ms = now_ms

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        """Move to ``target`` by whatever event leads there (tests build groups in a given state this way)."""
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise IllegalStateTransition(
                f"group {self.group_id}: illegal transition {self.state.value} -> {target.value}"
            )
        self.previous_state = self.state
        self.state = target
        self.state_timestamp_ms = now_ms

    # ------------------------------------------------------------------------------------------------- members
    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        if group_instance_id is None:
            return None
        return self.static_members.get(group_instance_id)

    def add(self, member: Member, join_reply: Deferred[JoinGroupResult] | None = None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        for name in _distinct_names(member.protocols):
            self.supported_protocols[name] += 1
        if join_reply is not None:
            member.join_reply = join_reply
            self.num_members_awaiting_join += 1
        pending = self.pending_join_members
        if pending:
            pending.discard(member.member_id)
            if not pending:
                pending.clear()  # frees the table it grew to (emptied by discards, a set keeps it: ~500 B a group)

    def remove(self, member_id: str) -> Member | None:
        """Forget a member (or a pending MEMBER_ID_REQUIRED id). Parked replies are the caller's business."""
        self.pending_join_members.discard(member_id)
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        for name in _distinct_names(member.protocols):
            self.supported_protocols[name] -= 1
            if self.supported_protocols[name] <= 0:
                del self.supported_protocols[name]
        if member.is_awaiting_join:
            self.num_members_awaiting_join -= 1
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        self.pending_sync_members.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def shared_fields(
        self,
        client_id: str,
        client_host: str,
        protocol_type: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocols: list[tuple[str, bytes]],
    ) -> tuple[str, str, str, int, int, list[tuple[str, bytes]]]:
        """These fields of a joining member, as the group leader's objects wherever they are equal, else as given (the
        protocol list copied): the members of a group mostly send the same ones, and each member holding its own
        copies cost ~350 bytes a member at 1,000,000 members (a 45,000 ms timeout is not one of Python's cached small
        ints; the protocol list holds the metadata bytes). Members' lists are never changed in place
        (``update_member`` replaces them), so sharing is safe."""
        leader = self.members.get(self.leader_id) if self.leader_id is not None else None
        shared = protocols
        if leader is not None:
            if leader.client_id == client_id:
                client_id = leader.client_id
            if leader.client_host == client_host:
                client_host = leader.client_host
            if leader.protocol_type == protocol_type:
                protocol_type = leader.protocol_type
            if leader.rebalance_timeout_ms == rebalance_timeout_ms:
                rebalance_timeout_ms = leader.rebalance_timeout_ms
            if leader.session_timeout_ms == session_timeout_ms:
                session_timeout_ms = leader.session_timeout_ms
            if leader.protocols == protocols:
                shared = leader.protocols
        if shared is protocols:
            shared = list(protocols)  # the member's own copy
        return client_id, client_host, protocol_type, rebalance_timeout_ms, session_timeout_ms, shared

    def update_member(
        self,
        member: Member,
        protocols: list[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        join_reply: Deferred[JoinGroupResult] | None,
    ) -> None:
        for name in _distinct_names(member.protocols):
            self.supported_protocols[name] -= 1
            if self.supported_protocols[name] <= 0:
                del self.supported_protocols[name]
        for name in _distinct_names(protocols):
            self.supported_protocols[name] += 1
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        # A duplicate JoinGroup replaces the parked handle. Kafka never answers the earlier request; the
        # JoinGroup handler answers it (REBALANCE_IN_PROGRESS) before calling this so that no reply is left dangling.
        if join_reply is not None and not member.is_awaiting_join:
            self.num_members_awaiting_join += 1
        elif join_reply is None and member.is_awaiting_join:
            self.num_members_awaiting_join -= 1
        member.join_reply = join_reply

    def complete_join_reply(self, member: Member, result: JoinGroupResult) -> None:
        reply = member.join_reply
        if reply is None:
            return
        member.join_reply = None
        self.num_members_awaiting_join -= 1
        reply.resolve(result)

    def complete_sync_reply(self, member: Member, result: SyncGroupResult) -> None:
        reply = member.sync_reply
        if reply is None:
            return
        member.sync_reply = None
        reply.resolve(result)

    def replace_static_member(self, group_instance_id: str, old_member_id: str, new_member_id: str) -> Member:
        """Kafka's replaceStaticMember: the same instance comes back under a new member id.

        The old member's parked JoinGroup/SyncGroup are answered FENCED_INSTANCE_ID; the new member copies the old
        one's identity, timeouts, protocols and assignment, takes over leadership and the instance mapping. The old
        id's place in ``pending_sync_members`` goes to the new id (Kafka leaves the stale id there, which would make
        the pending-sync timer rebalance a Stable group for a member that no longer exists).
        """
        old = self.members.pop(old_member_id, None)
        if old is None:
            raise KeyError(old_member_id)
        if old.join_reply is not None:
            self.num_members_awaiting_join -= 1
            reply, old.join_reply = old.join_reply, None
            reply.resolve(JoinGroupResult(error=ErrorCode.fenced_instance_id, member_id=old_member_id))
        if old.sync_reply is not None:
            sync, old.sync_reply = old.sync_reply, None
            sync.resolve(SyncGroupResult(error=ErrorCode.fenced_instance_id))
        new = Member(
            member_id=new_member_id,
            group_instance_id=old.group_instance_id,
            client_id=old.client_id,
            client_host=old.client_host,
            rebalance_timeout_ms=old.rebalance_timeout_ms,
            session_timeout_ms=old.session_timeout_ms,
            protocol_type=old.protocol_type,
            protocols=old.protocols,
            assignment=old.assignment,
            is_new=False,
            joined_at_ms=old.joined_at_ms,
            last_heartbeat_monotonic_ms=old.last_heartbeat_monotonic_ms,
        )
        self.members[new_member_id] = new
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        return new

    def maybe_elect_new_joined_leader(self) -> bool:
        """Kafka's maybeElectNewJoinedLeader: keep a leader that rejoined, else pick the first member that did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member in self.members.values():
            if member.is_awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    def init_next_generation(self, now_ms: int) -> None:
        """Kafka's initNextGeneration: generation + 1, then CompletingRebalance (protocol selected) or Empty."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.compute_subscribed_topics()
            self.apply(GroupEvent.JOIN_COMPLETED, now_ms)
        else:
            self.protocol_name = None
            self.compute_subscribed_topics()
            self.apply(GroupEvent.ALL_MEMBERS_GONE, now_ms)
        self.pending_sync_members.clear()

    def current_generation_result(self, member_id: str, *, with_members: bool) -> JoinGroupResult:
        """A JoinGroup answer with the current generation (the leader's with the member list)."""
        return JoinGroupResult(
            error=ErrorCode.none,
            generation_id=self.generation_id,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            leader=self.leader_id or "",
            member_id=member_id,
            members=self.current_members() if with_members else [],
        )

    def current_members(self) -> list[JoinGroupMember]:
        """The leader's member list: every member (static absentees too) with its selected-protocol metadata."""
        protocol = self.protocol_name
        return [
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata_or_empty(protocol))
            for m in self.members.values()
        ]

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_members_awaiting_join and not self.pending_join_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def is_simple_group(self) -> bool:
        return self.protocol_type is None and self.state is GroupState.EMPTY and not self.pending_join_members

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def validate_member(self, member_id: str, group_instance_id: str | None) -> Member:
        """Kafka's validateMember: raises MemberValidationError(UNKNOWN_MEMBER_ID | FENCED_INSTANCE_ID)."""
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                raise MemberValidationError(ErrorCode.unknown_member_id)
            if existing != member_id:
                raise MemberValidationError(ErrorCode.fenced_instance_id)
        member = self.members.get(member_id)
        if member is None:
            raise MemberValidationError(ErrorCode.unknown_member_id)
        return member

    # ---------------------------------------------------------------------------------------------- protocols
    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if not self.members:
            return protocol_type != "" and len(names) > 0
        n = len(self.members)
        return protocol_type == self.protocol_type and any(self.supported_protocols.get(p, 0) == n for p in names)

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {p for p, count in self.supported_protocols.items() if count == n}

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol that every member supports.

        Ties (Kafka leaves them to HashMap order) are broken deterministically: the candidate the leader prefers
        most among the tied ones, then the lowest name.
        """
        if not self.members:
            raise IllegalStateTransition(f"group {self.group_id}: cannot select a protocol for an empty group")
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter(m.vote(candidates) for m in self.members.values())
        best = max(votes.values())
        tied = {p for p, c in votes.items() if c == best}
        if len(tied) == 1:
            return next(iter(tied))
        leader = self.members.get(self.leader_id or "")
        if leader is not None:
            for name, _ in leader.protocols:
                if name in tied:
                    return name
        return min(tied)

    def compute_subscribed_topics(self) -> None:
        """Topics of the selected protocol's subscriptions (consumer groups only), as Kafka computes them.

        None means unknown (not a consumer group, no protocol yet, or an unparsable subscription).
        """
        if not self.uses_consumer_protocol():
            self.subscribed_topics = None
        elif not self.members:
            self.subscribed_topics = frozenset()
        elif self.protocol_name is None:
            self.subscribed_topics = None
        else:
            # Each distinct subscription is read once: the members of a group mostly send the same bytes (a
            # 10,000-member join phase read 10,000 equal subscriptions here, ~10 % of its completion).
            topics: set[str] = set()
            read: set[bytes] = set()
            try:
                for m in self.members.values():
                    metadata = m.metadata(self.protocol_name)
                    if metadata not in read:
                        read.add(metadata)
                        topics.update(subscription_topics(metadata))
            except (ValueError, KeyError):
                self.subscribed_topics = None
                return
            self.subscribed_topics = frozenset(topics)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if self.subscribed_topics is not None:
            return topic in self.subscribed_topics
        return self.uses_consumer_protocol()

    # ------------------------------------------------------------------- the group-type seam (group_type.Group)
    @property
    def group_type(self) -> str:
        return CLASSIC_GROUP_TYPE

    @property
    def state_name(self) -> str:
        return self.state.value

    @property
    def state_lower(self) -> str:
        return self.state.lower

    def is_empty(self) -> bool:
        return self.state is GroupState.EMPTY

    def validate_delete(self) -> ErrorCode:
        """Only an Empty group can be deleted."""
        if self.state is GroupState.DEAD:
            return ErrorCode.group_id_not_found
        if self.state is not GroupState.EMPTY:
            return ErrorCode.non_empty_group
        return _NONE

    def listed(self) -> ListedGroup:
        return ListedGroup(self.group_id, self.protocol_type or "", self.state.display, CLASSIC_GROUP_TYPE)

    def described(self) -> DescribedGroup:
        """Members with their assignment; the selected protocol and each member's metadata for it only in Stable."""
        protocol = self.protocol_name if self.state is GroupState.STABLE else None
        return DescribedGroup(
            self.group_id,
            _NONE,
            self.state.display,
            self.protocol_type or "",
            protocol or "",
            [_described_member(m, protocol) for m in self.members.values()],
        )

    def validate_offset_commit(
        self, member_id: str, generation_or_epoch: int, instance_id: str | None, api_version: int
    ) -> ErrorCode:
        """Kafka's validateOffsetCommit against an existing group (C3-C7; C1/C2, no group, are the caller's).
        Re-arms the member's session on an accepted member commit in Stable or PreparingRebalance."""
        state = self.state
        if state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available  # C3
        if generation_or_epoch < 0 and state is GroupState.EMPTY:
            return _NONE  # C4: admin / manual assignment; member and instance ids are ignored (and not recorded)
        if generation_or_epoch >= 0 or member_id != "" or instance_id is not None:
            try:
                member = self.validate_member(member_id, instance_id)  # C5
            except MemberValidationError as e:
                return e.error
            if generation_or_epoch != self.generation_id:
                return ErrorCode.illegal_generation
        else:
            return ErrorCode.unknown_member_id  # C6: no member id in a group that has members
        if state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.rebalance_in_progress  # C7
        if state is GroupState.STABLE or state is GroupState.PREPARING_REBALANCE:
            # In the classic protocol an offset commit proves the member is alive.
            self.keep_alive(member)
        return _NONE

    def validate_offset_fetch(self) -> ErrorCode:
        """A Dead group has no offsets to show (answered like an absent group, without an error)."""
        return ErrorCode.group_id_not_found if self.state is GroupState.DEAD else _NONE

    def validate_offset_delete(self) -> ErrorCode:
        """Offsets can be deleted in an Empty group, and in a consumer-protocol group (topic by topic)."""
        if self.state is GroupState.DEAD:
            return ErrorCode.group_id_not_found
        if self.state is not GroupState.EMPTY and not self.uses_consumer_protocol():
            return ErrorCode.non_empty_group
        return _NONE

    def is_subscribed_to(self, topic: str) -> bool:
        # Nothing is "subscribed" in an Empty group (its subscription set is empty).
        return self.state is not GroupState.EMPTY and self.is_subscribed_to_topic(topic)

    def offset_expiration_base(self) -> BaseTimestamp | None:
        """Kafka's ClassicGroup.offsetExpirationCondition (§9.3): a simple group (no protocol type) expires offsets
        by commit time; an Empty group with a protocol type by the time it became Empty (commit time if unknown); a
        Stable consumer group whose subscriptions are known by commit time (only unsubscribed topics' offsets);
        any other group's offsets do not expire."""
        if self.protocol_type is None:
            return commit_time if self.state is not GroupState.DEAD else None
        if self.state is GroupState.EMPTY:
            became_empty = self.state_timestamp_ms
            if became_empty >= 0:
                return lambda _o: became_empty
            return commit_time
        if self.state is GroupState.STABLE and self.uses_consumer_protocol() and self.subscribed_topics is not None:
            return commit_time
        return None


def _described_member(m: Member, protocol: str | None) -> DescribedMember:
    """Metadata (the selected protocol's) only in Stable; the assignment always."""
    metadata = b""
    if protocol is not None:
        try:
            metadata = m.metadata(protocol)
        except KeyError:
            metadata = b""
    return DescribedMember(m.member_id, m.group_instance_id, m.client_id, m.client_host, metadata, m.assignment)

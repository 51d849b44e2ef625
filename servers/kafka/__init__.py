"""Per-API adapters: kio request of any advertised version -> core message -> kio response of that version.

``HANDLERS`` maps an api key to its handler; ``servers.kafka.listener`` dispatches through it.
"""

from __future__ import annotations

from protocol.apis import ApiKey

from .acls import handle_create_acls, handle_delete_acls, handle_describe_acls
from .context import CoordinatorApi, Handler, Node, RequestContext, Services
from .describe_cluster import handle_describe_cluster
from .find_coordinator import handle_find_coordinator
from .groups_admin import handle_delete_groups, handle_describe_groups, handle_list_groups
from .init_producer_id import handle_init_producer_id
from .membership import handle_heartbeat, handle_join_group, handle_leave_group, handle_sync_group
from .metadata import handle_metadata
from .offsets import handle_offset_commit, handle_offset_delete, handle_offset_fetch
from .partitions import handle_fetch, handle_list_offsets
from .produce import handle_produce
from .sasl import handle_sasl_authenticate, handle_sasl_handshake
from .topics_admin import (
    handle_alter_configs,
    handle_create_partitions,
    handle_create_topics,
    handle_delete_records,
    handle_delete_topics,
    handle_describe_configs,
    handle_incremental_alter_configs,
    handle_offset_for_leader_epoch,
)
from .users_admin import handle_alter_user_scram_credentials, handle_describe_user_scram_credentials
from .versions import handle_api_versions

HANDLERS: dict[int, Handler] = {
    ApiKey.API_VERSIONS: handle_api_versions,
    ApiKey.METADATA: handle_metadata,
    ApiKey.FIND_COORDINATOR: handle_find_coordinator,
    ApiKey.JOIN_GROUP: handle_join_group,
    ApiKey.SYNC_GROUP: handle_sync_group,
    ApiKey.HEARTBEAT: handle_heartbeat,
    ApiKey.LEAVE_GROUP: handle_leave_group,
    ApiKey.OFFSET_COMMIT: handle_offset_commit,
    ApiKey.OFFSET_FETCH: handle_offset_fetch,
    ApiKey.OFFSET_DELETE: handle_offset_delete,
    ApiKey.PRODUCE: handle_produce,
    ApiKey.LIST_OFFSETS: handle_list_offsets,
    ApiKey.FETCH: handle_fetch,
    ApiKey.LIST_GROUPS: handle_list_groups,
    ApiKey.DESCRIBE_GROUPS: handle_describe_groups,
    ApiKey.DELETE_GROUPS: handle_delete_groups,
    ApiKey.DESCRIBE_CLUSTER: handle_describe_cluster,
    ApiKey.CREATE_TOPICS: handle_create_topics,
    ApiKey.DELETE_TOPICS: handle_delete_topics,
    ApiKey.DELETE_RECORDS: handle_delete_records,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: handle_offset_for_leader_epoch,
    ApiKey.DESCRIBE_CONFIGS: handle_describe_configs,
    ApiKey.CREATE_PARTITIONS: handle_create_partitions,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: handle_incremental_alter_configs,
    ApiKey.ALTER_CONFIGS: handle_alter_configs,
    ApiKey.INIT_PRODUCER_ID: handle_init_producer_id,
    ApiKey.DESCRIBE_ACLS: handle_describe_acls,
    ApiKey.CREATE_ACLS: handle_create_acls,
    ApiKey.DELETE_ACLS: handle_delete_acls,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: handle_describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: handle_alter_user_scram_credentials,
    ApiKey.SASL_HANDSHAKE: handle_sasl_handshake,  # ILLEGAL_SASL_STATE; a SASL listener answers in sasl.SaslState
    ApiKey.SASL_AUTHENTICATE: handle_sasl_authenticate,
}

__all__ = ["HANDLERS", "CoordinatorApi", "Handler", "Node", "RequestContext", "Services"]

"""ApiVersions (18), v0-4. An unsupported ApiVersions version is answered by the codec (v0 frame, error 35)."""

from __future__ import annotations

from typing import Any

from protocol.errors import ErrorCode

from ._util import response_cls
from .build import build
from .context import RequestContext, Services


def handle_api_versions(services: Services, ctx: RequestContext, body: Any) -> Any:
    keys = [
        {"api_key": key, "min_version": lo, "max_version": hi}
        for key, (lo, hi) in sorted(services.supported_versions.items())
    ]
    return build(
        response_cls(ctx),
        {
            "error_code": ErrorCode.none,
            "api_keys": keys,
            "supported_features": [],
            "finalized_features_epoch": -1,
            "finalized_features": [],
            "zk_migration_ready": False,
        },
    )

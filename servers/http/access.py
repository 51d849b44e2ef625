"""Who may do what on the operator API: principals with roles, bearer tokens stored hashed, and the browser guards.

**Roles.** Three, each including the ones before it (Kafka has no roles on its own HTTP-less broker; these are the
operator API's): a ``viewer`` reads (every GET), an ``operator`` also resets offsets and removes static members, an
``admin`` also deletes (groups, offsets, topics), creates and reconfigures topics, and manages users and ACLs. Each
endpoint of ``routes.ENDPOINTS`` names the role it needs (``Endpoint.role``); a request is served when the role of its
principal is at least that one, else answered 401 (no or an unknown credential) or 403 (a known principal whose role
is too low).

**Principals and tokens.** A principal is a name (``User:<name>`` in the audit, as Kafka writes principals), a role
and the SHA-256 of its bearer token: the daemon never keeps a token, only its digest (``[http] principals``;
``kgc http-token NAME ROLE`` makes a random token and its entry). Tokens are random (32 bytes from
``secrets.token_urlsafe``), so a plain SHA-256 is enough: it is a lookup key that cannot be turned back into a token,
not a password hash that must resist guessing. The older single ``[http] token`` stays and acts as an ``admin``
principal named ``token``. A request without credentials gets ``anonymous_role``: ``admin`` when no credential is
configured at all (no token, no principal, no ``[http] basic_auth``: the API is open, as before), else the
``[http] anonymous_role`` setting (``viewer`` by default: the dashboard reads without a token; ``none`` answers every
request but ``/healthz``, ``/readyz`` and the dashboard's static files with 401).

**HTTP Basic** (``servers.http.basic_auth``, ``[http] basic_auth``, over TLS only): the SCRAM users of the Kafka
listeners, as ``User:<name>``, with the role ``[http] user_roles`` gives them (none if not listed).

**Browsers (CSRF).** A page on another origin can make a browser send requests to the API with the browser's
network position (the operator's laptop reaches 127.0.0.1:8080). Three guards, each sufficient for the common cases:

* credentials travel only in the ``Authorization`` header, which the dashboard sets from a token the user typed: a
  browser never adds it by itself (there are no cookies), and a cross-origin page cannot set it without a CORS
  preflight, which the API never grants;
* every state change is a POST/PATCH/DELETE with a JSON body where it has one (``routes.parse_body`` refuses other
  content types), which a cross-origin page cannot send without that preflight either;
* ``Origin`` is checked on every state change: a request whose ``Origin`` is neither the API's own
  (``scheme://Host``) nor listed in ``[http] allowed_origins`` is answered 403, and so is one a browser marks
  ``Sec-Fetch-Site: cross-site``. Clients that are no browser send no ``Origin`` and are not affected.

The dashboard's pages carry a Content-Security-Policy (``CSP``) that allows scripts, styles and connections to its
own origin only, forbids framing (clickjacking) and inline scripts, plus ``X-Content-Type-Options: nosniff``,
``Referrer-Policy: no-referrer`` and ``X-Frame-Options: DENY``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum

ANONYMOUS = "User:ANONYMOUS"
LEGACY_TOKEN_PRINCIPAL = "token"  # the principal of the single ``[http] token``


class Role(IntEnum):
    """Ordered: a role may do everything the lower ones may."""

    NONE = 0
    VIEWER = 1
    OPERATOR = 2
    ADMIN = 3

    @classmethod
    def parse(cls, name: str) -> Role:
        try:
            return cls[name.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown role {name!r}: expected viewer, operator, admin (or none)") from None

    @property
    def label(self) -> str:
        return self.name.lower()


def token_digest(token: str) -> str:
    """The hex SHA-256 of a bearer token: what the configuration keeps instead of the token."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return secrets.token_urlsafe(32)


@dataclass(frozen=True, slots=True)
class HttpPrincipal:
    name: str  # as the audit shows it: "User:alice", or "token" for the legacy single token
    role: Role


@dataclass(frozen=True, slots=True)
class TokenEntry:
    """One configured principal: its name (without ``User:``), its role and the SHA-256 (hex) of its token."""

    name: str
    role: Role
    token_sha256: str


class Access:
    """The operator API's principals (module docstring). Looking a token up costs one SHA-256 and one dict lookup,
    whatever the number of principals."""

    def __init__(
        self,
        entries: Iterable[TokenEntry] = (),
        *,
        legacy_token: str | None = None,
        anonymous_role: Role = Role.VIEWER,
        allowed_origins: Iterable[str] = (),
        basic: bool = False,
    ) -> None:
        self._by_digest: dict[str, HttpPrincipal] = {}
        for e in entries:
            digest = e.token_sha256.strip().lower()
            if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
                raise ValueError(f"principal {e.name!r}: token_sha256 must be 64 hex digits (kgc http-token)")
            if digest in self._by_digest:
                raise ValueError(f"principal {e.name!r}: the same token as {self._by_digest[digest].name!r}")
            self._by_digest[digest] = HttpPrincipal(f"User:{e.name}", e.role)
        self._legacy = legacy_token.encode() if legacy_token else None
        # HTTP Basic with the SCRAM users (servers.http.basic_auth) is a credential too: the API is not open.
        self.secured = bool(self._by_digest) or self._legacy is not None or basic
        # With no credential configured the API is open, as it always was.
        self.anonymous = HttpPrincipal(ANONYMOUS, anonymous_role if self.secured else Role.ADMIN)
        self.allowed_origins = frozenset(o.rstrip("/").lower() for o in allowed_origins)

    @classmethod
    def open(cls) -> Access:
        return cls()

    def authenticate(self, authorization: str | None) -> HttpPrincipal | None:
        """The principal of an ``Authorization`` header value; the anonymous one without the header; None for a
        credential that names nobody (answered 401)."""
        if not authorization:
            return self.anonymous
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() != "bearer":
            return None
        value = value.strip()
        if not value:
            return None
        found = self._by_digest.get(token_digest(value))
        if found is not None:
            return found
        if self._legacy is not None and hmac.compare_digest(value.encode(), self._legacy):
            return HttpPrincipal(LEGACY_TOKEN_PRINCIPAL, Role.ADMIN)
        return None

    def origin_allowed(self, headers: Mapping[str, str], scheme: str, host: str | None) -> bool:
        """May a state change with these headers go ahead (CSRF guard, module docstring)?"""
        if headers.get("Sec-Fetch-Site", "").lower() == "cross-site":
            return False
        origin = headers.get("Origin")
        if origin is None:
            return True  # not sent by a browser's cross-origin request (curl, the CLI, the Kafka tools)
        origin = origin.rstrip("/").lower()
        if host is not None and origin == f"{scheme}://{host}".lower():
            return True
        return origin in self.allowed_origins


# The dashboard's Content-Security-Policy: its own scripts, styles and API only; no framing, no inline scripts, no
# plugins, no forms posting elsewhere. Inline style *attributes* are allowed (the rebalance timeline sizes its bars
# with them; they cannot run code), style elements are not.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; style-src-attr 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; "
    "font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}

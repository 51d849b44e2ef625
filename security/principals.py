"""Principals: Kafka's ``KafkaPrincipal`` as "<type>:<name>", and the name of an mTLS client.

An SSL client that presents a certificate is ``User:<subject DN>``, the DN in RFC 2253 form as Java's
``X500Principal.getName()`` writes it (most specific RDN first: ``CN=alice,OU=eng,O=Acme,C=US``), then mapped by
``ssl.principal.mapping.rules`` as Kafka's ``SslPrincipalMapper`` does: a comma-separated list of ``DEFAULT`` (the DN
as it is) and ``RULE:pattern/replacement/[LU]`` (the DN must match ``pattern`` whole; ``$1``... in the replacement are
its groups; ``L``/``U`` lower-/upper-case the result). Rules are tried in order; if none matches the client cannot
authenticate (``NoMatchingRule``), as in Kafka. An SSL client with no certificate is ``User:ANONYMOUS``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

ANONYMOUS = "User:ANONYMOUS"

# Python's ssl attribute names -> the keywords Java's RFC 2253 output uses; others are written as their Python name.
_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def user(name: str) -> str:
    return f"User:{name}"


def _escape(value: str) -> str:
    out = []
    for i, char in enumerate(value):
        if char in ',+"\\<>;' or (char == "#" and i == 0) or (char == " " and i in (0, len(value) - 1)):
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)


def subject_dn(subject: Iterable[Sequence[tuple[str, str]]]) -> str:
    """RFC 2253 DN of a certificate subject as ``ssl.SSLSocket.getpeercert()["subject"]`` gives it (RDNs from the
    least specific, C first, to the most specific; RFC 2253 writes them the other way round)."""
    rdns = []
    for rdn in subject:
        rdns.append("+".join(f"{_KEYWORDS.get(key, key)}={_escape(value)}" for key, value in rdn))
    return ",".join(reversed(rdns))


class NoMatchingRule(ValueError):
    """No ``ssl.principal.mapping.rules`` rule matched the DN: the client does not authenticate."""


@dataclass(frozen=True, slots=True)
class Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "", "L" or "U"

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        match = self.pattern.fullmatch(dn)
        if match is None:
            return None
        result = match.expand(self.replacement)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result


def _until_slash(text: str, start: int) -> tuple[str, int]:
    """The text from ``start`` to the next unescaped "/" (escaped ones kept as "\\/"), and the index after it."""
    i = start
    out = []
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            out.append(text[i : i + 2])
            i += 2
            continue
        if char == "/":
            return "".join(out), i + 1
        out.append(char)
        i += 1
    raise ValueError(f"ssl.principal.mapping.rules: unterminated rule at {text[start:]!r}")


def _java_replacement(replacement: str) -> str:
    """Java's ``$1`` group references and ``\\/`` escapes -> Python's ``\\g<1>`` template."""
    out = []
    i = 0
    while i < len(replacement):
        char = replacement[i]
        if char == "\\" and i + 1 < len(replacement):
            nxt = replacement[i + 1]
            out.append("\\\\" if nxt == "\\" else nxt)
            i += 2
            continue
        if char == "$":
            j = i + 1
            while j < len(replacement) and replacement[j].isdigit():
                j += 1
            if j > i + 1:
                out.append(f"\\g<{replacement[i + 1 : j]}>")
                i = j
                continue
        out.append(char)
        i += 1
    return "".join(out)


def parse_rules(text: str) -> tuple[Rule, ...]:
    """Kafka's ``ssl.principal.mapping.rules`` (default ``DEFAULT``). Raises ``ValueError`` on a malformed list."""
    rules: list[Rule] = []
    i = 0
    while i < len(text):
        if text[i] in " \t\r\n,":
            i += 1
            continue
        if text.startswith("DEFAULT", i):
            rules.append(Rule(None))
            i += len("DEFAULT")
        elif text.startswith("RULE:", i):
            pattern, i = _until_slash(text, i + len("RULE:"))
            replacement, i = _until_slash(text, i)
            case = ""
            if i < len(text) and text[i] in "LU":
                case = text[i]
                i += 1
            try:
                compiled = re.compile(pattern.replace("\\/", "/"))
            except re.error as exc:
                raise ValueError(f"ssl.principal.mapping.rules: bad pattern {pattern!r}: {exc}") from None
            rules.append(Rule(compiled, _java_replacement(replacement), case))
        else:
            raise ValueError(f"ssl.principal.mapping.rules: expected DEFAULT or RULE:... at {text[i:]!r}")
        while i < len(text) and text[i] in " \t":
            i += 1
        if i < len(text) and text[i] not in ",\n":
            raise ValueError(f"ssl.principal.mapping.rules: unexpected {text[i:]!r}")
    return tuple(rules) or (Rule(None),)


def map_dn(dn: str, rules: Sequence[Rule]) -> str:
    """The principal name of a certificate's subject DN under ``rules``."""
    for rule in rules:
        name = rule.apply(dn)
        if name is not None:
            return name
    raise NoMatchingRule(f"no ssl.principal.mapping.rules rule matches {dn!r}")

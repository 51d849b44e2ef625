"""mTLS principals: the RFC 2253 DN of a certificate subject and Kafka's ssl.principal.mapping.rules."""

from __future__ import annotations

import pytest

from security.principals import NoMatchingRule, map_dn, parse_rules, subject_dn

SUBJECT = ((("countryName", "US"),), (("organizationName", "Acme, Inc"),), (("organizationalUnitName", "eng"),),
           (("commonName", "alice"),))  # fmt: skip


def test_subject_dn_is_rfc2253_most_specific_first_with_escapes() -> None:
    assert subject_dn(SUBJECT) == "CN=alice,OU=eng,O=Acme\\, Inc,C=US"
    assert subject_dn([[("commonName", "a"), ("userId", "7")]]) == "CN=a+UID=7"
    assert subject_dn([[("commonName", " #x ")]]) == "CN=\\ #x\\ "


def test_default_rule_keeps_the_dn() -> None:
    assert map_dn("CN=alice,OU=eng", parse_rules("DEFAULT")) == "CN=alice,OU=eng"
    assert map_dn("CN=alice,OU=eng", parse_rules("")) == "CN=alice,OU=eng"


def test_rules_in_order_with_groups_and_case() -> None:
    rules = parse_rules(
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,\n"
        " RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L, DEFAULT"
    )
    assert map_dn("CN=kafka-app,OU=ServiceUsers,O=Acme", rules) == "kafka-app"
    assert map_dn("CN=Bob,OU=Sales,O=Acme,L=Paris,ST=IDF,C=FR", rules) == "bob@sales"
    assert map_dn("CN=carol,O=Other", rules) == "CN=carol,O=Other"
    assert map_dn("CN=Dave,O=x", parse_rules("RULE:^CN=([^,]*).*$/$1/U")) == "DAVE"
    assert map_dn("CN=a/b", parse_rules(r"RULE:^CN=(.*)\/(.*)$/$2\/$1/")) == "b/a"


def test_no_matching_rule_refuses() -> None:
    with pytest.raises(NoMatchingRule):
        map_dn("CN=x", parse_rules("RULE:^CN=admin$/admin/"))


@pytest.mark.parametrize("text", ["RULE:abc", "NOPE", "RULE:(/x/", "DEFAULT junk"])
def test_malformed_rules_are_rejected(text: str) -> None:
    with pytest.raises(ValueError):
        parse_rules(text)

"""The pure SASL server side: SCRAM against RFC 7677's test vector and kafka-python's own SCRAM client, PLAIN
against the SCRAM credentials, and the failures that must answer SASL_AUTHENTICATION_FAILED."""

from __future__ import annotations

import base64

import pytest
from kafka.net.sasl.scram import ScramClient

from security.credentials import SCRAM_SHA_256, SCRAM_SHA_512
from security.sasl import PLAIN, SaslError, SaslExchange, StaticCredentials
from security.scram import ScramError, ScramServer, derive


class OneUser:
    def __init__(self, user: str, password: str, salt: bytes | None = None) -> None:
        self.user = user
        self.creds = {m: derive(m, password, salt) for m in (SCRAM_SHA_256, SCRAM_SHA_512)}

    def scram(self, user: str, mechanism: str):  # type: ignore[no-untyped-def]
        return self.creds[mechanism] if user == self.user else None


def test_rfc7677_test_vector() -> None:
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    server = ScramServer(SCRAM_SHA_256, OneUser("user", "pencil", salt), nonce=lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    first = server.first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final = server.final(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.user == "user"


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512])
def test_kafka_python_scram_client_authenticates(mechanism: str) -> None:
    exchange = SaslExchange(mechanism, OneUser("alice", "s3cret"))
    client = ScramClient("alice", "s3cret", mechanism)
    server_first = exchange.step(client.first_message())
    client.process_server_first_message(server_first)
    server_final = exchange.step(client.final_message())
    client.process_server_final_message(server_final)  # raises if the server signature is wrong
    assert exchange.complete and exchange.user == "alice"


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512])
def test_scram_wrong_password_fails(mechanism: str) -> None:
    exchange = SaslExchange(mechanism, OneUser("alice", "s3cret"))
    client = ScramClient("alice", "wrong", mechanism)
    client.process_server_first_message(exchange.step(client.first_message()))
    with pytest.raises(SaslError, match="invalid credentials"):
        exchange.step(client.final_message())
    assert not exchange.complete and exchange.user is None


def server_first_of(user: str, creds: OneUser) -> tuple[SaslExchange, ScramClient, dict[str, str]]:
    exchange = SaslExchange(SCRAM_SHA_512, creds)
    client = ScramClient(user, "wrong", SCRAM_SHA_512)
    first = exchange.step(client.first_message())
    fields = dict(part.split("=", 1) for part in first.decode().split(","))
    client.process_server_first_message(first)
    return exchange, client, fields


def test_scram_unknown_user_is_not_told_apart_from_a_wrong_password() -> None:
    """An unknown user gets a server-first message (a fake credential: the same salt each time, the default
    iterations) and fails at the final message with the wrong-password error (Kafka fails it at the first message,
    which tells a client which user names exist)."""
    creds = OneUser("alice", "s3cret")
    errors = []
    for user in ("alice", "mallory"):
        exchange, client, fields = server_first_of(user, creds)
        assert set(fields) == {"r", "s", "i"} and len(base64.b64decode(fields["s"])) == 32
        with pytest.raises(SaslError) as failure:
            exchange.step(client.final_message())
        assert not exchange.complete and exchange.user is None
        errors.append(str(failure.value))
    assert errors[0] == errors[1]
    assert server_first_of("mallory", creds)[2]["s"] == server_first_of("mallory", creds)[2]["s"]
    assert server_first_of("mallory", creds)[2]["i"] == "8192"
    assert server_first_of("mallory", creds)[2]["s"] != server_first_of("eve", creds)[2]["s"]


def test_plain_unknown_user_costs_the_pbkdf2_of_a_wrong_password(monkeypatch: pytest.MonkeyPatch) -> None:
    import security.scram_keys as keys

    derivations: list[str] = []
    real = keys.salted_password

    def counting(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
        derivations.append(mechanism)
        return real(mechanism, password, salt, iterations)

    monkeypatch.setattr(keys, "salted_password", counting)
    creds = StaticCredentials()
    creds.add("alice", "s3cret")
    derivations.clear()
    for token in (b"\x00alice\x00wrong", b"\x00mallory\x00wrong"):
        with pytest.raises(SaslError, match="invalid username or password"):
            SaslExchange(PLAIN, creds).step(token)
    assert derivations == [SCRAM_SHA_512, SCRAM_SHA_512]


@pytest.mark.parametrize(
    "message",
    [b"", b"garbage", b"p=tls-unique,,n=a,r=x", b"n,,r=x,n=alice", b"n,a=bob,n=alice,r=x", b"n,,n=al=ZZice,r=x",
     b"\xff\xfe", b"n,,n=alice,r=x,tokenauth=true", b"y,,n=alice,r=x", b"y,a=alice,n=alice,r=x",
     b"p=tls-server-end-point,,n=alice,r=x"],
)  # fmt: skip
def test_scram_bad_first_messages(message: bytes) -> None:
    with pytest.raises(ScramError):
        ScramServer(SCRAM_SHA_256, OneUser("alice", "s3cret")).first(message)


def test_scram_unknown_extensions_are_ignored_as_kafka_ignores_them() -> None:
    server = ScramServer(SCRAM_SHA_256, OneUser("alice", "s3cret"), nonce=lambda: "S")
    assert server.first(b"n,,n=alice,r=C,foo=bar,traceid=x1").startswith(b"r=CS,s=")
    for bad in (b"n,,n=alice,r=C,foo", b"n,,n=alice,r=C,f-o=1", b"n,,n=alice,r=C\x7f", b"n,,n=alice,r=C,tokenauth=1"):
        with pytest.raises(ScramError):
            ScramServer(SCRAM_SHA_256, OneUser("alice", "s3cret")).first(bad)


def test_scram_final_with_wrong_nonce_or_binding_fails() -> None:
    server = ScramServer(SCRAM_SHA_256, OneUser("alice", "s3cret"), nonce=lambda: "S")
    server.first(b"n,,n=alice,r=C")
    with pytest.raises(ScramError, match="nonce"):
        server.final(b"c=biws,r=CX,p=AAAA")
    with pytest.raises(ScramError, match="binding"):
        server.final(b"c=eSws,r=CS,p=AAAA")
    with pytest.raises(ScramError):
        server.final(b"c=biws,r=CS,p=not base64!")


def test_scram_escaped_user_name() -> None:
    server = ScramServer(SCRAM_SHA_256, OneUser("a,b=c", "pw"))
    assert server.first(b"n,,n=a=2Cb=3Dc,r=x").startswith(b"r=x")


def test_plain_verifies_against_scram_credentials() -> None:
    creds = StaticCredentials()
    creds.add("alice", "s3cret")
    ok = SaslExchange(PLAIN, creds)
    assert ok.step(b"\x00alice\x00s3cret") == b""
    assert ok.complete and ok.user == "alice"
    assert SaslExchange(PLAIN, creds).step(b"alice\x00alice\x00s3cret") == b""
    for token in (b"\x00alice\x00wrong", b"\x00bob\x00s3cret", b"bob\x00alice\x00s3cret", b"alice\x00s3cret",
                  b"\x00alice\x00", b"\x00\x00x"):  # fmt: skip
        with pytest.raises(SaslError):
            SaslExchange(PLAIN, creds).step(token)
    creds.remove("alice")
    with pytest.raises(SaslError):
        SaslExchange(PLAIN, creds).step(b"\x00alice\x00s3cret")


def test_exchange_cannot_continue_after_completion() -> None:
    creds = StaticCredentials()
    creds.add("alice", "pw")
    exchange = SaslExchange(PLAIN, creds)
    exchange.step(b"\x00alice\x00pw")
    with pytest.raises(SaslError):
        exchange.step(b"\x00alice\x00pw")


def test_plain_cache_skips_pbkdf2_only_for_the_same_credential() -> None:
    from security.sasl import PlainCache

    creds = StaticCredentials()
    creds.add("alice", "pw")
    cache = PlainCache(size=2)
    assert SaslExchange(PLAIN, creds, cache).step(b"\x00alice\x00pw") == b""
    digest = cache.digest("alice", "pw")
    credential = creds.scram("alice", SCRAM_SHA_512)
    assert credential is not None and cache.matches(digest, credential)
    assert SaslExchange(PLAIN, creds, cache).step(b"\x00alice\x00pw") == b""  # from the cache
    with pytest.raises(SaslError):  # a wrong password is never in the cache
        SaslExchange(PLAIN, creds, cache).step(b"\x00alice\x00nope")
    creds.add("alice", "new")  # a new credential: the remembered login no longer matches
    new_credential = creds.scram("alice", SCRAM_SHA_512)
    assert new_credential is not None and not cache.matches(digest, new_credential)
    with pytest.raises(SaslError):
        SaslExchange(PLAIN, creds, cache).step(b"\x00alice\x00pw")
    creds.remove("alice")
    with pytest.raises(SaslError):
        SaslExchange(PLAIN, creds, cache).step(b"\x00alice\x00new")


def test_plain_pbkdf2_work_on_the_event_loop_is_budgeted(monkeypatch: pytest.MonkeyPatch) -> None:
    """A flood of wrong or unknown PLAIN logins needs no credential and costs a PBKDF2 each on the event loop: past
    the budget (seconds of PBKDF2 per second, with a burst) an uncached login fails at once without deriving; a
    login the cache knows still succeeds; once the debt has drained, logins derive again."""
    import security.sasl as sasl_module
    import security.scram_keys as keys
    from security.sasl import PlainCache

    derivations: list[str] = []
    real = keys.salted_password

    def counting(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
        derivations.append(mechanism)
        return real(mechanism, password, salt, iterations)

    creds = StaticCredentials()
    creds.add("alice", "pw")
    now = [0.0]
    cache = PlainCache(budget=0.25, burst=0.5, clock=lambda: now[0])
    assert SaslExchange(PLAIN, creds, cache).step(b"\x00alice\x00pw") == b""  # remembered
    monkeypatch.setattr(keys, "salted_password", counting)
    ticks = iter(range(1_000_000))
    monkeypatch.setattr(sasl_module, "perf_counter", lambda: next(ticks) * 0.1)  # every PBKDF2 "takes" 100 ms
    for token in [b"\x00alice\x00wrong", b"\x00mallory\x00x"] * 10:
        with pytest.raises(SaslError):
            SaslExchange(PLAIN, creds, cache).step(token)
    assert len(derivations) == 5 and cache.refused == 15  # 5 x 100 ms reach the 500 ms burst
    assert SaslExchange(PLAIN, creds, cache).step(b"\x00alice\x00pw") == b""  # the cache needs no PBKDF2
    with pytest.raises(SaslError, match="too many"):
        SaslExchange(PLAIN, StaticCredentials(), cache).step(b"\x00bob\x00pw")
    now[0] += 0.5  # 125 ms of the debt drained: room for one more
    with pytest.raises(SaslError, match="invalid username or password"):
        SaslExchange(PLAIN, creds, cache).step(b"\x00alice\x00wrong")
    assert len(derivations) == 6

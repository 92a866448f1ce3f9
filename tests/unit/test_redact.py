"""Secrets are masked before anything reaches the audit log."""

from __future__ import annotations

import copy

import pytest
from pydantic import JsonValue

from keel.activities.store import audit
from keel.activities.store.audit import REDACTED, redact

JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiJhbGljZSIsInRlbmFudF9pZCI6ImFjbWUifQ"
    ".dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
)
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "-----END RSA PRIVATE KEY-----"
)


@pytest.mark.parametrize(
    "key",
    [
        "password",
        "Password",
        "db_password",
        "passwd",
        "secret",
        "client_secret",
        "clientSecret",
        "token",
        "access_token",
        "refreshToken",
        "id-token",
        "csrftoken",
        "api_key",
        "apiKey",
        "X-Api-Key",
        "apikey",
        "Authorization",
        "proxy-authorization",
        "access_key",
        "AWS_SECRET_ACCESS_KEY",
        "private_key",
        "privateKey",
        "cookie",
        "Set-Cookie",
    ],
)
def test_secret_keys_are_masked(key: str) -> None:
    assert redact({key: "s3cr3t", "other": "kept"}) == {key: REDACTED, "other": "kept"}


@pytest.mark.parametrize(
    "key", ["max_tokens", "prompt_tokens", "completion_tokens", "tokenizer", "public_key", "key"]
)
def test_ordinary_keys_are_kept(key: str) -> None:
    assert redact({key: 1234}) == {key: 1234}


def test_whole_structures_under_secret_keys_are_masked_but_null_is_kept() -> None:
    value: JsonValue = {"credentials": {"password": "x", "user": "bob"}, "cookie": ["a", "b"]}
    assert redact(value) == {
        "credentials": {"password": REDACTED, "user": "bob"},
        "cookie": REDACTED,
    }
    assert redact({"password": None}) == {"password": None}


def test_nested_lists_and_dicts_are_walked_and_the_input_is_untouched() -> None:
    value: JsonValue = {
        "calls": [{"args": {"api_key": "k", "path": "a.py"}}, [{"token": "t"}]],
        "count": 3,
        "ok": True,
        "ratio": 0.5,
        "none": None,
    }
    before = copy.deepcopy(value)
    assert redact(value) == {
        "calls": [{"args": {"api_key": REDACTED, "path": "a.py"}}, [{"token": REDACTED}]],
        "count": 3,
        "ok": True,
        "ratio": 0.5,
        "none": None,
    }
    assert value == before


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Bearer abc123.def-456_ghi", f"Bearer {REDACTED}"),
        (
            "curl -H 'authorization: bearer xyz789xyz789xyz789==' url",
            f"curl -H 'authorization: bearer {REDACTED}' url",
        ),
        (f"token was {JWT} yesterday", f"token was {REDACTED} yesterday"),
        ("key sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123", f"key {REDACTED}"),
        ("sk-ant-api03-abcdefghijklmnopqrstuvwxyz", REDACTED),
        ("aws AKIAIOSFODNN7EXAMPLE here", f"aws {REDACTED} here"),
        (f"key:\n{PEM}\nrest", f"key:\n{REDACTED}\nrest"),
        ("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADAN", REDACTED),
        ("postgresql://keel:pa55@db:5432/keel", f"postgresql://keel:{REDACTED}@db:5432/keel"),
    ],
)
def test_secret_looking_strings_are_masked(text: str, expected: str) -> None:
    assert redact(text) == expected
    assert redact({"note": text}) == {"note": expected}
    assert redact([text]) == [expected]


@pytest.mark.parametrize(
    "text",
    [
        "the bearer of bad news",
        "Bearer responsibilities",
        "ask-me-anything",
        "sk-short",
        "AKIA-not-a-key",
        "https://example.com/path",
        "user@example.com",
        "eyJust a word",
        "-----BEGIN PUBLIC KEY-----\nMIIBIjAN\n-----END PUBLIC KEY-----",
    ],
)
def test_ordinary_strings_are_kept(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "nothing secret here, just a preview of lines 1-20",
        "Authorization: BEARER abcdefghijklmnop1234",
        "the BeArEr of bad news",
        "curl https://user:hunter2@example.com/x and sk-" + "a" * 24,
        "keys AKIAABCDEFGHIJKLMNOP and ASIAABCDEFGHIJKLMNOP",
        "jwt eyJhbGciOi.eyJzdWIiOiIx.sig and -----BEGIN RSA PRIVATE KEY-----\nabc\n",
        "-----BEGIN PRIVATE KEY----- cut short",
        "://:@ sk- eyJ. AKIA bearer",
    ],
)
def test_the_guarded_search_masks_what_every_pattern_would(text: str) -> None:
    """Strings without a pattern's literal skip its search; the result is the same."""
    expected = text
    for pattern, replacement, _ in audit._SECRET_TEXT:
        expected = pattern.sub(replacement, expected)
    assert audit._redact_text(text) == expected

"""Sealed credentials open only under their key and in the row they were sealed for."""

from __future__ import annotations

import os

import pytest

from keel.activities.credentials.sealing import Sealer, SealError


def test_a_sealed_value_opens_where_it_belongs_and_not_elsewhere() -> None:
    sealer = Sealer({"k1": os.urandom(32)}, "k1")
    sealed = sealer.seal("tok-alice", "user_credentials\x00acme\x00user:alice")
    assert b"tok-alice" not in sealed
    assert sealer.open(sealed, "user_credentials\x00acme\x00user:alice") == "tok-alice"
    with pytest.raises(SealError, match="belongs elsewhere"):
        sealer.open(sealed, "user_credentials\x00acme\x00user:bob")
    tampered = sealed[:-1] + bytes([sealed[-1] ^ 1])
    with pytest.raises(SealError):
        sealer.open(tampered, "user_credentials\x00acme\x00user:alice")


def test_rotation_keeps_old_values_open_and_seals_new_ones_with_the_current_key() -> None:
    k1, k2 = os.urandom(32), os.urandom(32)
    old = Sealer({"k1": k1}, "k1").seal("refresh-1", "row")
    rotated = Sealer({"k1": k1, "k2": k2}, "k2")
    assert rotated.open(old, "row") == "refresh-1"
    new = rotated.seal("refresh-2", "row")
    assert new[1:3] == b"k2"
    with pytest.raises(SealError, match="'k2'"):
        Sealer({"k1": k1}, "k1").open(new, "row")

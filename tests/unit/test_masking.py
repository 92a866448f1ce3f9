"""The masking policy, its treatments, the seal of originals and the checks at start."""

from __future__ import annotations

import base64
import json

import pytest
from pydantic import ValidationError

from keel.activities.masking import Masker, MaskingPolicy, OriginalSeal, SealBroken
from keel.activities.masking.readable_copies import FIRST_TOOL_ORD
from keel.activities.masking.treatments import bracket, hashed, last_n, masked_digits
from keel.worker.config.masking import MaskingSetupError, masker
from keel.worker.config.settings import Settings, settings_from
from keel.worker.payload_codec import new_key
from keel.workflows.run import agent_run

KEY = b"k" * 32


def policy(*rules: dict[str, object]) -> MaskingPolicy:
    return MaskingPolicy.model_validate({"rules": list(rules)})


def test_hash_is_keyed_and_equal_values_match() -> None:
    assert hashed("Ada Lovelace", KEY) == hashed("Ada Lovelace", KEY)
    assert hashed("Ada Lovelace", KEY) != hashed("Ada Lovelace ", KEY)
    assert hashed("Ada Lovelace", KEY) != hashed("Ada Lovelace", b"j" * 32)
    assert hashed("Ada Lovelace", KEY).startswith("hash:")
    assert "Ada" not in hashed("Ada Lovelace", KEY)


def test_last_n_keeps_separators_and_the_last_letters_and_digits() -> None:
    assert last_n("123-45-6789", 4) == "***-**-6789"
    assert last_n("AB12", 4) == "AB12"
    assert last_n("AB12", 0) == "****"
    assert last_n(4111111111111111, 4) == "************1111"


def test_bracket_gives_the_half_open_range_and_hides_what_is_not_a_number() -> None:
    bounds = [0.0, 50000.0, 100000.0]
    assert bracket(72000, bounds) == "50000-100000"
    assert bracket("50,000", bounds) == "50000-100000"
    assert bracket(100000, bounds) == ">=100000"
    assert bracket(-1, bounds) == "<0"
    assert bracket("a lot", bounds) == "[masked]"
    assert bracket(True, bounds) == "[masked]"


def test_mask_keeps_a_phones_country_code_and_hides_the_rest() -> None:
    assert masked_digits("+44 20 7946 0958", 0) == "+44 ** **** ****"
    assert masked_digits("+1-202-555-0143", 2) == "+1-***-***-**43"
    assert masked_digits("020 7946 0958", 0) == "*** **** ****"


def test_fields_match_at_any_depth_paths_only_where_they_point() -> None:
    masks = Masker(
        policy(
            {"field": "SSN", "action": "last"},
            {"path": "$.rows[*].pay", "action": "bracket", "bounds": [0, 10, 20]},
        ),
        KEY,
    )
    text = json.dumps({"rows": [{"ssn": "123456789", "pay": 15}], "pay": 15, "Ssn": None})
    masked = masks.text("any_tool", text)
    assert masked is not None
    assert json.loads(masked) == {
        "rows": [{"ssn": "*****6789", "pay": "10-20"}],
        "pay": 15,
        "Ssn": None,
    }
    assert masks.text("any_tool", json.dumps({"other": 1})) is None  # nothing to mask
    assert masks.text("any_tool", "ssn: 123456789") is None  # not JSON: fields unknown


def test_the_first_rule_that_names_a_field_decides_it() -> None:
    masks = Masker(
        policy({"path": "$.ssn", "action": "hash"}, {"field": "ssn", "action": "last"}), KEY
    )
    masked = json.loads(
        masks.text("t", json.dumps({"ssn": "123456789", "x": {"ssn": "987654321"}})) or ""
    )
    assert masked["ssn"].startswith("hash:")
    assert masked["x"]["ssn"] == "*****4321"


def test_rules_may_be_limited_to_some_tools() -> None:
    masks = Masker(policy({"field": "ssn", "action": "last", "tools": ["hr_*"]}), KEY)
    assert masks.text("hr_lookup", '{"ssn": "123456789"}') is not None
    assert masks.text("read_file", '{"ssn": "123456789"}') is None


def test_what_an_output_quotes_of_masked_arguments_is_masked_too() -> None:
    masks = Masker(policy({"field": "ssn", "action": "last"}), KEY)
    quoted = masks.quoted("t", '{"ssn": "123-45-6789"}', "Error: t on '123-45-6789' is denied.")
    assert quoted == "Error: t on '***-**-6789' is denied."
    assert masks.quoted("t", '{"ssn": "123-45-6789"}', "nothing quoted") is None


@pytest.mark.parametrize(
    ("rule", "says"),
    [
        ({"action": "hash"}, "exactly one of `field` or `path`"),
        ({"field": "a", "path": "$.a", "action": "hash"}, "exactly one of `field` or `path`"),
        ({"field": "a", "action": "scramble"}, "'hash', 'last', 'bracket' or 'mask'"),
        ({"path": "a.b", "action": "hash"}, "must start with `$`"),
        ({"path": "$.a[x]", "action": "hash"}, "is not understood at '[x]'"),
        ({"field": "pay", "action": "bracket"}, "at least two ascending `bounds`"),
        ({"field": "pay", "action": "bracket", "bounds": [10, 5]}, "must ascend"),
        ({"field": "ssn", "action": "last", "bounds": [1, 2]}, "belong to `bracket` rules"),
        ({"field": "ssn", "action": "last", "colour": "red"}, "Extra inputs are not permitted"),
    ],
)
def test_a_bad_policy_is_refused_with_a_sentence(rule: dict[str, object], says: str) -> None:
    with pytest.raises(ValidationError) as caught:
        policy(rule)
    assert says in str(caught.value)


def test_two_rules_for_one_field_are_refused() -> None:
    with pytest.raises(ValidationError, match="two masking rules name the same field 'ssn'"):
        policy({"field": "ssn", "action": "last"}, {"field": "SSN", "action": "hash"})


def test_a_policy_from_the_environment_is_validated_at_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KEEL_MASKING_POLICY", '{"rules": [{"field": "ssn", "action": "last"}]}')
    assert Settings().masking_policy.rules[0].field == "ssn"
    monkeypatch.setenv("KEEL_MASKING_POLICY", '{"rules": [{"field": "ssn", "action": "nope"}]}')
    with pytest.raises(ValidationError, match=r"KEEL_MASKING_POLICY\.rules\.0\.action"):
        Settings()


def test_a_policy_needs_payload_keys_and_a_long_enough_hash_key() -> None:
    rules = policy({"field": "ssn", "action": "last"})
    with pytest.raises(MaskingSetupError, match="KEEL_PAYLOAD_KEYS is not"):
        masker(settings_from(masking_policy=rules))
    keys = {"k1": new_key()}
    with pytest.raises(MaskingSetupError, match="at least 32"):
        masker(settings_from(masking_policy=rules, payload_keys=keys, masking_hash_key="short"))
    assert masker(settings_from(masking_policy=rules, payload_keys=keys)) is not None
    assert masker(settings_from(payload_keys=keys)) is None  # no rules: nothing masks


def test_a_sealed_original_opens_only_under_its_key_and_its_place() -> None:
    raw = base64.b64decode(new_key())
    seal = OriginalSeal({"k1": raw}, "k1")
    key_id, sealed = seal.seal("123-45-6789", "tool_output:r/1/2")
    assert b"123-45-6789" not in sealed
    assert seal.open(key_id, sealed, "tool_output:r/1/2") == "123-45-6789"
    with pytest.raises(SealBroken, match="does not open"):
        seal.open(key_id, sealed, "tool_output:r/1/3")
    with pytest.raises(SealBroken, match="does not open"):
        OriginalSeal({"k1": b"x" * 32}, "k1").open(key_id, sealed, "tool_output:r/1/2")
    with pytest.raises(SealBroken, match="does not have"):
        OriginalSeal({"k2": raw}, "k2").open(key_id, sealed, "tool_output:r/1/2")


def test_the_first_tool_ord_is_the_workflows() -> None:
    assert agent_run.FIRST_TOOL_ORD == FIRST_TOOL_ORD

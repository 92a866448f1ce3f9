"""Field-level masking of tool arguments and outputs in Keel's readable copies."""

from keel.activities.masking.masker import Masker
from keel.activities.masking.policy import MaskingPolicy, MaskingRule
from keel.activities.masking.readable_copies import (
    CallPlace,
    Readable,
    ReadableCopies,
    call_place,
    gate_place,
)
from keel.activities.masking.sealing import OriginalSeal, SealBroken

__all__ = [
    "CallPlace",
    "Masker",
    "MaskingPolicy",
    "MaskingRule",
    "OriginalSeal",
    "Readable",
    "ReadableCopies",
    "SealBroken",
    "call_place",
    "gate_place",
]

"""Normalization and the training-pair filter."""

from __future__ import annotations

import pytest

from arelu_cli.data.clean import CleanRules, clean_train, drop_reason, normalize
from arelu_cli.util.errors import UserError


@pytest.mark.parametrize("raw, clean", [
    ("  a   b\t c  ", "a b c"),
    ("a\u00a0b", "a b"),                    # no-break space is whitespace
    ("Cafe\u0301", "Café"),                 # NFC
    ("a\x00b\x1bc", "a b c"),              # control characters
    ("\u201equoted\u201c", "\u201equoted\u201c"),  # typographic quotes kept
])
def test_normalize(raw, clean):
    assert normalize(raw) == clean


RULES = CleanRules(max_words=5, max_ratio=1.5)


@pytest.mark.parametrize("src, tgt, reason", [
    ("a b", "c d", None),
    ("", "c", "empty"),
    ("a", "", "empty"),
    ("a b c d e f", "a b c d e f", "too long"),
    ("a b", "c d e f", "length ratio"),
    ("a b", "c d e", None),                 # 1.5 exactly is kept
])
def test_drop_reason(src, tgt, reason):
    assert drop_reason(src, tgt, RULES) == reason


def test_clean_train_counts_drops():
    src, tgt, dropped = clean_train(["a  b", "", "a b", "x"], ["c d", "e", "c d e f", "y"], RULES)
    assert (src, tgt) == (["a b", "x"], ["c d", "y"])
    assert dropped == {"empty": 1, "length ratio": 1}


def test_impossible_rules():
    with pytest.raises(UserError, match="max ratio"):
        CleanRules(max_ratio=0.5)

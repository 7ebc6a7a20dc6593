"""The toy corpus generator: deterministic, and shaped like a small translation task."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from arelu_cli.data.toy import (IRREGULAR_RATE, IRREGULAR_TOP, MAX_WORDS, MIN_WORDS, SHIFT,
                                TGT_ADJ, TGT_FN, ToyConfig, build_lexicon, generate, render)
from arelu_cli.util.errors import UserError

SMALL = ToyConfig(vocab=2000, train=3000, dev=200, test=200, seed=7)


@pytest.fixture(scope="module")
def corpus():
    return generate(SMALL)


def test_same_seed_same_corpus(corpus):
    assert generate(SMALL) == corpus


def test_other_seed_other_corpus(corpus):
    other = generate(ToyConfig(vocab=2000, train=3000, dev=200, test=200, seed=8))
    assert other["train"] != corpus["train"]


def test_dev_and_test_do_not_depend_on_train_size(corpus):
    smaller = generate(ToyConfig(vocab=2000, train=10, dev=200, test=200, seed=7))
    assert smaller["dev"] == corpus["dev"] and smaller["test"] == corpus["test"]
    assert smaller["train"] == (corpus["train"][0][:10], corpus["train"][1][:10])


def test_split_sizes_and_sentence_lengths(corpus):
    for split, size in (("train", 3000), ("dev", 200), ("test", 200)):
        src, tgt = corpus[split]
        assert len(src) == len(tgt) == size
        for line in src + tgt:
            assert MIN_WORDS <= len(line.split()) <= MAX_WORDS
            assert line[0].isupper() and line.endswith(".")


def _content_counts(lines: list[str]) -> Counter:
    return Counter(w for line in lines for w in line.lower().rstrip(".").split())


def test_word_frequencies_follow_a_zipf_law(corpus):
    counts = np.array(sorted(_content_counts(corpus["train"][0]).values(), reverse=True), float)
    ranks = np.arange(1, len(counts) + 1)
    head = slice(10, 300)  # past the closed-class words, before the singleton tail
    slope = np.polyfit(np.log(ranks[head]), np.log(counts[head]), 1)[0]
    assert -1.6 < slope < -0.6


def test_vocabulary_grows_with_the_configured_size():
    small = generate(ToyConfig(vocab=500, train=2000, dev=1, test=1))
    large = generate(ToyConfig(vocab=5000, train=2000, dev=1, test=1))
    assert len(_content_counts(large["train"][0])) > 1.5 * len(_content_counts(small["train"][0]))


def test_it_is_a_translation_not_a_copy(corpus):
    src, tgt = corpus["train"]
    src_words = set(_content_counts(src))
    tgt_words = set(_content_counts(tgt))
    assert len(src_words & tgt_words) < 0.05 * len(src_words)
    ratios = [len(t.split()) / len(s.split()) for s, t in zip(src, tgt)]
    assert 1.0 < sum(ratios) / len(ratios) < 1.3  # auxiliaries, articles, two-word translations
    assert any(r > 1.2 for r in ratios) and any(r < 1 for r in ratios)


def _np(noun: int, adjs: list[int], plural: bool = False) -> dict:
    return {"noun": noun, "pl": plural, "def": True, "adjs": adjs, "rel": None}


def test_grammars_differ_in_word_order_and_agreement():
    lex = build_lexicon(SMALL)
    words = lex.words
    clause = {"subj": _np(0, [1, 2]), "verb": next(i for i, e in enumerate(words["verb"])
                                                   if e.tag == 1 and " " not in e.tgt),
              "obj": _np(3, [], plural=True), "past": False, "neg": False, "adv": None, "pp": None}
    src, tgt = render(lex, [clause], [])
    verb = words["verb"][clause["verb"]]
    # source: det adj adj noun verb-s det noun-s (SVO, adjectives first)
    assert src[1:4] == [words["adj"][1].src, words["adj"][2].src, words["noun"][0].src]
    assert src[4] == verb.src + "s" and src[-1] == words["noun"][3].src + "s"
    # target: det noun adj2 adj1 det noun-pl verb-t (verb-final, adjectives after, mirrored)
    gender = words["noun"][0].tag
    assert tgt[1] == words["noun"][0].tgt
    assert tgt[2:4] == [words["adj"][2].tgt + TGT_ADJ[gender], words["adj"][1].tgt + TGT_ADJ[gender]]
    assert tgt[-1] == verb.tgt + "t"
    past = render(lex, [clause | {"past": True, "subj": 0}], [])[1]
    assert past[0] == lex.fn["tgt"][TGT_FN["aux"]] and past[-1] == f"ge{verb.tgt}t"  # 1sg: pro-drop


def test_lexicon_mixes_sound_shifts_irregular_and_two_word_translations():
    nouns = build_lexicon(SMALL).words["noun"]
    regular = sum(e.tgt.split()[-1] == "".join(SHIFT[ch] for ch in e.src) for e in nouns)
    expected = (1 - IRREGULAR_TOP) * (1 - IRREGULAR_RATE)  # less a few sound-shift collisions
    assert len(nouns) == 1000 and expected - 0.05 < regular / len(nouns) <= expected + 0.02
    assert all(e.tgt.split()[-1] != "".join(SHIFT[ch] for ch in e.src)
               for e in nouns[:int(len(nouns) * IRREGULAR_TOP)])  # the most frequent: irregular
    assert 0 < sum(" " in e.tgt for e in nouns) < 0.1 * len(nouns)
    assert len({e.src for e in nouns}) == len({e.tgt for e in nouns}) == len(nouns)


@pytest.mark.parametrize("kwargs", [{"vocab": 10}, {"train": 0}])
def test_bad_config(kwargs):
    with pytest.raises(UserError):
        ToyConfig(**kwargs)


def test_entropy_is_not_degenerate(corpus):
    counts = _content_counts(corpus["train"][1])
    total = sum(counts.values())
    entropy = -sum(c / total * math.log2(c / total) for c in counts.values())
    assert entropy > 7  # bits per word: far from a handful of repeated words

"""The toy corpus: a small translation task between two made-up languages, no download.

Each pair is one sampled *meaning* (clauses with subject, verb, object, adjectives,
prepositional phrase, adverb, tense, negation, relative clauses, conjunctions) rendered by
two grammars, so that translating needs more than copying:

- Source: SVO, adjectives before the noun, plural ``-s``, verb ``-s`` only in the third
  person singular, past tense as a suffix ``-id``.
- Target: verb-final clauses, adjectives after the noun in mirrored order and agreeing in
  gender and number, two noun genders, determiners inflected for gender, number and case
  (subject / object / after a preposition), a six-form person-number verb paradigm, past
  tense as an inflected auxiliary in second position plus a ``ge-...-t`` participle,
  first/second person singular subject pronouns dropped (the verb ending carries them),
  and a few one-to-many words (a source noun or verb that is two target words).

Content words are drawn from Zipf distributions over each word class (``vocab`` concepts
in all, default 400: small enough that a small Transformer translates it well after about a
thousand steps, a few CPU minutes; ``--toy-vocab 6000`` is the harder, slower corpus), and
frequent words are short. Most target words are regular sound
shifts of their source word (like cognates), the most frequent ones are irregular, so a
model must both memorize and generalize below the word level. Every split has its own
random stream (``random.Random`` seeded by ``"{seed}:{split}"``), so the corpus is the same
on every machine and changing the training size leaves dev and test unchanged.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass
from itertools import accumulate

from arelu_cli.util.errors import UserError

GENERATOR = 3
"""Version of the rules and defaults below; part of a prepared toy folder's fingerprint.
3: the default vocabulary went from 6,000 to 400 concepts, so that ``arelu reproduce toy``
regenerates a folder of an earlier version instead of training on it."""
MIN_WORDS, MAX_WORDS = 3, 40
SRC_ONSETS, SRC_VOWELS, SRC_CODAS = "ptkbdgmnlrsvf", "aeiou", "nrlst"
TGT_ONSETS = ("b", "d", "g", "z", "h", "w", "m", "n", "r", "l", "sch", "ch")
TGT_VOWELS = ("a", "e", "i", "o", "u", "ä", "ü")
SHIFT = {"p": "pf", "t": "z", "k": "ch", "b": "b", "d": "t", "g": "k", "m": "m", "n": "n",
         "l": "l", "r": "r", "s": "ss", "v": "w", "f": "f", "a": "a", "e": "ei", "i": "ie",
         "o": "ö", "u": "au"}
TGT_PLURAL = ("en", "e")                                  # by gender
TGT_ADJ = ("er", "e", "en")                               # gender 0 sg, gender 1 sg, plural
TGT_VERB = ("e", "st", "t", "en", "t", "en")              # 1sg 2sg 3sg 1pl 2pl 3pl
PRO_DROP = (0, 1)        # the target drops 1sg/2sg subject pronouns: the verb form says it
# Difficulty: learnable to high BLEU by a small Transformer in a few CPU minutes (a toy with
# 1/10 irregular words, 40% multi-clause sentences and 8% relative clauses stayed under 10
# BLEU after 750 steps of recipes/toy.toml; these settings reach ~35).
IRREGULAR_TOP = 1 / 50   # the most frequent words of each class are irregular in the target
IRREGULAR_RATE = 0.05    # and so is this share of the others (the rest are sound shifts)
CLAUSES = ((1, 80), (2, 17), (3, 3))                      # clauses per sentence: weights
RELATIVE_RATE = 0.04     # noun phrases that carry a relative clause
CLASSES = (("noun", 0.50), ("verb", 0.24), ("adj", 0.18), ("adv", 0.08))
N_PREP = 12
# Closed-class word families and their sizes; a family's words sit together in Lexicon.fn.
SRC_FAMILIES = {"def": 1, "indef": 1, "neg": 1, "rel": 1, "conj": 3, "pron": 6, "prep": N_PREP}
TGT_FAMILIES = {"def": 12,     # case (subject, object, after preposition) x number x gender
                "indef": 6,    # case x gender, singular only
                "neg": 1, "rel": 3, "conj": 3, "pron": 6, "aux": 6, "prep": N_PREP}
SRC_FN = dict(zip(SRC_FAMILIES, accumulate(SRC_FAMILIES.values(), initial=0)))
TGT_FN = dict(zip(TGT_FAMILIES, accumulate(TGT_FAMILIES.values(), initial=0)))


@dataclass(frozen=True)
class ToyConfig:
    """What the toy corpus depends on; the same config always gives the same corpus."""

    vocab: int = 400
    """Content-word concepts (nouns, verbs, adjectives, adverbs) per language. With the
    default 4,000 BPE merges the joint vocabulary has about 3,800 types: enough for the
    output layer's cost to show in the speed comparison."""
    train: int = 50_000
    dev: int = 1000
    test: int = 1000
    seed: int = 0
    zipf: float = 1.0
    """Exponent s of the rank-frequency law p(r) ∝ r^-s within each word class."""

    def __post_init__(self) -> None:
        if self.vocab < 100:
            raise UserError(f"toy vocabulary must be at least 100 words, got {self.vocab}")
        if min(self.train, self.dev, self.test) < 1:
            raise UserError("toy split sizes must be at least 1")


def record(config: ToyConfig) -> dict:
    """What a prepared toy folder was generated from (its meta.json ``toy``): the config and
    the generator's version, so that a changed default or generator is noticed."""
    return {**asdict(config), "generator": GENERATOR}


@dataclass(frozen=True)
class Entry:
    """A content word: its source form, target form (two words for one-to-many), class tag."""

    src: str
    tgt: str
    tag: int
    """Nouns: target gender (0/1); verbs: 1 if transitive; others: 0."""


@dataclass(frozen=True)
class Lexicon:
    """Both languages' words; ``words[cls]`` is ordered by frequency rank."""

    words: dict[str, tuple[Entry, ...]]
    cum: dict[str, list[float]]
    fn: dict[str, tuple[str, ...]]
    """Closed-class words, each a tuple of (source, target) forms or target paradigms."""


def _src_word(rng: random.Random, syllables: int) -> str:
    return "".join(rng.choice(SRC_ONSETS) + rng.choice(SRC_VOWELS)
                   + (rng.choice(SRC_CODAS) if rng.random() < 0.3 else "")
                   for _ in range(syllables))


def _tgt_word(rng: random.Random, syllables: int) -> str:
    return "".join(rng.choice(TGT_ONSETS) + rng.choice(TGT_VOWELS) for _ in range(syllables))


def _fresh(make: Callable[[random.Random, int], str], rng: random.Random, used: set[str],
           syllables: int) -> str:
    """A word not used yet; one syllable longer after every 20 collisions."""
    for attempt in range(10_000):
        word = make(rng, syllables + attempt // 20)
        if word not in used:
            used.add(word)
            return word
    raise AssertionError("no fresh word after 10,000 attempts")


def _content_words(rng: random.Random, n: int, cls: str,
                   used: dict[str, set[str]]) -> tuple[Entry, ...]:
    """``n`` words of one class, most frequent first (shorter, and irregular in the target)."""
    tag_rate = {"noun": 0.5, "verb": 0.7}.get(cls, 0.0)  # gender 1 / transitive
    entries = []
    for rank in range(n):
        syllables = 1 if rank < 40 else 2 if rank < 600 else rng.choice((2, 3))
        src = _fresh(_src_word, rng, used["src"], syllables)
        tgt = "".join(SHIFT[ch] for ch in src)
        if rank < n * IRREGULAR_TOP or rng.random() < IRREGULAR_RATE or tgt in used["tgt"]:
            tgt = _fresh(_tgt_word, rng, used["tgt"], syllables)
        used["tgt"].add(tgt)
        if cls in ("noun", "verb") and rank > 100 and rng.random() < 0.04:
            tgt = _fresh(_tgt_word, rng, used["tgt"], 1) + " " + tgt
        entries.append(Entry(src, tgt, int(rng.random() < tag_rate)))
    return tuple(entries)


def build_lexicon(config: ToyConfig) -> Lexicon:
    """Both vocabularies, the Zipf weights, and the closed-class words, for a config."""
    rng = random.Random(f"{config.seed}:lexicon")
    used: dict[str, set[str]] = {"src": set(), "tgt": set()}
    fn = {  # closed class first, so they get the shortest forms
        "src": tuple(_fresh(_src_word, rng, used["src"], 1)
                     for _ in range(sum(SRC_FAMILIES.values()))),
        "tgt": tuple(_fresh(_tgt_word, rng, used["tgt"], 1)
                     for _ in range(sum(TGT_FAMILIES.values()))),
    }
    words, cum = {}, {}
    for cls, share in CLASSES:
        n = max(10, round(share * config.vocab))
        words[cls] = _content_words(rng, n, cls, used)
        cum[cls] = list(accumulate((r + 1) ** -config.zipf for r in range(n)))
    return Lexicon(words, cum, fn)


def _pick(rng: random.Random, lex: Lexicon, cls: str) -> int:
    cum = lex.cum[cls]
    return bisect.bisect_left(cum, rng.random() * cum[-1])


def _noun_phrase(rng: random.Random, lex: Lexicon, relative: bool) -> dict:
    n_adj = rng.choices((0, 1, 2), weights=(55, 35, 10))[0]
    np = {"noun": _pick(rng, lex, "noun"), "pl": rng.random() < 0.35, "def": rng.random() < 0.5,
          "adjs": [_pick(rng, lex, "adj") for _ in range(n_adj)], "rel": None}
    if relative and rng.random() < RELATIVE_RATE:
        np["rel"] = _clause(rng, lex, nested=True)
    return np


def _clause(rng: random.Random, lex: Lexicon, nested: bool = False) -> dict:
    verb = _pick(rng, lex, "verb")
    transitive = lex.words["verb"][verb].tag == 1
    return {
        "subj": None if nested else (rng.randrange(6) if rng.random() < 0.3
                                     else _noun_phrase(rng, lex, relative=True)),
        "verb": verb, "past": rng.random() < 0.4, "neg": rng.random() < 0.1,
        "obj": _noun_phrase(rng, lex, relative=not nested) if transitive else None,
        "adv": _pick(rng, lex, "adv") if rng.random() < 0.25 else None,
        "pp": (rng.randrange(N_PREP), _noun_phrase(rng, lex, relative=False))
        if not nested and rng.random() < 0.3 else None,
    }


def _person(subj, head_pl: bool) -> int:
    """Person-number index 0..5 (1sg 2sg 3sg 1pl 2pl 3pl) of a clause's subject."""
    if isinstance(subj, int):
        return subj
    return 5 if (subj["pl"] if subj else head_pl) else 2


def _src_np(lex: Lexicon, np: dict) -> list[str]:
    fn = lex.fn["src"]
    noun = lex.words["noun"][np["noun"]].src
    det = [fn[SRC_FN["def"]]] if np["def"] else [] if np["pl"] else [fn[SRC_FN["indef"]]]
    out = det + [lex.words["adj"][a].src for a in np["adjs"]] + [noun + ("s" if np["pl"] else "")]
    if np["rel"]:
        out += [fn[SRC_FN["rel"]]] + _src_clause(lex, np["rel"], np["pl"])
    return out


def _src_clause(lex: Lexicon, c: dict, head_pl: bool = False) -> list[str]:
    fn = lex.fn["src"]
    stem = lex.words["verb"][c["verb"]].src
    verb = stem + ("id" if c["past"] else "s" if _person(c["subj"], head_pl) == 2 else "")
    subj = ([] if c["subj"] is None else [fn[SRC_FN["pron"] + c["subj"]]]
            if isinstance(c["subj"], int) else _src_np(lex, c["subj"]))
    out = subj + ([fn[SRC_FN["neg"]]] if c["neg"] else []) + [verb]
    if c["obj"]:
        out += _src_np(lex, c["obj"])
    if c["pp"]:
        out += [fn[SRC_FN["prep"] + c["pp"][0]]] + _src_np(lex, c["pp"][1])
    if c["adv"] is not None:
        out.append(lex.words["adv"][c["adv"]].src)
    return out


def _tgt_np(lex: Lexicon, np: dict, case: int) -> list[str]:
    fn = lex.fn["tgt"]
    entry = lex.words["noun"][np["noun"]]
    gender, num = entry.tag, int(np["pl"])
    if np["def"]:
        det = [fn[TGT_FN["def"] + case * 4 + num * 2 + gender]]
    else:
        det = [] if np["pl"] else [fn[TGT_FN["indef"] + case * 2 + gender]]
    noun = entry.tgt + (TGT_PLURAL[gender] if np["pl"] else "")
    agr = TGT_ADJ[2 if np["pl"] else gender]
    out = det + [noun] + [lex.words["adj"][a].tgt + agr for a in reversed(np["adjs"])]
    if np["rel"]:
        relative = fn[TGT_FN["rel"] + (2 if np["pl"] else gender)]
        out += [relative] + _tgt_clause(lex, np["rel"], np["pl"])
    return out


def _tgt_clause(lex: Lexicon, c: dict, head_pl: bool = False) -> list[str]:
    fn = lex.fn["tgt"]
    person = _person(c["subj"], head_pl)
    *particle, stem = lex.words["verb"][c["verb"]].tgt.split(" ")
    subj = ([] if c["subj"] is None or c["subj"] in PRO_DROP else [fn[TGT_FN["pron"] + c["subj"]]]
            if isinstance(c["subj"], int) else _tgt_np(lex, c["subj"], 0))
    out = subj + ([fn[TGT_FN["aux"] + person]] if c["past"] else [])
    if c["adv"] is not None:
        out.append(lex.words["adv"][c["adv"]].tgt)
    if c["pp"]:
        out += [fn[TGT_FN["prep"] + c["pp"][0]]] + _tgt_np(lex, c["pp"][1], 2)
    if c["obj"]:
        out += _tgt_np(lex, c["obj"], 1)
    out += ([fn[TGT_FN["neg"]]] if c["neg"] else []) + particle
    out.append("ge" + stem + "t" if c["past"] else stem + TGT_VERB[person])
    return out


def _sentence(words: list[str]) -> str:
    text = " ".join(words) + "."
    return text[0].upper() + text[1:]


def sample_meaning(rng: random.Random, lex: Lexicon) -> tuple[list[dict], list[int]]:
    """One to three clauses, and the conjunctions (0..2) that join them."""
    counts, weights = zip(*CLAUSES)
    clauses = [_clause(rng, lex) for _ in range(rng.choices(counts, weights=weights)[0])]
    return clauses, [rng.randrange(3) for _ in clauses[1:]]


def render(lex: Lexicon, clauses: list[dict], conj: list[int]) -> tuple[list[str], list[str]]:
    """The source and target words of a meaning (before capitalization and the full stop)."""
    src, tgt = _src_clause(lex, clauses[0]), _tgt_clause(lex, clauses[0])
    for c, k in zip(clauses[1:], conj):
        src += [lex.fn["src"][SRC_FN["conj"] + k]] + _src_clause(lex, c)
        tgt += [lex.fn["tgt"][TGT_FN["conj"] + k]] + _tgt_clause(lex, c)
    return src, tgt


def sample_pair(rng: random.Random, lex: Lexicon) -> tuple[str, str]:
    """One (source, target) sentence pair of 3 to 40 words on each side."""
    while True:
        src, tgt = render(lex, *sample_meaning(rng, lex))
        n_src, n_tgt = len(src), sum(w.count(" ") + 1 for w in tgt)
        if MIN_WORDS <= min(n_src, n_tgt) and max(n_src, n_tgt) <= MAX_WORDS:
            return _sentence(src), _sentence(tgt)


def generate(config: ToyConfig) -> dict[str, tuple[list[str], list[str]]]:
    """The train/dev/test splits as (source lines, target lines)."""
    lex = build_lexicon(config)
    splits = {}
    for split, size in (("train", config.train), ("dev", config.dev), ("test", config.test)):
        rng = random.Random(f"{config.seed}:{split}")
        pairs = [sample_pair(rng, lex) for _ in range(size)]
        splits[split] = ([s for s, _ in pairs], [t for _, t in pairs])
    return splits

"""A toy English→Chinese corpus, grown from the notes' example "Tom chase Jerry" → "汤姆 追逐 杰瑞".

Every sentence is made of clauses. A clause is subject–verb–object, optionally followed by an
adverb of manner, a place and a time. English keeps them after the object; Chinese moves them all
in front of the verb, in the opposite order:

    English:  S V O [manner] [place] [time]     Tom chase Jerry in the kitchen yesterday
    Chinese:  S [time] [在 place] [manner] V O   汤姆 昨天 在 厨房 追逐 杰瑞

That reordering is what makes a learned alignment worth looking at. Clauses are joined by
"and" → "而且", so that sentences range from 3 to 30-odd source tokens; their length is what shows
the bottleneck of a single context vector C.

Tokens are separated by spaces on both sides; a Chinese token is a word (汤姆, 追逐, 杰瑞). Nothing
is downloaded and no global random state is touched: the same seed always gives the same corpus.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence

import torch

# ---------------------------------------------------------------------------------------------
# The lexicon: an English phrase and the one Chinese word that translates it.

NOUNS = {  # subjects and objects
    "Tom": "汤姆",
    "Jerry": "杰瑞",
    "Spike": "斯派克",
    "Tyke": "泰克",
    "the cat": "猫",
    "the dog": "狗",
    "the mouse": "老鼠",
    "the bird": "小鸟",
}
VERBS = {
    "chase": "追逐",
    "see": "看见",
    "help": "帮助",
    "find": "找到",
    "catch": "抓住",
    "follow": "跟随",
    "watch": "看着",
}
MANNERS = {
    "quickly": "飞快地",
    "quietly": "悄悄地",
    "happily": "开心地",
    "slowly": "慢慢地",
}
# A place is a preposition, which becomes 在, and a noun phrase, which becomes one word.
PLACES = {
    "in the kitchen": "厨房",
    "in the garden": "花园",
    "in the park": "公园",
    "at school": "学校",
    "at home": "家里",
}
PLACE_MARKER = "在"
TIMES = {
    "yesterday": "昨天",
    "today": "今天",
    "tomorrow": "明天",
    "every day": "每天",
    "last night": "昨晚",
}
CLAUSE_JOINER = ("and", "而且")

# How often a generated clause carries each optional phrase.
MANNER_PROBABILITY = 0.3
PLACE_PROBABILITY = 0.5
TIME_PROBABILITY = 0.5

NOTES_EXAMPLE = ("Tom chase Jerry", "汤姆 追逐 杰瑞")


# ---------------------------------------------------------------------------------------------
# Sentences: what a clause says, and the pair of token sequences it renders to.


@dataclass(frozen=True)
class Clause:
    """What one clause says, as English keys of the lexicon (e.g. ``Clause("Tom", "chase", "Jerry")``)."""

    subject: str
    verb: str
    object: str
    manner: str | None = None
    place: str | None = None
    time: str | None = None


@dataclass(frozen=True)
class SentencePair:
    """An English sentence, its Chinese translation and the word alignment between them.

    ``alignment[i]`` holds the positions in ``source`` of the English tokens that target token ``i``
    translates, e.g. 猫 ← (the, cat), 在 ← (in,), 厨房 ← (the, kitchen). Every source token is
    translated by exactly one target token.
    """

    source: tuple[str, ...]
    target: tuple[str, ...]
    alignment: tuple[tuple[int, ...], ...]

    @property
    def source_text(self) -> str:
        return " ".join(self.source)

    @property
    def target_text(self) -> str:
        return " ".join(self.target)

    @property
    def reordered(self) -> bool:
        """True when the translation does not follow the English word order (a time, place or manner moved)."""
        first_positions = [positions[0] for positions in self.alignment]
        return first_positions != sorted(first_positions)

    def alignment_matrix(self) -> torch.Tensor:
        """The true alignment as attention weights, shape (T, S) for T target and S source tokens.

        Row ``i`` spreads weight 1 evenly over the source tokens that target token ``i`` translates,
        so it can be drawn, and compared, beside a learned attention matrix.
        """
        matrix = torch.zeros(len(self.target), len(self.source))
        for target_position, source_positions in enumerate(self.alignment):
            matrix[target_position, list(source_positions)] = 1.0 / len(source_positions)
        return matrix

    def __str__(self) -> str:
        return f"{self.source_text} → {self.target_text}"


def _lookup(table: dict[str, str], key: str, role: str) -> str:
    if key not in table:
        raise ValueError(f"unknown {role} {key!r}; the lexicon has {sorted(table)}")
    return table[key]


def render_pair(clauses: Sequence[Clause]) -> SentencePair:
    """Render clauses into an English sentence, its Chinese translation and their word alignment.

    >>> print(render_pair([Clause("Tom", "chase", "Jerry", place="in the kitchen", time="yesterday")]))
    Tom chase Jerry in the kitchen yesterday → 汤姆 昨天 在 厨房 追逐 杰瑞
    """
    if not clauses:
        raise ValueError("a sentence needs at least one clause")
    source: list[str] = []
    target: list[str] = []
    alignment: list[tuple[int, ...]] = []

    def add_source(phrase: str) -> tuple[int, ...]:
        """Append an English phrase's tokens; return their positions."""
        words = phrase.split()
        positions = tuple(range(len(source), len(source) + len(words)))
        source.extend(words)
        return positions

    def add_target(word: str, positions: tuple[int, ...]) -> None:
        target.append(word)
        alignment.append(positions)

    for index, clause in enumerate(clauses):
        subject_word = _lookup(NOUNS, clause.subject, "subject")
        verb_word = _lookup(VERBS, clause.verb, "verb")
        object_word = _lookup(NOUNS, clause.object, "object")
        if index > 0:
            add_target(CLAUSE_JOINER[1], add_source(CLAUSE_JOINER[0]))
        # English order, S V O [manner] [place] [time]; remember where each phrase landed.
        subject = add_source(clause.subject)
        verb = add_source(clause.verb)
        object_ = add_source(clause.object)
        if clause.manner:
            manner_word = _lookup(MANNERS, clause.manner, "manner")
            manner = add_source(clause.manner)
        if clause.place:
            place_word = _lookup(PLACES, clause.place, "place")
            preposition, place_noun = clause.place.split(" ", 1)
            preposition_position, place_positions = add_source(preposition), add_source(place_noun)
        if clause.time:
            time_word = _lookup(TIMES, clause.time, "time")
            time = add_source(clause.time)
        # Chinese order, S [time] [在 place] [manner] V O.
        add_target(subject_word, subject)
        if clause.time:
            add_target(time_word, time)
        if clause.place:
            add_target(PLACE_MARKER, preposition_position)
            add_target(place_word, place_positions)
        if clause.manner:
            add_target(manner_word, manner)
        add_target(verb_word, verb)
        add_target(object_word, object_)
    return SentencePair(tuple(source), tuple(target), tuple(alignment))


def random_clause(rng: random.Random) -> Clause:
    """A clause drawn with ``rng``: a subject and a different object, a verb, and each optional phrase by chance."""
    subject, object_ = rng.sample(list(NOUNS), 2)
    verb = rng.choice(list(VERBS))
    manner = rng.choice(list(MANNERS)) if rng.random() < MANNER_PROBABILITY else None
    place = rng.choice(list(PLACES)) if rng.random() < PLACE_PROBABILITY else None
    time = rng.choice(list(TIMES)) if rng.random() < TIME_PROBABILITY else None
    return Clause(subject, verb, object_, manner, place, time)


# Distinct clauses the generator can draw: ordered (subject, object) pairs × verbs × optional phrases.
DISTINCT_CLAUSES = (
    len(NOUNS) * (len(NOUNS) - 1) * len(VERBS) * (len(MANNERS) + 1) * (len(PLACES) + 1) * (len(TIMES) + 1)
)


def generate_pairs(
    num_pairs: int, *, seed: int = 0, min_clauses: int = 1, max_clauses: int = 3
) -> list[SentencePair]:
    """``num_pairs`` distinct sentence pairs, each of ``min_clauses`` to ``max_clauses`` clauses (uniformly).

    One clause is 3 to 11 English tokens, and every further clause adds "and" plus 3 to 11 more, so
    ``max_clauses`` bounds the source length at ``12 * max_clauses - 1`` tokens.
    """
    if num_pairs < 1:
        raise ValueError(f"num_pairs must be positive, got {num_pairs}")
    if not 1 <= min_clauses <= max_clauses:
        raise ValueError(
            f"need 1 <= min_clauses <= max_clauses, got min_clauses={min_clauses}, max_clauses={max_clauses}"
        )
    capacity = sum(DISTINCT_CLAUSES**count for count in range(min_clauses, max_clauses + 1))
    if num_pairs > capacity:
        raise ValueError(
            f"the grammar has only {capacity} distinct sentences of {min_clauses} to {max_clauses} clauses, "
            f"asked for {num_pairs}"
        )
    rng = random.Random(seed)
    pairs: dict[tuple[str, ...], SentencePair] = {}  # keyed by source; insertion order is generation order
    while len(pairs) < num_pairs:
        clause_count = rng.randint(min_clauses, max_clauses)
        pair = render_pair([random_clause(rng) for _ in range(clause_count)])
        pairs.setdefault(pair.source, pair)
    return list(pairs.values())


# ---------------------------------------------------------------------------------------------
# Vocabularies: tokens ↔ ids.


class Vocab:
    """Maps tokens to ids and back. Ids 0–3 are always ``<pad>``, ``<bos>``, ``<eos>``, ``<unk>``;
    the other tokens follow in sorted order, so equal token sets give equal vocabularies."""

    PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
    SPECIAL_TOKENS = (PAD, BOS, EOS, UNK)
    pad_id, bos_id, eos_id, unk_id = 0, 1, 2, 3

    def __init__(self, tokens: Iterable[str]):
        if isinstance(tokens, str):
            raise TypeError("Vocab takes an iterable of tokens, not one string; use Vocab.from_sentences for sentences")
        words = set(tokens) - set(self.SPECIAL_TOKENS)
        for word in words:
            if not word or word != word.strip() or len(word.split()) != 1:
                raise ValueError(f"a token must be non-empty and contain no whitespace, got {word!r}")
        self.tokens: list[str] = list(self.SPECIAL_TOKENS) + sorted(words)
        self.token_ids: dict[str, int] = {token: index for index, token in enumerate(self.tokens)}

    @classmethod
    def from_sentences(cls, sentences: Iterable[str | Sequence[str]]) -> Vocab:
        """A vocabulary of every token in ``sentences`` (strings split on spaces, or token sequences)."""
        return cls(token for sentence in sentences for token in _tokens(sentence))

    def __len__(self) -> int:
        return len(self.tokens)

    def __contains__(self, token: str) -> bool:
        return token in self.token_ids

    def __repr__(self) -> str:
        return f"Vocab({len(self)} tokens: {' '.join(self.tokens[:8])}{' …' if len(self) > 8 else ''})"

    def encode(self, sentence: str | Sequence[str], *, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        """Token ids of ``sentence`` (a string split on spaces, or a token sequence); unknown words become ``<unk>``."""
        tokens = _tokens(sentence)
        if not tokens:
            raise ValueError(f"cannot encode an empty sentence (got {sentence!r}); a sentence needs at least one token")
        ids = [self.token_ids.get(token, self.unk_id) for token in tokens]
        return [self.bos_id] * add_bos + ids + [self.eos_id] * add_eos

    def decode(self, ids: Iterable[int] | torch.Tensor, *, keep_special: bool = False) -> str:
        """The tokens of ``ids`` (a sequence or a 1-D tensor), joined by spaces.

        By default reading stops at the first ``<eos>`` and ``<pad>``/``<bos>`` are dropped, which
        turns a decoder's padded output row into its sentence; ``keep_special=True`` keeps every token.
        """
        if isinstance(ids, torch.Tensor):
            if ids.ndim != 1:
                raise ValueError(f"decode takes one sentence, a 1-D tensor; got shape {tuple(ids.shape)}")
            ids = ids.tolist()
        words = []
        for token_id in ids:
            token_id = int(token_id)
            if not 0 <= token_id < len(self):
                raise ValueError(f"id {token_id} is outside this vocabulary of {len(self)} tokens")
            if not keep_special:
                if token_id == self.eos_id:
                    break
                if token_id in (self.pad_id, self.bos_id):
                    continue
            words.append(self.tokens[token_id])
        return " ".join(words)


def _tokens(sentence: str | Sequence[str]) -> list[str]:
    return sentence.split() if isinstance(sentence, str) else list(sentence)


# ---------------------------------------------------------------------------------------------
# The corpus: pairs, a train / held-out split, vocabularies and padded batches.


@dataclass(frozen=True)
class Batch:
    """B sentence pairs as padded id tensors (``torch.long``), ready for an encoder–decoder.

    - ``source`` (B, S): English ids padded with ``<pad>``; S is the longest source in the batch.
      No ``<bos>``/``<eos>``: ``source_lengths`` says where each sentence ends.
    - ``source_lengths`` (B,): tokens per source sentence.
    - ``target_input`` (B, T): ``<bos>`` followed by the Chinese ids, what the decoder reads (teacher forcing).
    - ``target_output`` (B, T): the Chinese ids followed by ``<eos>``, what the decoder should predict.
    - ``target_lengths`` (B,): Chinese tokens + 1, the valid length of both target rows.
    - ``pairs``: the B ``SentencePair`` objects, for their text and true alignments.
    """

    source: torch.Tensor
    source_lengths: torch.Tensor
    target_input: torch.Tensor
    target_output: torch.Tensor
    target_lengths: torch.Tensor
    pairs: tuple[SentencePair, ...]

    def to(self, device: torch.device | str) -> Batch:
        """The same batch with its tensors on ``device``."""
        return Batch(
            self.source.to(device), self.source_lengths.to(device), self.target_input.to(device),
            self.target_output.to(device), self.target_lengths.to(device), self.pairs,
        )


class ToyTranslationCorpus:
    """``num_pairs`` distinct generated pairs, split into train and held-out, with vocabularies built on train.

    The split is deterministic and no sentence is in both. Words that appear only in held-out
    sentences (possible in a very small corpus) encode as ``<unk>``.

    >>> corpus = ToyTranslationCorpus(num_pairs=1000, seed=0)
    >>> batch = next(corpus.batches("train", batch_size=32))   # batch.source: (32, S)
    """

    SPLITS = ("train", "held_out")

    def __init__(
        self,
        num_pairs: int = 2000,
        *,
        seed: int = 0,
        min_clauses: int = 1,
        max_clauses: int = 3,
        held_out_fraction: float = 0.2,
    ):
        if num_pairs < 2:
            raise ValueError(f"num_pairs must be at least 2 (one to train on, one to hold out), got {num_pairs}")
        if not 0 < held_out_fraction < 1:
            raise ValueError(f"held_out_fraction must be strictly between 0 and 1, got {held_out_fraction}")
        self.seed = seed
        self.min_clauses = min_clauses
        self.max_clauses = max_clauses
        pairs = generate_pairs(num_pairs, seed=seed, min_clauses=min_clauses, max_clauses=max_clauses)
        # The pairs come out in random order already, so the last ones are a random held-out set.
        held_out_count = min(num_pairs - 1, max(1, round(num_pairs * held_out_fraction)))
        self.train_pairs: list[SentencePair] = pairs[: num_pairs - held_out_count]
        self.held_out_pairs: list[SentencePair] = pairs[num_pairs - held_out_count :]
        self.source_vocab = Vocab.from_sentences(pair.source for pair in self.train_pairs)
        self.target_vocab = Vocab.from_sentences(pair.target for pair in self.train_pairs)

    def __repr__(self) -> str:
        return (
            f"ToyTranslationCorpus({len(self.train_pairs)} train + {len(self.held_out_pairs)} held-out pairs, "
            f"{self.min_clauses}–{self.max_clauses} clauses, seed={self.seed}; "
            f"vocabularies: {len(self.source_vocab)} English, {len(self.target_vocab)} Chinese)"
        )

    def split(self, name: str) -> list[SentencePair]:
        """The pairs of split ``name``, ``"train"`` or ``"held_out"``."""
        if name == "train":
            return self.train_pairs
        if name == "held_out":
            return self.held_out_pairs
        raise ValueError(f"unknown split {name!r}; the splits are {self.SPLITS}")

    def collate(self, pairs: Sequence[SentencePair]) -> Batch:
        """Encode and pad any ``pairs`` into a ``Batch``, e.g. ``[render_pair([Clause("Tom", "chase", "Jerry")])]``.

        Returns tensors of shape (B, S) and (B, T) for B pairs; see ``Batch``.
        """
        if not pairs:
            raise ValueError("cannot make a batch of zero pairs")
        sources = [self.source_vocab.encode(pair.source) for pair in pairs]
        targets = [self.target_vocab.encode(pair.target) for pair in pairs]
        source_lengths = torch.tensor([len(ids) for ids in sources])  # (B,)
        target_lengths = torch.tensor([len(ids) + 1 for ids in targets])  # (B,), +1 for <bos> or <eos>
        source = torch.full((len(pairs), int(source_lengths.max())), Vocab.pad_id)  # (B, S)
        target_input = torch.full((len(pairs), int(target_lengths.max())), Vocab.pad_id)  # (B, T)
        target_output = target_input.clone()  # (B, T)
        for row, (source_ids, target_ids) in enumerate(zip(sources, targets)):
            source[row, : len(source_ids)] = torch.tensor(source_ids)
            target_input[row, : len(target_ids) + 1] = torch.tensor([Vocab.bos_id] + target_ids)
            target_output[row, : len(target_ids) + 1] = torch.tensor(target_ids + [Vocab.eos_id])
        return Batch(source, source_lengths, target_input, target_output, target_lengths, tuple(pairs))

    def batches(
        self, split: str = "train", batch_size: int = 64, *, shuffle_seed: int | None = None, drop_last: bool = False
    ) -> Iterator[Batch]:
        """Padded batches of ``batch_size`` pairs from ``split``, in corpus order or shuffled by ``shuffle_seed``.

        Pass a different ``shuffle_seed`` each epoch (e.g. the epoch number) for a new, repeatable order.
        The last batch is smaller unless ``drop_last``.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        pairs = list(self.split(split))
        if shuffle_seed is not None:
            random.Random(shuffle_seed).shuffle(pairs)
        for start in range(0, len(pairs), batch_size):
            chunk = pairs[start : start + batch_size]
            if drop_last and len(chunk) < batch_size:
                break
            yield self.collate(chunk)

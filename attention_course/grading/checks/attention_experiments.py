"""Checks of the assignment ``attention-experiments`` (chapters 5–7): an experiment, graded on evidence.

The notebook gives chapter 5's encoder–decoder without attention and chapter 6's with attention, and a
greedy ``translate``; the student trains one model of each, writes two measurements the book only talks
about, and reports what they measure in a ``results`` dict. Four test cells (all phase ``open``: nothing
here is about softmax), and two written answers graded by hand in formgrader (against the rubric in the
solution notebook's answer cells, which the release replaces by "YOUR ANSWER HERE"):

- ``exact_match(model, pairs) -> float`` (new work): the share of (English, Chinese) pairs whose greedy
  translation by ``model`` is exactly the reference. Called with a stand-in model of the grader's
  (``standin.Translator``, random weights drawn from the course seed) on pairs whose references the grader
  made to match its greedy decoding for a known share of them, and to miss it narrowly for the others
  (a word short, a word too many, two words swapped);
- ``attention_agreement(model, pairs, alignments) -> float`` (new work): teacher-forced with the reference
  translations, the share of Chinese words whose attention weights are largest on an English word that the
  word really translates. Called with the stand-in model (whose reported weights are a sharp random
  attention) on sentences of the toy grammar of varied lengths, with their true alignments and with
  alignments the grader draws;
- the trained models (the warm-up): the grader rebuilds ``attention_model`` and ``plain_model`` from the
  notebook's given classes with their weights (strictly: same layers, same shapes), decodes
  :data:`NEW_SENTENCES` sentences of the training lengths that it draws from the grammar with the course
  seed, and needs at least :data:`ATTENTION_THRESHOLD` and :data:`PLAIN_THRESHOLD` exact-match accuracy;
- the evidence (new work): the grader measures the same two models itself, inside the sandbox, on the
  shipped ``test`` and ``long`` sentences (greedy decoding, and teacher forcing for the alignment). A number
  of ``results`` passes if it is within :data:`TOLERANCE` of the grader's measurement, **or** if it is within
  :data:`TOLERANCE` of what the student's own function (``exact_match`` or ``attention_agreement``) gives
  when the grader calls it, in the same graded call, on the same rebuilt model and the shipped sentences
  (``runner._measure_own``), and that is within :data:`WIDE` of the grader's measurement. The function is
  called part by part, on parts of :data:`PART` shipped pairs that the grader draws from the course seed (never
  on the shipped sets as such), its number is those parts' pooled, and its parts must be, on average, within
  :data:`WIDE` of the grader's measurement of the same parts: a function that gives back a number it did not
  measure (a guess within WIDE, for the shipped sets or for any part of them) is not taken for a buggy one. So a bug in a
  measurement function that its visible tests miss is charged once, by that function's own check: numbers
  honestly computed with it still earn the evidence. ``own`` is computed by the grader, not typed: a
  constant function cannot be within :data:`WIDE` of all four shares (about 0.99, 0.0, 0.4 and 0.0 for models
  trained as the notebook says), a function that returns numbers typed in for the shipped sentences is
  never called on them, one that returns them for any part of them does not follow the parts' shares, and a number
  that is neither the grader's nor the function's fails. Numbers typed or printed from anywhere else, or measured on
  other models than the two the notebook holds, earn nothing. The verdict names, for each failing number,
  the reported number, the grader's measurement and the function's, and which rule it failed. Numbers that are
  neither the grader's measurement nor the function's (typed in, or measured on other models or in another
  run) also flag the submission, with why, so that formgrader points the instructor to it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from attention_course.corpus import generate_pairs
from attention_course.grading import standin
from attention_course.grading.cases import Case, Check, NotebookName, StandInTranslator
from attention_course.grading.checks._draw import integer
from attention_course.grading.exercise_data import SEQ2SEQ_MAX_CLAUSES, experiments_sets, seq2seq_corpus
from attention_course.grading.verdicts import Reason

ASSIGNMENT = "attention-experiments"
ATTENTION_THRESHOLD = 0.9  # a model trained as the notebook says gets about 0.98
PLAIN_THRESHOLD = 0.2  # ... and the model without attention about 0.4 after its 300 steps
TOLERANCE = 0.02  # |reported - measured| for each number of results
# How far from the grader's measurement a number may be when it is what the student's own (buggy) measurement
# function gives on the model (see the module's docstring). On the models that the notebook trains, the bugs
# of exact_match that its visible tests miss measure plain_in_range 0.08 (word order ignored) and 0.087 (words
# compared as sets) too high, and change none of the other numbers; those of attention_agreement that the visible
# tests miss (the last aligned position only, the span of the aligned positions) change nothing here.
# A function that ignores its model cannot be within 0.1 of both attention_in_range (about 0.99) and
# plain_longer (0.0); a wider bound would also accept guesses (plain_in_range, the alignment) that it should not.
WIDE = 0.1
# The grader calls the student's measurement function on parts of PART shipped pairs (drawn from the course
# seed), never on the shipped sets as such, and compares each part with its own measurement of the same part:
# a function's numbers are accepted (rule 2) only if, weighted by the pairs (or, for the alignment, the Chinese
# words) of each part, they are on average within WIDE of the grader's. A bug that only ever counts too many
# translations right, or too few, is off by the same on average as on the whole set (the honest bugs above pass
# as before); a function that gives a number it does not measure, the same for every part, is off by the spread
# of the parts' shares, about 0.2 for a share near 0.4 on parts of 5 pairs.
PART = 5
NEW_SENTENCES = 150
RESULT_NAMES = ("attention_in_range", "attention_longer", "plain_in_range", "plain_longer", "attention_alignment")
MODELS = ("attention_model", "plain_model")
EMBED_DIM, HIDDEN_DIM = 32, 64


def _recipes(corpus) -> tuple:
    """How section 1 builds each model: ((encoder class, args), (decoder class, args), model class)."""
    source_size, target_size = len(corpus.source_vocab.tokens), len(corpus.target_vocab.tokens)
    encoder = ("Encoder", (source_size, EMBED_DIM, HIDDEN_DIM))
    return (("attention_model", (encoder, ("AttentionDecoder", (target_size, EMBED_DIM, HIDDEN_DIM, HIDDEN_DIM,
                                                                HIDDEN_DIM)), "Seq2Seq")),
            ("plain_model", (encoder, ("PlainDecoder", (target_size, EMBED_DIM, HIDDEN_DIM, HIDDEN_DIM)), "Seq2Seq")))


def _evidence_spec(sets: tuple, forced, own: tuple = ()) -> tuple:
    corpus = seq2seq_corpus()
    return ("evidence", tuple(corpus.source_vocab.tokens), tuple(corpus.target_vocab.tokens), _recipes(corpus),
            sets, (tuple(pair.source_text for pair in forced), tuple(pair.target_text for pair in forced)),
            *((own,) if own else ()))


# What each number of results is: (the model, the measurement function, the shipped set).
MEASUREMENTS = {
    "attention_in_range": ("attention_model", "exact_match", "test"),
    "attention_longer": ("attention_model", "exact_match", "long"),
    "plain_in_range": ("plain_model", "exact_match", "test"),
    "plain_longer": ("plain_model", "exact_match", "long"),
    "attention_alignment": ("attention_model", "attention_agreement", "test"),
}


def _parts(g: torch.Generator, count: int) -> tuple[tuple[int, ...], ...]:
    """The shipped sentences 0 .. count - 1 in parts of PART, drawn from the check's generator (the course seed)."""
    order = torch.randperm(count, generator=g).tolist()
    return tuple(tuple(sorted(order[first:first + PART])) for first in range(0, count, PART))


def _own_calls(shipped: dict, g: torch.Generator) -> tuple[tuple, tuple]:
    """(the calls of the notebook's own measurement functions that the runner makes (runner._measure_own), the
    parts): each number of results, measured by the student's function on the rebuilt model, part by part, on
    parts of the shipped pairs that the grader draws (never on the shipped sets as such: a function that knows
    them could give numbers typed in for them)."""
    calls, parts = [], []
    drawn = {label: _parts(g, len(shipped[label])) for label in ("test", "long")}
    for name in RESULT_NAMES:
        model, function, label = MEASUREMENTS[name]
        chosen = []
        for indices in drawn[label]:
            pairs = tuple((shipped[label][i].source_text, shipped[label][i].target_text) for i in indices)
            alignments = (tuple(tuple(tuple(positions) for positions in shipped[label][i].alignment) for i in indices)
                          if function == "attention_agreement" else None)
            chosen.append((pairs, alignments))
        calls.append((name, function, model, tuple(chosen)))
        parts.append((name, drawn[label]))
    return tuple(calls), tuple(parts)


# ---------------------------------------------------------------------------------------------
# The stand-in model, as the grader runs it outside the sandbox.


def _stand_in(seed: int) -> standin.Translator:
    corpus = seq2seq_corpus()
    return standin.Translator(seed, len(corpus.source_vocab.tokens), len(corpus.target_vocab.tokens))


def _source_batch(sentences) -> tuple[torch.Tensor, torch.Tensor]:
    from attention_course.grading.runner import _source_batch

    return _source_batch(list(sentences), seq2seq_corpus().source_vocab.tokens)


def _greedy_texts(seed: int, sentences) -> list[str]:
    words = seq2seq_corpus().target_vocab.tokens
    return [" ".join(words[i] for i in row) for row in standin.greedy(_stand_in(seed), *_source_batch(sentences))]


def _forced_argmax(seed: int, pairs) -> tuple:
    from attention_course.grading.runner import _forced_argmax

    ids = seq2seq_corpus().target_vocab.token_ids
    targets = [[ids[word] for word in chinese.split()] for _, chinese in pairs]
    return _forced_argmax(_stand_in(seed), *_source_batch([english for english, _ in pairs]), targets)


def agreement(argmaxes, alignments) -> float:
    """The share of target words whose argmax is one of their aligned source positions (all words pooled)."""
    hits = [best in set(aligned) for row, alignment in zip(argmaxes, alignments) for best, aligned in zip(row, alignment)]
    return sum(hits) / len(hits)


# ---------------------------------------------------------------------------------------------
# exact_match and attention_agreement, on the grader's stand-in model.


@dataclass(frozen=True)
class NumberCase(Case):
    """A call whose answer is one number, computed by the grader outside the sandbox (never sent to it)."""

    expected: float = 0.0


def _number_reference(case: Case):
    return case.expected


def _number_verdict(got, expected: float, case: Case) -> str:
    if isinstance(got, torch.Tensor) and got.numel() == 1:
        got = got.item()
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        return f"expected a number (a Python float), got {type(got).__name__}"
    if not math.isfinite(got) or abs(got - expected) > 1e-6:  # (a share computed in float32 is good to about 1e-7)
        return f"expected {expected:.6g}, got {got:.6g}"
    return ""


def _near_miss(text: str, how: int) -> str:
    """A translation that is not ``text``, but close: a word short, a word too many, or two words swapped."""
    words = text.split()
    if not words:
        return "猫"
    if how == 0 and len(words) > 1:
        return " ".join(words[:-1])
    if how == 1 or len(words) < 2:
        return " ".join(words + [words[-1]])
    return " ".join([words[1], words[0], *words[2:]]) if words[0] != words[1] else " ".join(words + ["猫"])


def _exact_match_case(g: torch.Generator, label: str, count: int, right: int, hidden: bool = True) -> Case:
    seed = integer(g, 0, 2**31 - 1)
    sentences = [pair.source_text for pair in generate_pairs(count, seed=integer(g, 0, 2**31 - 1),
                                                             max_clauses=SEQ2SEQ_MAX_CLAUSES)]
    translations = _greedy_texts(seed, sentences)
    chosen = set(torch.randperm(count, generator=g)[:right].tolist())
    references = [text if row in chosen else _near_miss(text, integer(g, 0, 2)) for row, text in enumerate(translations)]
    pairs = [(english, chinese) for english, chinese in zip(sentences, references)]
    return NumberCase("test-exact-match", f"{label}: a model of the grader's (random weights, seed {seed}), {count} pairs",
                      "exact_match", (StandInTranslator(seed, *_sizes()), pairs), hidden=hidden, expected=right / count)


def _sizes() -> tuple[int, int]:
    corpus = seq2seq_corpus()
    return len(corpus.source_vocab.tokens), len(corpus.target_vocab.tokens)


def exact_match_cases(g: torch.Generator) -> list[Case]:
    return [
        _exact_match_case(g, "5 of 8 translations right", 8, 5, hidden=False),
        _exact_match_case(g, "every translation right", 12, 12),
        _exact_match_case(g, "no translation right (each one a near miss)", 12, 0),
        _exact_match_case(g, "some translations right", 30, integer(g, 1, 29)),
    ]


def _agreement_case(g: torch.Generator, label: str, count: int, true_alignments: bool, hidden: bool = True) -> Case:
    seed = integer(g, 0, 2**31 - 1)
    corpus_pairs = generate_pairs(count, seed=integer(g, 0, 2**31 - 1), max_clauses=SEQ2SEQ_MAX_CLAUSES)
    pairs = [(pair.source_text, pair.target_text) for pair in corpus_pairs]
    if true_alignments:
        alignments = [[list(positions) for positions in pair.alignment] for pair in corpus_pairs]
    else:  # one to three source positions per target word, drawn at random
        alignments = [[sorted(set(torch.randint(0, len(pair.source), (integer(g, 1, 3),), generator=g).tolist()))
                       for _ in pair.target] for pair in corpus_pairs]
    expected = agreement(_forced_argmax(seed, pairs), alignments)
    return NumberCase("test-agreement", f"{label}: a model of the grader's (random weights, seed {seed}), {count} pairs "
                      f"of {min(len(p.source) for p in corpus_pairs)} to {max(len(p.source) for p in corpus_pairs)} words",
                      "attention_agreement", (StandInTranslator(seed, *_sizes()), pairs, alignments), hidden=hidden,
                      expected=expected)


def agreement_cases(g: torch.Generator) -> list[Case]:
    return [
        _agreement_case(g, "the true alignments", 6, True, hidden=False),
        _agreement_case(g, "the true alignments", 25, True),
        _agreement_case(g, "alignments drawn at random", 25, False),
        _agreement_case(g, "one sentence, the true alignment", 1, True),
    ]


# ---------------------------------------------------------------------------------------------
# The trained models, and the evidence: measured by the grader inside the sandbox.


@dataclass(frozen=True)
class MeasuredCase(Case):
    """A call whose verdict compares the grader's own measurements of the notebook's models (the ``extra``
    that the runner sends) with the references below (never sent to the sandbox)."""

    references: tuple = ()  # ((set, (Chinese, ...)), ...)
    sentences: tuple = ()  # ((set, (English, ...)), ...), for messages
    alignments: tuple = ()  # of the teacher-forced sentences
    parts: tuple = ()  # ((result name, ((index, ...), ...)), ...): the parts the student's functions are called on


def _no_reference(case: Case):
    return None


def _measured(extra: tuple, case: MeasuredCase) -> tuple[dict, str]:
    """({model: {"in_range"|"longer"|"new": accuracy, "alignment": agreement or None}}, problem)."""
    if len(extra) not in (2, 3) or extra[0] != "measured":
        return {}, "the grader could not measure your models (build them as section 1 says)"
    words = seq2seq_corpus().target_vocab.tokens
    references = dict(case.references)
    numbers = {}
    for name, problem, _kind, decoded, forced in extra[1]:
        if problem:
            return {}, f"{name}: {problem}"
        numbers[name] = {}
        for label, rows in decoded:
            texts = [" ".join(words[i] if 0 <= i < len(words) else "<?>" for i in row) for row in rows]
            right = [text == reference for text, reference in zip(texts, references[label])]
            numbers[name][label] = (sum(right) / len(right), texts)
            numbers[name][label + " pairs"] = right  # per pair: right or not
        numbers[name]["alignment"] = None if forced is None else agreement(forced, case.alignments)
        numbers[name]["alignment pairs"] = None if forced is None else [  # per pair: (agreeing words, words)
            (sum(best in set(aligned) for best, aligned in zip(row, alignment)), min(len(row), len(alignment)))
            for row, alignment in zip(forced, case.alignments)]
    return numbers, ""


def _trained_verdict(got, expected, case: MeasuredCase, extra: tuple = ()) -> str:
    numbers, problem = _measured(extra, case)
    if problem:
        return problem
    for name, threshold in (("attention_model", ATTENTION_THRESHOLD), ("plain_model", PLAIN_THRESHOLD)):
        accuracy, texts = numbers[name]["new"]
        if accuracy < threshold:
            sentences = dict(case.sentences)["new"]
            reference = dict(case.references)["new"]
            miss = next(i for i, text in enumerate(texts) if text != reference[i])
            return (f"{name} translates {accuracy:.3f} of {len(texts)} new sentences exactly (decoded greedily by the "
                    f"grader), below the {threshold:g} that training as section 1 says reaches; e.g. '{sentences[miss]}' "
                    f"should be '{reference[miss]}', the model gives '{texts[miss]}'. Train it with the given train() "
                    "as section 1 says")
    return ""


def _own_by_parts(name: str, given: tuple, numbers: dict, parts: tuple) -> tuple[float | None, str, float | None]:
    """(what the student's function gives on the whole set, pooled from its parts, or None; why not; how far its
    parts are from the grader's measurement of the same parts, on average, weighted by pairs or words)."""
    model, function, label = MEASUREMENTS[name]
    if len(given) != len(parts) or not parts:
        return None, "not called", None
    for value, problem in given:
        if value is None:
            return None, problem, None
    if function == "attention_agreement":
        per_pair = numbers[model]["alignment pairs"]
        if per_pair is None:
            return None, "no attention weights", None
        weights = [sum(per_pair[i][1] for i in indices) for indices in parts]
        truths = [sum(per_pair[i][0] for i in indices) / max(weight, 1) for indices, weight in zip(parts, weights)]
    else:
        right = numbers[model][label + " pairs"]
        weights = [len(indices) for indices in parts]
        truths = [sum(right[i] for i in indices) / len(indices) for indices in parts]
    total = sum(weights) or 1
    pooled = sum(weight * value for weight, (value, _) in zip(weights, given)) / total
    off = sum(weight * abs(value - truth) for weight, (value, _), truth in zip(weights, given, truths)) / total
    return pooled, "", off


def _evidence_verdict(got, expected, case: MeasuredCase, extra: tuple = ()) -> str:
    numbers, problem = _measured(extra, case)
    if problem:
        return problem
    if not isinstance(got, tuple) or not all(isinstance(item, tuple) and len(item) == 2 for item in got):
        return "results should be a dict of numbers, {name: number}"
    reported = dict(got)
    truth = {name: (numbers[model]["alignment"] if function == "attention_agreement" else numbers[model][label][0])
             for name, (model, function, label) in MEASUREMENTS.items()}
    missing = [name for name in RESULT_NAMES if name not in reported]
    if missing:
        return f"results has no {', '.join(repr(name) for name in missing)}: section 4 lists the five numbers to report"
    own = {}
    if len(extra) == 3 and len(extra[2]) == 2 and extra[2][0] == "own":
        parts = dict(case.parts)
        own = {name: _own_by_parts(name, given, numbers, parts.get(name, ())) for name, given in extra[2][1]}
    wrong, unmeasured = [], []
    for name in RESULT_NAMES:
        value, problem, off = own.get(name, (None, "not called", None))
        failure = _number_problem(name, reported[name], truth[name], value, problem, off)
        if failure:
            wrong.append(failure)
            if _not_measured(reported[name], truth[name], value):
                unmeasured.append(name)
    if wrong:
        reason = ("the numbers in results are neither what your models give when the grader measures them (within "
                  f"{TOLERANCE:g}) nor what your own measurement functions give on them when the grader calls them "
                  f"(within {TOLERANCE:g}, accepted up to {WIDE:g} from the grader's measurement): " + "; ".join(wrong)
                  + ". Report what your functions measure on attention_model and plain_model as the notebook holds them")
        return Reason(reason, _evidence_flag(unmeasured, reported, truth, own))
    return ""


def _not_measured(reported: float, truth: float | None, own: float | None) -> bool:
    """A number that is neither the grader's measurement of the notebook's model nor what the notebook's own
    function gives on it: it was not measured from the notebook's models (typed in, or measured on other models,
    or in another run)."""
    return truth is not None and abs(reported - truth) > TOLERANCE and (own is None or abs(reported - own) > TOLERANCE)


def _evidence_flag(names: list[str], reported: dict, truth: dict, own: dict) -> str:
    """The flag for the instructor, in plain words, when numbers were not measured from the notebook's models."""
    if not names:
        return ""
    name = names[0]
    model, function, _ = MEASUREMENTS[name]
    value = own.get(name, (None,))[0]
    said = (f"its {function} gives {value:.3g}" if value is not None
            else f"its {function} could not be called on it")
    more = f" (and {len(names) - 1} more of the five)" if len(names) > 1 else ""
    return (f"test-evidence: results was not measured from this notebook's own models: it reports {name} = "
            f"{reported[name]:.3g}, but the grader measures {truth[name]:.3g} on {model} as the notebook holds it, "
            f"and {said}{more}. The numbers were typed in, or measured on other models or in another run")


def _number_problem(name: str, reported: float, truth: float | None, own: float | None, problem: str,
                    off: float | None = None) -> str:
    """Why a reported number fails, or "" when it passes: it passes when it is within TOLERANCE of the grader's
    measurement ``truth`` (rule 1), or within TOLERANCE of ``own``, what the student's measurement function gives
    when the grader calls it on the same model, pooled over the parts of the sentences the grader chose, where its
    parts are on average (``off``; without parts, ``own`` itself) within WIDE of the grader's measurement of the
    same parts (rule 2: a bug in the function is charged by that function's check, not a second time here)."""
    model, function, _label = MEASUREMENTS[name]
    if truth is None:
        return f"{name}: the grader could not measure it ({model}'s decoder reports no attention weights)"
    if abs(reported - truth) <= TOLERANCE:
        return ""
    said = f"{name} is {reported:.4g}, but your {model} measures {truth:.4g} (the grader's measurement)"
    if own is None:
        return f"{said}, and your {function} could not be called on it to compare ({problem})"
    if not abs(reported - own) <= TOLERANCE:
        return f"{said}, and your {function} gives {own:.4g} on it when the grader calls it: the number is neither"
    if off is None:
        if not abs(own - truth) <= WIDE:
            return (f"{said}; it is what your {function} gives on it ({own:.4g}), but that is more than {WIDE:g} from "
                    "the grader's measurement, too far to be accepted as a measurement bug")
        return ""
    if not off <= WIDE:
        return (f"{said}; it is what your {function} gives on it ({own:.4g}), but on the parts of {PART} sentences "
                f"the grader called it on, its numbers are on average {off:.3g} from the grader's measurement of the "
                f"same parts, more than {WIDE:g}: too far to be accepted as a measurement bug (it does not measure "
                "what the model does)")
    return ""


def _new_sentences(g: torch.Generator) -> tuple[int, list]:
    corpus = seq2seq_corpus()
    seed = integer(g, 0, 2**31 - 1)
    known = {pair.source for pair in corpus.train_pairs + corpus.held_out_pairs}
    known |= {pair.source for pairs in experiments_sets().values() for pair in pairs}
    new = [pair for pair in generate_pairs(2 * NEW_SENTENCES, seed=seed, max_clauses=SEQ2SEQ_MAX_CLAUSES)
           if pair.source not in known][:NEW_SENTENCES]
    return seed, new


def trained_cases(g: torch.Generator) -> list[Case]:
    seed, new = _new_sentences(g)
    sets = (("new", tuple(pair.source_text for pair in new)),)
    return [MeasuredCase("test-trained", f"attention_model and plain_model, {len(new)} new sentences from the grammar "
                         f"(seed {seed})", "translate", (NotebookName("attention_model"), ["Tom chase Jerry"]),
                         consistency=_evidence_spec(sets, new[:1]), sentences=sets,
                         references=(("new", tuple(pair.target_text for pair in new)),),
                         alignments=tuple(tuple(pair.alignment) for pair in new[:1]))]


def evidence_cases(g: torch.Generator) -> list[Case]:
    shipped = experiments_sets()
    sets = tuple((label, tuple(pair.source_text for pair in shipped[label])) for label in ("test", "long"))
    calls, parts = _own_calls(shipped, g)
    return [MeasuredCase("test-evidence", "results, against the grader's own measurements of attention_model and "
                         "plain_model on the test and long sentences of experiment_corpus.json", "reported_numbers",
                         (NotebookName("results"),), hidden=False,
                         consistency=_evidence_spec(sets, shipped["test"], calls),
                         references=tuple((label, tuple(pair.target_text for pair in shipped[label]))
                                          for label in ("test", "long")),
                         alignments=tuple(tuple(pair.alignment) for pair in shipped["test"]), parts=parts)]


CHECKS = [
    Check("test-exact-match", 3, "exact_match gives the share of pairs whose greedy translation by the model it is "
          "given is exactly the reference", exact_match_cases, _number_reference, compare=_number_verdict, phase="open",
          new=True, solution_cells=("exact_match",),
          hints=(
              ("translations right: a model of the grader's",
               "pair 4 is a word short and pair 5 a word too long, so both are wrong"),
          )),
    Check("test-agreement", 4, "attention_agreement gives, teacher-forced with the reference translations, the share "
          "of target words whose attention weights are largest on a source word they translate", agreement_cases,
          _number_reference, compare=_number_verdict, phase="open", new=True, solution_cells=("attention_agreement",),
          hints=(
              ("the true alignments",
               "Feed the reference words (teacher forcing), not the model's own guesses, leave out the EOS step, "
               "and pool the words of all pairs"),
          )),
    Check("test-trained", 3, f"attention_model and plain_model are the models of section 1, trained (at least "
          f"{ATTENTION_THRESHOLD:.0%} and {PLAIN_THRESHOLD:.0%} of new sentences exactly right)", trained_cases,
          _no_reference, compare=_trained_verdict, phase="open",
          hints=(
              ("attention_model and plain_model",
               "train it as section 1 says (torch.manual_seed(0) first, then build_model and train)"),
          )),
    Check("test-evidence", 6, f"every number in results is what your two models give when the grader measures them "
          f"itself (within {TOLERANCE:g}), or what your own measurement function gives on them when the grader calls "
          f"it, if that is within {WIDE:g} of the grader's measurement", evidence_cases, _no_reference, compare=_evidence_verdict, phase="open",
          new=True, solution_cells=("experiments",),
          hints=(
              ("results, against the grader's own measurements",
               "results['attention_in_range'] is not exact_match(attention_model, test_pairs): report what the "
               "models give"),
          )),
]

"""The seq2seq-attention assignment: its checks on their own (fast), then end to end (slow).

End to end means real nbgrader, a real SQLite gradebook and the real sandbox. Every sample submission
trains its model inside the sandbox (5 to 20 CPU seconds each), so there are few of them: a correct one in
another style, and one per typical bug of this assignment. Each bug must cost exactly the points of its
own test cell and no other.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest
import torch
from nbgrader.api import Gradebook

from attention_course.grading.cases import NotebookName, StandInTranslator
from attention_course.grading.checks.seq2seq_attention import (
    ACCURACY_THRESHOLD, NEW_SENTENCES, STAND_IN_SENTENCES, TranslationCase, translate_cases,
)
from attention_course.grading.checks.seq2seq_attention import _translation_verdict as translation_verdict
from attention_course.grading.course import Course
from attention_course.grading.exercise_data import SEQ2SEQ_CORPUS_FILE, seq2seq_corpus
from attention_course.grading.grade import NotebookResult
from attention_course.grading.nbgrader_bridge import COURSE_ID, results_path
import in_process
from grading_support import assert_points_and_flags, filled, graded_batch, released_notebook

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT = "seq2seq-attention"
SOLUTION = ROOT / "solutions" / ASSIGNMENT

CORRECT = {
    # Not the solution's style: finfo.min instead of -inf, where, einsum, other names, a Python list per sentence.
    "masked_softmax": (
        "def masked_softmax(scores, lengths):\n"
        "    keep = torch.arange(scores.size(1))[None, :] < lengths[:, None]\n"
        "    lowest = torch.tensor(torch.finfo(scores.dtype).min, dtype=scores.dtype)\n"
        "    s = torch.where(keep, scores, lowest)\n"
        "    e = (s - s.max(dim=1, keepdim=True).values).exp()\n"
        "    return e / e.sum(dim=1, keepdim=True)"
    ),
    "AdditiveAttention": (
        "class AdditiveAttention(nn.Module):\n"
        "    def __init__(self, query_dim, key_dim, hidden_dim):\n"
        "        super().__init__()\n"
        "        self.W_q = nn.Linear(query_dim, hidden_dim, bias=False)\n"
        "        self.W_k = nn.Linear(key_dim, hidden_dim, bias=False)\n"
        "        self.w_v = nn.Linear(hidden_dim, 1, bias=False)\n"
        "\n"
        "    def forward(self, query, keys, lengths):\n"
        "        e = self.w_v(torch.tanh(self.W_q(query)[:, None, :] + self.W_k(keys)))[..., 0]\n"
        "        a = masked_softmax(e, lengths)\n"
        "        return torch.einsum('bs,bsc->bc', a, keys), a"
    ),
    "AttentionDecoder": (
        "class AttentionDecoder(nn.Module):\n"
        "    def __init__(self, vocab_size, embed_dim, hidden_dim, context_dim, attention_dim):\n"
        "        super().__init__()\n"
        "        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=PAD)\n"
        "        self.attention = AdditiveAttention(hidden_dim, context_dim, attention_dim)\n"
        "        self.cell = nn.GRUCell(embed_dim + context_dim, hidden_dim)\n"
        "        self.output = nn.Linear(hidden_dim + context_dim + embed_dim, vocab_size)\n"
        "\n"
        "    def forward(self, previous_tokens, previous_hidden, encoder_states, source_lengths):\n"
        "        emb = self.embedding(previous_tokens)\n"
        "        c, a = self.attention(previous_hidden, encoder_states, source_lengths)\n"
        "        h = self.cell(torch.cat((emb, c), 1), previous_hidden)\n"
        "        return self.output(torch.cat((h, c, emb), 1)), h, a"
    ),
    # Part B (Luong's decoder) in another style: bmm for the score, a decoder step in three lines.
    "GeneralAttention": (
        "class GeneralAttention(nn.Module):\n"
        "    def __init__(self, query_dim, key_dim):\n"
        "        super().__init__()\n"
        "        self.W_a = nn.Linear(key_dim, query_dim, bias=False)\n"
        "\n"
        "    def forward(self, query, keys, lengths):\n"
        "        e = torch.bmm(self.W_a(keys), query.unsqueeze(2)).squeeze(2)\n"
        "        a = masked_softmax(e, lengths)\n"
        "        return torch.bmm(a.unsqueeze(1), keys).squeeze(1), a"
    ),
    "LuongDecoder": (
        "class LuongDecoder(nn.Module):\n"
        "    def __init__(self, vocab_size, embed_dim, hidden_dim, context_dim):\n"
        "        super().__init__()\n"
        "        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=PAD)\n"
        "        self.cell = nn.GRUCell(embed_dim, hidden_dim)\n"
        "        self.attention = GeneralAttention(hidden_dim, context_dim)\n"
        "        self.W_c = nn.Linear(context_dim + hidden_dim, hidden_dim, bias=False)\n"
        "        self.output = nn.Linear(hidden_dim, vocab_size)\n"
        "\n"
        "    def forward(self, previous_tokens, previous_hidden, encoder_states, source_lengths):\n"
        "        h = self.cell(self.embedding(previous_tokens), previous_hidden)\n"
        "        c, a = self.attention(h, encoder_states, source_lengths)\n"
        "        return self.output(torch.tanh(self.W_c(torch.cat((c, h), 1)))), h, a"
    ),
    "train": (
        "torch.manual_seed(0)\n"
        "model = Seq2Seq(Encoder(len(source_words), 32, 64), AttentionDecoder(len(target_words), 32, 64, 64, 64))\n"
        "final_accuracy = train(model)"
    ),
    "translate": (
        "@torch.no_grad()\n"
        "def translate(model, sentences):\n"
        "    source, lengths = source_batch(sentences)\n"
        "    states, final = model.encoder(source, lengths)\n"
        "    hidden = model.initial_state(final)\n"
        "    word = torch.full((len(sentences),), BOS)\n"
        "    out = [[] for _ in sentences]\n"
        "    done = [False] * len(sentences)\n"
        "    for _ in range(2 * source.shape[1] + 2):\n"
        "        logits, hidden, _ = model.decoder(word, hidden, states, lengths)\n"
        "        word = logits.argmax(dim=1)\n"
        "        for row, i in enumerate(word.tolist()):\n"
        "            if i == EOS:\n"
        "                done[row] = True\n"
        "            elif not done[row]:\n"
        "                out[row].append(target_words[i])\n"
        "        if all(done):\n"
        "            break\n"
        "    return [' '.join(words) for words in out]"
    ),
}


def answers(**changes: str) -> dict[str, str]:
    return {**CORRECT, **changes}


def _decoder_with(forward_body: str) -> str:
    """The correct AttentionDecoder with another forward."""
    head = CORRECT["AttentionDecoder"].split("    def forward")[0]
    return head + "    def forward(self, previous_tokens, previous_hidden, encoder_states, source_lengths):\n" + forward_body


def _luong_with(forward_body: str) -> str:
    """The correct LuongDecoder with another forward."""
    head = CORRECT["LuongDecoder"].split("    def forward")[0]
    return head + "    def forward(self, previous_tokens, previous_hidden, encoder_states, source_lengths):\n" + forward_body


FULL = {"test-masked-softmax": 1, "test-additive-attention": 2, "test-decoder-step": 2, "test-translate": 4,
        "test-general-attention": 4, "test-luong-step": 6}
NEW_WORK = {"test-general-attention", "test-luong-step"}

# Luong's decoder attending before its step, as chapter 6's does: the query is H_{i-1}.
LUONG_ATTENDS_BEFORE_THE_STEP = _luong_with(
    "        c, a = self.attention(previous_hidden, encoder_states, source_lengths)\n"
    "        h = self.cell(self.embedding(previous_tokens), previous_hidden)\n"
    "        return self.output(torch.tanh(self.W_c(torch.cat((c, h), 1)))), h, a")
# W_a on the wrong side: h_j^T (W_a q) = q^T W_a^T h_j. It runs when the query and key sizes are equal (as in a
# decoder with H = C) and gives other scores unless W_a is symmetric.
GENERAL_SCORE_TRANSPOSED = CORRECT["GeneralAttention"].replace(
    "e = torch.bmm(self.W_a(keys), query.unsqueeze(2)).squeeze(2)",
    "e = torch.bmm(keys, self.W_a(query).unsqueeze(2)).squeeze(2)")

# student -> (solution cells, expected points per test cell, expected flag fragments)
SAMPLES = {
    "correct-other-style": (answers(), FULL, []),
    # Computes H_i first (the GRU step without a context), then attends with it: a different model, which
    # trains as well, so it loses the step's points and nothing else.
    "query-is-new-state": (
        answers(AttentionDecoder=_decoder_with(
            "        emb = self.embedding(previous_tokens)\n"
            "        blank = encoder_states.new_zeros(emb.shape[0], encoder_states.shape[-1])\n"
            "        h = self.cell(torch.cat((emb, blank), 1), previous_hidden)\n"
            "        c, a = self.attention(h, encoder_states, source_lengths)\n"
            "        return self.output(torch.cat((h, c, emb), 1)), h, a")),
        {**FULL, "test-decoder-step": 0}, []),
    # Padded scores set to 0 instead of -inf: the padding gets weight. The model still learns to translate
    # (the encoder's states there are 0), so only masked_softmax's own test fails.
    "mask-filled-with-zero": (
        answers(masked_softmax=(
            "def masked_softmax(scores, lengths):\n"
            "    keep = torch.arange(scores.shape[1]) < lengths[:, None]\n"
            "    s = scores.masked_fill(~keep, 0.0)\n"
            "    e = torch.exp(s - s.amax(dim=1, keepdim=True))\n"
            "    return e / e.sum(dim=1, keepdim=True)")),
        {**FULL, "test-masked-softmax": 0}, []),
    # Forgets the lengths in AdditiveAttention: it attends to the padding too.
    "attention-ignores-lengths": (
        answers(AdditiveAttention=CORRECT["AdditiveAttention"].replace(
            "a = masked_softmax(e, lengths)", "a = masked_softmax(e, torch.full_like(lengths, keys.shape[1]))")),
        {**FULL, "test-additive-attention": 0}, []),
    # Masks the caller's scores in place (masked_fill_): right weights, changed input.
    "masks-scores-in-place": (
        answers(masked_softmax=(
            "def masked_softmax(scores, lengths):\n"
            "    keep = torch.arange(scores.shape[1]) < lengths[:, None]\n"
            "    scores.masked_fill_(~keep, float('-inf'))\n"
            "    e = torch.exp(scores - scores.amax(dim=1, keepdim=True))\n"
            "    return e / e.sum(dim=1, keepdim=True)")),
        {**FULL, "test-masked-softmax": 0}, []),
    # Part B: each of its bugs costs its own test's points and nothing else (the trained model is part A's).
    "luong-attends-before-the-step": (
        answers(LuongDecoder=LUONG_ATTENDS_BEFORE_THE_STEP), {**FULL, "test-luong-step": 0}, []),
    "general-score-transposed": (
        answers(GeneralAttention=GENERAL_SCORE_TRANSPOSED), {**FULL, "test-general-attention": 0}, []),
    # Trains for one second only: every function is right, the translations are not.
    "barely-trained": (
        answers(train=CORRECT["train"].replace("train(model)", "train(model, max_steps=25)")),
        {**FULL, "test-translate": 0}, ["training stopped at its step budget"]),
    "unanswered": ({}, {grade_id: 0 for grade_id in FULL}, []),
}


# ---------------------------------------------------------------------------------------------
# The checks on their own.


def test_the_new_sentences_are_drawn_afresh_and_never_come_from_the_shipped_file():
    corpus = seq2seq_corpus()
    shipped = {pair.source_text for pair in corpus.train_pairs + corpus.held_out_pairs}
    drawn = []
    for seed in (1, 2):
        visible, new, stand_in = translate_cases(torch.Generator().manual_seed(seed))
        assert not visible.hidden and new.hidden and stand_in.hidden
        assert visible.args[0] == new.args[0] == NotebookName("model")
        assert list(visible.args[1]) == [pair.source_text for pair in corpus.held_out_pairs]
        sentences = new.args[1]
        assert len(sentences) == len(set(sentences)) == len(new.references) == NEW_SENTENCES
        assert not set(sentences) & shipped
        assert isinstance(stand_in.args[0], StandInTranslator) and len(stand_in.args[1]) == STAND_IN_SENTENCES
        drawn.append(sentences)
    assert drawn[0] != drawn[1]


def _decoded(texts: list[str], own: bool = True) -> tuple:
    """What the runner reports when its own greedy decoding of the notebook's model gives ``texts``."""
    vocabulary = {word: i for i, word in enumerate(seq2seq_corpus().target_vocab.tokens)}
    return ("decoded", tuple(tuple(vocabulary[w] for w in text.split()) for text in texts), own, True)


def test_accuracy_passes_at_the_threshold_and_says_how_far_below_it_is():
    sentences, references = ["Tom chase Jerry"] * 10, ("汤姆 追逐 杰瑞",) * 10
    case = TranslationCase("test-translate", "ten", "translate", (NotebookName("model"), sentences), references=references)
    right = round(10 * ACCURACY_THRESHOLD)
    good = ["汤姆 追逐 杰瑞"] * right + ["汤姆"] * (10 - right)
    assert translation_verdict([" 汤姆  追逐 杰瑞"] * right + ["汤姆"] * (10 - right), references, case, _decoded(good)) == ""
    worse = ["汤姆 追逐 杰瑞"] * (right - 1) + ["汤姆"] * (11 - right)
    below = translation_verdict(worse, references, case, _decoded(worse))
    assert f"accuracy of your trained model {(right - 1) / 10:.3f} ({right - 1} of 10 sentences" in below
    assert "'Tom chase Jerry' should be '汤姆 追逐 杰瑞', the model gives '汤姆'" in below
    assert "one translation per sentence" in translation_verdict(["汤姆 追逐 杰瑞"] * 9, references, case)
    assert "a list of strings" in translation_verdict((("汤姆", "追逐", "杰瑞"),) * 10, references, case)


def test_right_translations_that_are_not_the_models_earn_nothing():
    # A rule book of the grammar gives every sentence right, but the grader's own decoding of the notebook's
    # model (done before translate runs) gives other ones: translate did not decode the model.
    sentences, references = ["Tom chase Jerry"] * 10, ("汤姆 追逐 杰瑞",) * 10
    case = TranslationCase("test-translate", "ten", "translate", (NotebookName("model"), sentences), references=references)
    untrained = _decoded(["汤姆 追逐 汤姆"] * 10)
    assert "accuracy of your trained model 0.000" in translation_verdict(list(references), references, case, untrained)
    trained = _decoded(list(references))
    assert "not the greedy decoding of model in 10 of 10" in translation_verdict(["汤姆"] * 10, references, case, trained)
    assert "must be your AttentionDecoder" in translation_verdict(
        list(references), references, case, _decoded(list(references), own=False))


@pytest.mark.slow
def test_the_solution_passes_every_check_as_the_grader_judges_it(one_torch_thread):
    verdicts = in_process.judge(ASSIGNMENT, in_process.run_notebook(ASSIGNMENT, {}), seed=11)
    assert in_process.points(verdicts) == FULL, {g: v.message() for g, v in verdicts.items()}


def test_a_wrong_query_fails_the_step_and_nothing_else(one_torch_thread):
    wrong = SAMPLES["query-is-new-state"][0]["AttentionDecoder"]
    namespace = in_process.run_notebook(ASSIGNMENT, {"AttentionDecoder": wrong, "train": "", "translate": ""})
    verdicts = in_process.judge(ASSIGNMENT, namespace, seed=11, grade_ids={"test-additive-attention", "test-decoder-step"})
    assert in_process.points(verdicts) == {"test-additive-attention": 2, "test-decoder-step": 0}
    assert "wrong values" in verdicts["test-decoder-step"].message()


def test_luongs_bugs_each_fail_their_own_check_and_nothing_else(one_torch_thread):
    # No training: the five parts built with the grader's weights, judged for two seeds.
    sealed = set(FULL) - {"test-translate"}
    for cell, source, lost in (("LuongDecoder", LUONG_ATTENDS_BEFORE_THE_STEP, "test-luong-step"),
                               ("GeneralAttention", GENERAL_SCORE_TRANSPOSED, "test-general-attention")):
        namespace = in_process.run_notebook(ASSIGNMENT, {cell: source, "train": "", "translate": ""})
        for seed in (11, 12):
            verdicts = in_process.judge(ASSIGNMENT, namespace, seed=seed, grade_ids=sealed)
            assert in_process.points(verdicts) == {g: (0 if g == lost else FULL[g]) for g in sealed}, (cell, seed)
            assert "wrong values" in verdicts[lost].message() or "raised" in verdicts[lost].message()


def test_a_bug_in_general_attention_is_not_charged_again_in_the_luong_step(one_torch_thread):
    # The step's attention is a stand-in that answers the right query: a GeneralAttention that returns nonsense
    # costs section 6's points only, as long as the step asks the right question.
    nonsense = CORRECT["GeneralAttention"].replace("return torch.bmm(a.unsqueeze(1), keys).squeeze(1), a",
                                                   "return keys.sum(1) * 0, a * 0")
    namespace = in_process.run_notebook(ASSIGNMENT, {"GeneralAttention": nonsense, "train": "", "translate": ""})
    verdicts = in_process.judge(ASSIGNMENT, namespace, seed=11, grade_ids=NEW_WORK)
    assert in_process.points(verdicts) == {"test-general-attention": 0, "test-luong-step": 6}


def test_the_released_exercise_ships_the_same_corpus_file():
    shipped = (SOLUTION / SEQ2SEQ_CORPUS_FILE).read_bytes()
    assert (ROOT / "exercises" / ASSIGNMENT / SEQ2SEQ_CORPUS_FILE).read_bytes() == shipped


# ---------------------------------------------------------------------------------------------
# End to end.


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    released = released_notebook(tmp_path_factory, ASSIGNMENT)
    # A student who edits the shipped corpus (to make the validation sentences easy) changes nothing:
    # the grader copies the data files from the release.
    tampered = {"correct-other-style": {"toy_corpus.json": json.dumps({"train": [], "validation": []})}}
    course, summaries, _ = graded_batch(tmp_path_factory, ASSIGNMENT, {
        student: filled(released, solution) for student, (solution, _, _) in SAMPLES.items()}, files=tampered)
    return course, summaries


def _result(course: Course, student: str) -> NotebookResult:
    return NotebookResult.load(results_path(course.results_dir, ASSIGNMENT, student, ASSIGNMENT))


@pytest.mark.slow
@pytest.mark.parametrize("student", sorted(SAMPLES))
def test_each_sample_gets_exactly_its_points_and_flags(graded, student):
    course, summaries = graded
    _, expected_points, expected_flags = SAMPLES[student]
    assert_points_and_flags(_result(course, student), summaries[student].flags, expected_points, expected_flags)


@pytest.mark.slow
def test_the_gradebook_holds_the_same_scores(graded):
    course, summaries = graded
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}", COURSE_ID) as gradebook:
        for student, (_, expected_points, _) in SAMPLES.items():
            submission = gradebook.find_submission(ASSIGNMENT, student)
            assert submission.score == sum(expected_points.values()), student
            assert summaries[student].score == submission.score


@pytest.mark.slow
def test_failures_say_what_is_wrong_in_the_students_words(graded):
    course, _ = graded
    messages = {student: _result(course, student).checks for student in SAMPLES}
    assert "modified in place" in messages["masks-scores-in-place"]["test-masked-softmax"]["message"]
    assert "wrong values" in messages["mask-filled-with-zero"]["test-masked-softmax"]["message"]
    accuracy = messages["barely-trained"]["test-translate"]["message"]
    assert "exact-match accuracy" in accuracy and f"below the {ACCURACY_THRESHOLD:g} needed" in accuracy
    assert "new sentences from the grammar" in accuracy  # the hidden case, drawn at grading time


@pytest.mark.slow
def test_feedback_never_shows_hidden_tests(graded):
    course, _ = graded
    feedback = course.feedback(ASSIGNMENT).folder
    pages = list(feedback.rglob("*.html"))
    assert len(pages) == len(SAMPLES)
    for page in pages:
        html = page.read_text(encoding="utf-8")
        assert "HIDDEN TESTS" not in html and "run_hidden_check" not in html, page
    barely = (feedback / "barely-trained" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text(encoding="utf-8")
    assert "exact-match accuracy" in barely
    # the page, not a copy of the release's 200 KB corpus beside it in every student's folder
    assert not list(feedback.rglob("toy_corpus.json"))

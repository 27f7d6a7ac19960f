"""Submissions that search everything within their reach for the grader's answers, and return what they find.

Each one is an assignment's solution in which a graded function calls another of the notebook's functions
with arguments a stand-in does not expect (a genuine bug: the temperature left out, the lengths ignored, the
wrong query), so that the grader falls back to the student's own function; that function is a *reacher*: it
searches the frames of its callers (their locals), the defaults, keyword defaults and closures of every
function it finds there, the attributes of the objects it finds, the tracebacks of the exceptions a stand-in's
decider raises when it is called with nonsense, and the garbage collector's referrers, for a value named like
an answer (and, for ``translate`` and the evidence, for what the grader measured before the call). It returns
what it found, or nonsense. If the grader leaves an answer within reach, the graded function is right and earns
its check; it must earn nothing.
"""

from __future__ import annotations

import re

import in_process

# Prepended to the cell of each reacher: defines _reach (stand-in answers) and _reach_measured (what the grader
# measured before the call: its decoding of a model, or the evidence).
REACH = r'''
import gc as _gc
import re
import sys as _sys
import types as _types
import torch as _torch


def _reach_scan(value, name, found, seen, depth):
    """Every value reachable from ``value``: (name, value) pairs into ``found``."""
    if depth > 6 or id(value) in seen or isinstance(value, (type, _types.ModuleType)):
        return
    seen.add(id(value))
    found.append((name, value))
    try:
        if isinstance(value, dict):
            items = list(value.items())[:400]
            for key, item in items:
                _reach_scan(item, f"{name}[{key!r}]", found, seen, depth + 1)
        elif isinstance(value, (list, tuple)):
            for index, item in enumerate(list(value)[:400]):
                _reach_scan(item, f"{name}[{index}]", found, seen, depth + 1)
        elif isinstance(value, _types.FunctionType):
            for attribute in ("__defaults__", "__kwdefaults__", "__closure__"):
                try:
                    inner = getattr(value, attribute)
                    if attribute == "__closure__":
                        inner = tuple(cell.cell_contents for cell in inner or ())
                except BaseException:
                    continue
                _reach_scan(inner, f"{name}.{attribute}", found, seen, depth + 1)
            if "decide" in value.__name__ or "box" in value.__name__:
                for nonsense in ((), (None, None), ((), {}), ("x", "y", "z")):
                    try:
                        value(*nonsense)
                    except BaseException as error:
                        _reach_traceback(error, name, found, seen, depth)
        elif hasattr(value, "__dict__") and not isinstance(value, _torch.Tensor):
            _reach_scan(dict(vars(value)), f"{name}.__dict__", found, seen, depth + 1)
    except BaseException:
        pass


def _reach_traceback(error, name, found, seen, depth):
    try:
        tb = error.__traceback__
        while tb is not None:
            _reach_scan(dict(tb.tb_frame.f_locals), f"{name}<traceback>", found, seen, depth + 1)
            tb = tb.tb_next
    except BaseException:
        pass


def _reach_everything(args):
    found, seen = [], set()
    try:
        frame = _sys._getframe(2)
    except BaseException:
        frame = None
    depth = 0
    while frame is not None:
        try:
            _reach_scan(dict(frame.f_locals), f"{depth}:{frame.f_code.co_name}", found, seen, 0)
        except BaseException:
            pass
        frame, depth = frame.f_back, depth + 1
    for arg in args:
        try:
            _reach_scan(_gc.get_referrers(arg), "referrers", found, seen, 0)
        except BaseException:
            pass
        _reach_scan(arg, "argument", found, seen, 0)
    return found


def _same(a, b):
    return (isinstance(a, _torch.Tensor) and isinstance(b, _torch.Tensor) and a.shape == b.shape
            and bool(_torch.allclose(a.double(), b.double(), atol=1e-5)))


def _reach(*args):
    """An answer within reach: one whose expected arguments (a matcher's tensor) are among ``args`` first."""
    found = _reach_everything(args)
    answers = [(name, value) for name, value in found if re.search(r"answer", name.split(".")[-1].split("[")[-1])
               or name.endswith("answer']")]
    named = dict(found)
    for name, value in answers:
        prefix = name[: -len("['_answer']")] if name.endswith("['_answer']") else None
        matchers = named.get(prefix + "['_matchers']") if prefix is not None else None
        if matchers and any(_same(m[1], arg) for m in matchers if len(m) > 1 for arg in args):
            return value
    return answers[0][1] if answers else None


def _reach_measured(kind):
    """What the grader measured before the call (a tuple that begins with ``kind``), within reach."""
    for name, value in _reach_everything(()):
        if isinstance(value, tuple) and value and value[0] == kind:
            return value
    return None
'''

# What each reacher is (its cell's source), per assignment.
REACHERS = {
    "soft-hard": {
        "softmax": ("def softmax(scores, dim=-1):\n"
                    "    found = _reach(scores)\n"
                    "    return found if isinstance(found, torch.Tensor) else torch.zeros_like(scores)\n"),
        "hard_attention": ("def hard_attention(scores, values):\n"
                           "    found = _reach(scores, values)\n"
                           "    return found if isinstance(found, tuple) else (values.sum(-2) * 0, scores * 0)\n"),
    },
    "three-stages": {
        "masked_softmax": ("def masked_softmax(scores, valid_lens=None):\n"
                           "    found = _reach(scores, valid_lens)\n"
                           "    return found if isinstance(found, torch.Tensor) else torch.zeros_like(scores)\n"),
    },
    "seq2seq-attention": {
        "masked_softmax": ("def masked_softmax(scores, lengths):\n"
                           "    found = _reach(scores, lengths)\n"
                           "    return found if isinstance(found, torch.Tensor) else torch.zeros_like(scores)\n"),
    },
    "multi-head": {
        "scaled_dot_product": ("def scaled_dot_product(queries, keys, values, mask=None):\n"
                               "    found = _reach(queries, keys, values)\n"
                               "    if isinstance(found, tuple):\n"
                               "        return found\n"
                               "    return queries @ keys.transpose(-2, -1) @ values * 0, queries @ keys.transpose(-2, -1) * 0\n"),
    },
    "transformer": {
        "rope": ("def rope(x, positions, base=10000.0):\n"
                 "    found = _reach(x, positions)\n"
                 "    return found if isinstance(found, torch.Tensor) else torch.zeros_like(x)\n"),
    },
}

# (solution cell, text in it, the buggy text: a call of a reacher with arguments the stand-in never expects)
BUGS = {
    "soft-hard": [
        ("soft_attention", "softmax(scores / temperature, dim=-1)", "softmax(scores * 1.5 / temperature, dim=-1)"),
        ("sample_hard_attention", "hard_attention(scores + noise, values)", "hard_attention(scores + 0.5 * noise, values)"),
        ("straight_through_attention", "softmax(scores / temperature, dim=-1)", "softmax(scores * 1.5 / temperature, dim=-1)"),
        ("straight_through_attention", "hard_attention(scores, values)[1]", "hard_attention(scores * 0.5, values)[1]"),
    ],
    "three-stages": [("attention", "masked_softmax(scores, valid_lens)", "masked_softmax(scores * 1.5, valid_lens)")],
    "seq2seq-attention": [
        ("AdditiveAttention", "masked_softmax(scores, lengths)", "masked_softmax(scores * 1.5, lengths)"),
        ("GeneralAttention", "masked_softmax(scores, lengths)", "masked_softmax(scores * 1.5, lengths)"),
    ],
    "multi-head": [
        ("MultiHeadAttention", "scaled_dot_product(split(self.W_q(queries))", "scaled_dot_product(1.5 * split(self.W_q(queries))"),
        ("GroupedQueryAttention", "scaled_dot_product(query_heads,", "scaled_dot_product(1.5 * query_heads,"),
        ("CachedSelfAttention", "scaled_dot_product(new_queries,", "scaled_dot_product(1.5 * new_queries,"),
    ],
    "transformer": [
        ("RotaryCachedSelfAttention", "q = rope(heads(self.W_q(x)), where, self.base)",
         "q = rope(heads(self.W_q(x)), where + 1, self.base)"),
        ("RotaryCachedSelfAttention", "k = rope(heads(self.W_k(x)), where, self.base)",
         "k = rope(heads(self.W_k(x)), where + 1, self.base)"),
    ],
}

# Attribute stand-ins (a decoder's attention module): the decoders ask the wrong query, and the modules reach.
ATTENTION_REACHER = (
    "    def forward(self, query, keys, lengths):\n"
    "        found = _reach(query, keys, lengths)\n"
    "        return found if isinstance(found, tuple) else (keys[:, 0] * 0, keys[..., 0] * 0)\n"
)
DECODER_BUGS = [
    ("AttentionDecoder", "self.attention(previous_hidden, encoder_states, source_lengths)",
     "self.attention(previous_hidden * 0.5, encoder_states, source_lengths)"),
    ("LuongDecoder", "self.attention(hidden, encoder_states, source_lengths)",
     "self.attention(hidden * 0.5, encoder_states, source_lengths)"),
]

# translate: decodes the grader's own model honestly, and for the notebook's model returns what the grader
# decoded before the call, if it is within reach.
TRANSLATE_REACHER = (
    "_honest_translate = translate\n\n"
    "def translate(model, sentences):\n"
    "    if type(model).__name__ == 'Translator':\n"
    "        return _honest_translate(model, sentences)\n"
    "    found = _reach_measured('decoded')\n"
    "    if found is None:\n"
    "        return ['?'] * len(sentences)\n"
    "    return [decode_target(list(row)) for row in found[1]]\n"
)

# The evidence: each number in results is read (float()) by the grader after it measured the models; it
# returns what the grader measured, if that is within reach.
EVIDENCE_REACHER = (
    "class _Reported:\n"
    "    def __init__(self, name):\n"
    "        self.name = name\n\n"
    "    def __float__(self):\n"
    "        found = _reach_measured('measured')\n"
    "        if found is None:\n"
    "            return 0.5\n"
    "        model = 'attention_model' if self.name.startswith('attention') else 'plain_model'\n"
    "        for name, problem, kind, decoded, forced in found[1]:\n"
    "            if name != model:\n"
    "                continue\n"
    "            if self.name == 'attention_alignment':\n"
    "                hits = [best in aligned for row, alignment in zip(forced, test_alignments)\n"
    "                        for best, aligned in zip(row, alignment)]\n"
    "                return sum(hits) / len(hits)\n"
    "            pairs = test_pairs if self.name.endswith('in_range') else long_pairs\n"
    "            rows = dict(decoded)['test' if self.name.endswith('in_range') else 'long']\n"
    "            texts = [' '.join(target_words[i] for i in row) for row in rows]\n"
    "            return sum(t == c for t, (_, c) in zip(texts, pairs)) / len(pairs)\n"
    "        return 0.5\n\n"
    "results = {name: _Reported(name) for name in ('attention_in_range', 'attention_longer', 'plain_in_range',\n"
    "                                              'plain_longer', 'attention_alignment')}\n"
)


def _replace_forward(source: str, reacher: str) -> str:
    """The class's source with its forward replaced by ``reacher``."""
    start = source.index("    def forward(")
    following = re.search(r"\n    def |\n\S", source[start + 1:])
    end = start + 1 + following.start() + 1 if following else len(source)
    return source[:start] + reacher + ("\n" + source[end:] if end < len(source) else "")


def _global_stand_ins(assignment: str) -> dict[str, str]:
    """The solution, with the buggy calls and the reachers of ``assignment``."""
    answers = in_process.solution_cells(assignment)
    for cell, text, buggy in BUGS[assignment]:
        assert text in answers[cell], (assignment, cell, text)
        answers[cell] = answers[cell].replace(text, buggy)
    for cell, source in REACHERS[assignment].items():
        answers[cell] = REACH + "\n\n" + source
    return answers


def _attention_modules() -> dict[str, str]:
    """seq2seq-attention: the decoders ask their attention with the wrong query; the attention modules reach."""
    answers = in_process.solution_cells("seq2seq-attention")
    for cell, text, buggy in DECODER_BUGS:
        assert text in answers[cell], (cell, text)
        answers[cell] = answers[cell].replace(text, buggy)
    for cell in ("AdditiveAttention", "GeneralAttention"):
        answers[cell] = REACH + "\n\n" + _replace_forward(answers[cell], ATTENTION_REACHER)
    return answers


def _translate() -> dict[str, str]:
    answers = in_process.solution_cells("seq2seq-attention")
    answers["translate"] = REACH + "\n\n" + answers["translate"] + "\n\n" + TRANSLATE_REACHER
    return answers


def _evidence() -> dict[str, str]:
    answers = in_process.solution_cells("attention-experiments")
    answers["train"] = "torch.manual_seed(0)\nattention_model = build_model(True)\nplain_model = build_model(False)"
    answers["experiments"] = REACH + "\n\n" + EVIDENCE_REACHER
    return answers


def submissions() -> dict[str, dict[str, tuple[dict[str, str], tuple[str, ...]]]]:
    """assignment -> {student: (answers by grade id, the checks whose path it walks, each of which must earn nothing)}.
    (The seq2seq submissions that walk the stand-ins train no model: the translate check is not theirs.)"""
    untrained = {"train": ""}
    return {
        "soft-hard": {"global-stand-ins": (_global_stand_ins("soft-hard"), (
            "test-soft-attention", "test-sample-hard-attention", "test-straight-through"))},
        "three-stages": {"global-stand-ins": (_global_stand_ins("three-stages"), ("test-attention",))},
        "seq2seq-attention": {
            "global-stand-ins": ({**_global_stand_ins("seq2seq-attention"), **untrained},
                                 ("test-additive-attention", "test-general-attention")),
            "attribute-stand-ins": ({**_attention_modules(), **untrained}, ("test-decoder-step", "test-luong-step")),
            "translate": (_translate(), ("test-translate",)),
        },
        "multi-head": {"global-stand-ins": (_global_stand_ins("multi-head"), (
            "test-multi-head", "test-grouped-query", "test-cached-attention"))},
        "transformer": {"global-stand-ins": (_global_stand_ins("transformer"), ("test-rotary-cache",))},
        "attention-experiments": {"evidence": (_evidence(), ("test-evidence",))},
    }

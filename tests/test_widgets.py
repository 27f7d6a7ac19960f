"""The widgets' two computing sides: PyTorch in a live kernel, JavaScript in the page, and one pin between them.

- The live-kernel path: a widget driven from Python, or by update messages as the page sends them over
  its comm, holds (and sends the page) the scores, weights and output that ``attention_course.attention``
  gives for the setting.
- The page's path: the same JS file anywidget loads is imported by Node, run on 50 random settings, and
  compared with PyTorch; the alignment explorer's contexts likewise.
- Bad input fails where it is given, with a message that names it.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
import traitlets
from comm.base_comm import BaseComm

from attention_course.attention import AdditiveScore, attention, cosine_score, dot_score, scaled_dot_score
from attention_course.corpus import ToyTranslationCorpus
from attention_course.widgets import (
    AlignedSentence,
    AlignmentExplorer,
    AttentionPlayground,
    PlaygroundInputError,
    playground_attention,
    polar,
)
from attention_course.widgets.playground import SCORE_NAMES

ROOT = Path(__file__).resolve().parents[1]
WIDGETS = ROOT / "attention_course" / "widgets"
NODE = shutil.which("node")


def torch_reference(query_xy, keys_xy, values, score="dot", temperature=1.0, additive=None):
    """What the course's ``attention`` gives for one query, keys (K, 2) and scalar values, in float64."""
    queries = torch.tensor([[query_xy]], dtype=torch.float64)  # (1, 1, 2)
    keys = torch.tensor([keys_xy], dtype=torch.float64)  # (1, K, 2)
    values_t = torch.tensor(values, dtype=torch.float64).reshape(1, -1, 1)  # (1, K, 1)
    if score == "additive":
        module = AdditiveScore(2, 2, len(additive["w_v"])).double()
        with torch.no_grad():
            module.W_q.weight.copy_(torch.tensor(additive["W_q"], dtype=torch.float64))
            module.W_k.weight.copy_(torch.tensor(additive["W_k"], dtype=torch.float64))
            module.w_v.weight.copy_(torch.tensor([additive["w_v"]], dtype=torch.float64))
        score_fn = module
    else:
        score_fn = {"dot": dot_score, "scaled_dot": scaled_dot_score, "cosine": cosine_score}[score]
    with torch.no_grad():
        scores = score_fn(queries, keys)
        output, weights = attention(queries, keys, values_t, lambda q, k: score_fn(q, k) / temperature)
    return scores[0, 0].tolist(), weights[0, 0].tolist(), output.item()


def xy(vector):
    radians = math.radians(vector["angle"])
    return [vector["length"] * math.cos(radians), vector["length"] * math.sin(radians)]


def assert_shows(widget: AttentionPlayground, atol: float = 1e-12) -> None:
    """The widget's result traits are what ``attention`` computes for its inputs."""
    scores, weights, output = torch_reference(
        xy(widget.query), [xy(k) for k in widget.key_vectors], widget.values, widget.score,
        widget.temperature, widget.additive_weights,
    )
    assert widget.scores == pytest.approx(scores, abs=atol)
    assert widget.weights == pytest.approx(weights, abs=atol)
    assert widget.output == pytest.approx(output, abs=atol)


# ---------------------------------------------------------------------------------------------
# The live-kernel path.


def test_the_default_playground_is_chapter_4s_worked_example():
    widget = AttentionPlayground()
    assert widget.weights == pytest.approx([0.0900, 0.2447, 0.6652], abs=1e-4)
    assert widget.output == pytest.approx(25.752, abs=1e-3)
    assert_shows(widget)


def test_moving_the_query_and_keys_recomputes_with_pytorch():
    widget = AttentionPlayground()
    widget.query = {"angle": 150.0, "length": 1.5}
    assert_shows(widget)
    widget.key_vectors = [{"angle": 10.0, "length": 2.0}, {"angle": 170.0, "length": 0.5}, {"angle": -90.0, "length": 1.0}]
    assert_shows(widget)
    assert widget.weights.index(max(widget.weights)) == 1  # the key pointing the query's way


@pytest.mark.parametrize("score", SCORE_NAMES)
def test_every_score_function_and_temperature_matches_attention(score):
    widget = AttentionPlayground(score=score)
    assert_shows(widget)
    for temperature in (0.05, 0.3, 4.0, 60.0):
        widget.temperature = temperature
        assert_shows(widget)


def test_the_additive_weights_can_be_changed():
    widget = AttentionPlayground(score="additive")
    widget.additive_weights = {"W_q": [[1.0, -0.5], [0.2, 0.3], [0.0, 1.0]], "W_k": [[0.5, 0.5], [-1.0, 0.0], [0.3, 0.3]],
                               "w_v": [1.0, -2.0, 0.5]}
    assert_shows(widget)


def test_temperature_near_zero_is_hard_attention():
    widget = AttentionPlayground(temperature=0.01)
    assert widget.weights == pytest.approx([0.0, 0.0, 1.0], abs=1e-12)
    assert widget.output == 30.0  # exactly the value of the best key
    # And near-ties at that temperature stay finite: no NaN from exp overflow.
    widget.key_vectors = [polar(1.0, 2.0), polar(1.0, 2.0001), polar(-1.0, 0.0)]
    assert all(math.isfinite(w) for w in widget.weights) and sum(widget.weights) == pytest.approx(1.0)


def test_high_temperature_gives_the_plain_average():
    widget = AttentionPlayground(temperature=1e4)
    assert widget.weights == pytest.approx([1 / 3] * 3, abs=1e-3)
    assert widget.output == pytest.approx(20.0, abs=0.01)


def test_from_vectors_takes_x_y():
    widget = AttentionPlayground.from_vectors(query=[2.0, 0.0], keys=[[1.0, 0.0], [0.5, math.sqrt(3) / 2], [0.0, 1.0]],
                                              values=[1.0, 2.0, 3.0])
    assert widget.scores == pytest.approx([2.0, 1.0, 0.0], abs=1e-12)  # chapter 2's scores


class RecordingComm(BaseComm):
    """A comm that keeps what the kernel would send to the page."""

    def __init__(self, *args, **kwargs):
        self.sent = []
        super().__init__(*args, **kwargs)

    def publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys):
        self.sent.append((msg_type, data))


@pytest.fixture
def recording_comms(monkeypatch):
    import comm

    monkeypatch.setattr(comm, "create_comm", lambda *args, **kwargs: RecordingComm(*args, **kwargs))


def sent_results(widget) -> dict:
    """The last scores, weights and output the kernel sent to the page, merged over its update messages."""
    state = {}
    for msg_type, data in widget.comm.sent:
        if data and data.get("method") in {"update", "echo_update"}:
            state.update(data["state"])
        elif msg_type == "comm_open":
            state.update(data["state"])
    return {name: state[name] for name in ("scores", "weights", "output")}


def test_an_update_from_the_page_is_answered_with_pytorchs_numbers(recording_comms):
    # In JupyterLab, dragging the query sends an update message over the comm; the kernel recomputes
    # with PyTorch and sends the results back, and the page shows them.
    widget = AttentionPlayground()
    moved = {"angle": -30.0, "length": 2.5}
    widget.comm.handle_msg({"content": {"data": {"method": "update", "state": {"query": moved, "temperature": 0.5},
                                                 "buffer_paths": []}}, "buffers": []})
    assert widget.query == moved and widget.temperature == 0.5
    scores, weights, output = torch_reference(xy(moved), [xy(k) for k in widget.key_vectors], widget.values,
                                              temperature=0.5)
    sent = sent_results(widget)
    assert sent["scores"] == pytest.approx(scores, abs=1e-12)
    assert sent["weights"] == pytest.approx(weights, abs=1e-12)
    assert sent["output"] == pytest.approx(output, abs=1e-12)


def test_adding_a_key_from_the_page_sends_keys_and_values_together(recording_comms):
    widget = AttentionPlayground()
    keys = widget.key_vectors + [{"angle": 45.0, "length": 2.0}]
    widget.comm.handle_msg({"content": {"data": {"method": "update", "state": {"key_vectors": keys,
                                                                              "values": [10, 20, 30, 40]},
                                                 "buffer_paths": []}}, "buffers": []})
    assert len(sent_results(widget)["weights"]) == 4
    assert_shows(widget)


# ---------------------------------------------------------------------------------------------
# Bad input.


@pytest.mark.parametrize("temperature", [0.0, -1.0, float("nan"), float("inf")])
def test_a_temperature_that_is_not_positive_and_finite_is_refused(temperature):
    with pytest.raises(ValueError, match="temperature must be a finite number > 0"):
        AttentionPlayground(temperature=temperature)
    widget = AttentionPlayground()
    with pytest.raises(PlaygroundInputError, match="temperature"):
        widget.temperature = temperature
    assert widget.temperature == 1.0  # refused, not half-applied


def test_a_playground_needs_keys():
    with pytest.raises(ValueError, match="at least one key"):
        AttentionPlayground(key_vectors=[], values=[])
    with pytest.raises(ValueError, match="at least one key"):
        playground_attention(polar(1, 0), [], [])


def test_other_bad_inputs_name_what_is_wrong():
    with pytest.raises(ValueError, match="score must be one of"):
        AttentionPlayground(score="euclid")
    with pytest.raises(ValueError, match="length >= 0"):
        AttentionPlayground(query={"angle": 0.0, "length": -1.0})
    with pytest.raises(traitlets.TraitError, match="expected a dict"):
        AttentionPlayground(query=(1.0, 2.0))  # (angle, length) or (x, y)? Neither: say which, in a dict
    with pytest.raises(ValueError, match=r"query must be a dict \{'angle': degrees, 'length': number\}"):
        AttentionPlayground(query={"x": 1.0, "y": 2.0})
    with pytest.raises(ValueError, match="every key needs a value: got 3 keys and 2 values"):
        AttentionPlayground(values=[1.0, 2.0])
    with pytest.raises(ValueError, match=r"W_q \(h, 2\), W_k \(h, 2\) and w_v \(h,\)"):
        AttentionPlayground(additive_weights={"W_q": [[1.0, 0.0]], "W_k": [[1.0, 0.0]], "w_v": [1.0, 2.0]})


def test_keys_and_values_change_together_under_hold_trait_notifications():
    widget = AttentionPlayground()
    with widget.hold_trait_notifications():
        widget.key_vectors = [polar(1, 0), polar(0, 1)]
        widget.values = [1.0, -1.0]
    assert_shows(widget)


# ---------------------------------------------------------------------------------------------
# The page's computation, pinned to PyTorch's.


def run_node(module: Path, script: str, payload) -> object:
    """Run ``script`` as an ES module in Node with ``module``'s exports as ``m`` and ``payload`` as ``input``."""
    if NODE is None:
        pytest.fail("Node.js is required for the widget tests (apt-get install nodejs)")
    program = (
        f"import * as m from {json.dumps(module.as_uri())};\n"
        "const input = JSON.parse(require_stdin());\n"
        f"{script}\n"
    ).replace("require_stdin()", "(await new Promise((resolve) => { let text = ''; process.stdin.on('data', (c) => text += c); process.stdin.on('end', () => resolve(text)); }))")
    result = subprocess.run([NODE, "--input-type=module", "-e", program], input=json.dumps(payload),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def random_setting(rng: random.Random) -> dict:
    count = rng.randint(1, 6)
    hidden = rng.randint(1, 4)
    vector = lambda: {"angle": rng.uniform(-180, 180), "length": rng.choice([0.0, rng.uniform(0, 3)])}  # noqa: E731
    return {
        "query": vector(),
        "key_vectors": [vector() for _ in range(count)],
        "values": [rng.uniform(-50, 50) for _ in range(count)],
        "score": rng.choice(SCORE_NAMES),
        "temperature": 10 ** rng.uniform(-2, 2),
        "additive_weights": {
            "W_q": [[rng.uniform(-2, 2) for _ in range(2)] for _ in range(hidden)],
            "W_k": [[rng.uniform(-2, 2) for _ in range(2)] for _ in range(hidden)],
            "w_v": [rng.uniform(-2, 2) for _ in range(hidden)],
        },
    }


def test_the_pages_math_gives_pytorchs_numbers_on_50_random_settings():
    rng = random.Random(0)
    settings = [random_setting(rng) for _ in range(50)]
    from_js = run_node(WIDGETS / "playground.js", "console.log(JSON.stringify(input.map(m.attend)));", settings)
    assert len(from_js) == 50
    for setting, js in zip(settings, from_js):
        torch_side = playground_attention(setting["query"], setting["key_vectors"], setting["values"], setting["score"],
                                          setting["temperature"], setting["additive_weights"])
        scores, weights, output = torch_reference(xy(setting["query"]), [xy(k) for k in setting["key_vectors"]],
                                                  setting["values"], setting["score"], setting["temperature"],
                                                  setting["additive_weights"])
        assert torch_side["weights"] == pytest.approx(weights, abs=1e-12)  # the widget's path is attention()'s
        assert js["scores"] == pytest.approx(scores, abs=1e-6), setting
        assert js["weights"] == pytest.approx(weights, abs=1e-6), setting
        assert js["output"] == pytest.approx(output, abs=1e-6), setting


def test_the_pages_softmax_is_stable_and_hard_at_low_temperature():
    cases = [{"scores": [1e4, 0.0, -1e4], "t": 1.0}, {"scores": [3.0, 2.0, 1.0], "t": 0.01},
             {"scores": [2.0, 2.0, 0.0], "t": 0.01}, {"scores": [5.0], "t": 0.01}]
    got = run_node(WIDGETS / "playground.js", "console.log(JSON.stringify(input.map((c) => m.softmax(c.scores, c.t))));",
                   cases)
    assert got[0] == [1.0, 0.0, 0.0]
    assert got[1] == pytest.approx([1.0, 0.0, 0.0], abs=1e-40)
    assert got[2] == pytest.approx([0.5, 0.5, 0.0], abs=1e-80)  # a tie shares the weight
    assert got[3] == [1.0]


def test_the_pages_softmax_refuses_a_bad_temperature():
    got = run_node(WIDGETS / "playground.js", """
const out = [];
for (const t of input) { try { m.softmax([1, 2], t); out.push("no error"); } catch (e) { out.push(e.message); } }
try { m.attend({query: {angle: 0, length: 1}, key_vectors: [], values: [], score: "dot", temperature: 1}); }
catch (e) { out.push(e.message); }
console.log(JSON.stringify(out));""", [0, -1, None])
    assert got[:3] == ["temperature must be a finite number > 0, got " + t for t in ("0", "-1", "null")]
    assert got[3] == "the playground needs at least one key"


def test_the_pages_context_vectors_are_pytorchs():
    corpus = ToyTranslationCorpus(num_pairs=50, seed=1)
    generator = torch.Generator().manual_seed(0)
    learned = []
    for pair in corpus.train_pairs[:4]:  # learned-looking attention and 16-d "encoder states"
        logits = torch.randn(len(pair.target), len(pair.source), generator=generator)
        learned.append(AlignedSentence(pair.source, pair.target, torch.softmax(logits, dim=-1),
                                       torch.randn(len(pair.source), 16, generator=generator)))
    explorer = AlignmentExplorer(learned + [AlignedSentence.from_pair(p) for p in corpus.train_pairs[4:8]])
    records = [{"weights": r["weights"], "vectors": r["vectors"]} for r in explorer.sentences]
    from_js = run_node(WIDGETS / "alignment.js",
                       "console.log(JSON.stringify(input.map((r) => r.weights.map((row) => m.contextVector(row, r.vectors)))));",
                       records)
    for record, js in zip(explorer.sentences, from_js):
        assert torch.allclose(torch.tensor(js, dtype=torch.float64), torch.tensor(record["contexts"], dtype=torch.float64),
                              atol=1e-9)


# ---------------------------------------------------------------------------------------------
# The alignment explorer from Python.


def test_the_notes_example_and_its_contexts():
    explorer = AlignmentExplorer.notes_example()
    record = explorer.sentences[0]
    assert record["source"] == ["Tom", "Chase", "Jerry"] and record["target"] == ["汤姆", "追逐", "杰瑞"]
    assert record["weights"] == [[0.6, 0.2, 0.2], [0.2, 0.7, 0.1], [0.3, 0.2, 0.5]]
    weights = torch.tensor(record["weights"], dtype=torch.float64)
    vectors = torch.tensor(record["vectors"], dtype=torch.float64)
    for step in range(3):
        explorer.step = step
        assert explorer.context == pytest.approx((weights[step] @ vectors).tolist(), abs=1e-12)


def test_the_explorer_shows_the_corpus_alignment_matrices():
    corpus = ToyTranslationCorpus(num_pairs=100, seed=0)
    pairs = [pair for pair in corpus.train_pairs if pair.reordered][:5]
    explorer = AlignmentExplorer.from_pairs(pairs)
    for index, pair in enumerate(pairs):
        assert explorer.sentences[index]["weights"] == pair.alignment_matrix().double().tolist()
    explorer.sentence, explorer.step = 2, 1
    assert explorer.context == pytest.approx(explorer.sentences[2]["contexts"][1])


def test_encoder_states_are_projected_linearly():
    # The projection is linear, so the picture of C_i is the projection of C_i itself.
    generator = torch.Generator().manual_seed(3)
    states = torch.randn(5, 8, generator=generator, dtype=torch.float64)
    weights = torch.softmax(torch.randn(4, 5, generator=generator, dtype=torch.float64), dim=-1)
    explorer = AlignmentExplorer([AlignedSentence(list("abcde"), list("wxyz"), weights, states)])
    vectors = torch.tensor(explorer.sentences[0]["vectors"], dtype=torch.float64)  # (5, 2)
    plane = torch.linalg.lstsq(states, vectors).solution  # (8, 2): the linear map used
    assert torch.allclose(states @ plane, vectors, atol=1e-9)
    assert torch.allclose(torch.tensor(explorer.sentences[0]["contexts"], dtype=torch.float64), (weights @ states) @ plane, atol=1e-9)


def test_a_shorter_sentence_resets_the_step():
    corpus = ToyTranslationCorpus(num_pairs=100, seed=0)
    long_pair = max(corpus.train_pairs, key=lambda p: len(p.target))
    short_pair = min(corpus.train_pairs, key=lambda p: len(p.target))
    explorer = AlignmentExplorer.from_pairs([long_pair, short_pair])
    explorer.step = len(long_pair.target) - 1
    explorer.sentence = 1
    assert explorer.step == 0


def test_bad_alignment_data_names_what_is_wrong():
    with pytest.raises(ValueError, match="at least one sentence"):
        AlignmentExplorer([])
    with pytest.raises(ValueError, match=r"weights must have shape \(T, S\) = \(2, 3\)"):
        AlignmentExplorer([AlignedSentence(["a", "b", "c"], ["x", "y"], torch.ones(3, 2) / 2)])
    with pytest.raises(ValueError, match=r"row 1 \(y\) sums to 0.500000"):
        AlignmentExplorer([AlignedSentence(["a", "b"], ["x", "y"], [[0.5, 0.5], [0.25, 0.25]])])
    with pytest.raises(ValueError, match="non-negative"):
        AlignmentExplorer([AlignedSentence(["a", "b"], ["x"], [[1.5, -0.5]])])
    with pytest.raises(ValueError, match=r"states must have shape \(S, d\) = \(2, d\)"):
        AlignmentExplorer([AlignedSentence(["a", "b"], ["x"], [[0.5, 0.5]], torch.zeros(3, 4))])
    explorer = AlignmentExplorer.notes_example()
    with pytest.raises(ValueError, match=r"step must be an output step of sentence 0, in 0..2, got 3"):
        explorer.step = 3


def test_each_widget_module_runs_from_a_string_with_the_shared_code_inlined(tmp_path, monkeypatch):
    """A page runs a widget's module from a string, where `import ... from "./a11y.js"` cannot resolve:
    front_end.module inlines it, once, and refuses an import it cannot inline."""
    from attention_course.widgets import AlignmentExplorer, AttentionPlayground, front_end

    for widget, name in ((AttentionPlayground, "playground.js"), (AlignmentExplorer, "alignment.js")):
        source = (WIDGETS / name).read_text(encoding="utf-8")
        assert 'import { radioKeys } from "./a11y.js";' in source
        code = widget._esm
        assert "import " not in code and code.count("function radioKeys(") == 1
        assert code.count("export default") == 1  # the widget's own exports stay; the inlined ones do not
        assert widget._css.startswith((WIDGETS / "a11y.css").read_text(encoding="utf-8"))  # shared rules first
    monkeypatch.setattr(front_end, "HERE", tmp_path)
    (tmp_path / "w.js").write_text('import { x } from "https://example.org/x.js";\nexport default {};\n')
    with pytest.raises(ValueError, match="cannot inline"):
        front_end.module("w.js")

"""Chapter 10's trained Transformer in the page: the page's own engine (widgets/live_engine.js), run in Node on
the file the build exports (attention_course/live_model.py), gives PyTorch's greedy translation token for
token, and every attention map (each layer's and head's encoder self-attention, decoder self-attention and
cross-attention, and the per-step weights ``greedy_decode`` returns) within 1e-4, on held-out sentences and
on sentences longer than any the model was trained on; the comparison fails when one weight of the export is
changed; and the engine follows the model's settings (post-LN, learned positions or none) as well.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from attention_course.corpus import ToyTranslationCorpus, Vocab
from attention_course.live_model import export_text, export_transformer, read_export, write_export
from attention_course.model_cache import trained_model
from attention_course.transformer import build_transformer, translate_with_maps
from attention_course.transformer_length import MODEL
from live_sentences import one_thread, unseen_sentences

ENGINE = Path(__file__).resolve().parents[1] / "attention_course" / "widgets" / "live_engine.js"
WEIGHT_TOLERANCE = 1e-4
NODE = shutil.which("node")
KINDS = ("encoder", "decoder", "cross")

# Runs the engine as the page does (a classic script, then the exported file, in one global scope) on
# {"sentences": [[word, ...], ...]}. Prints, per sentence, the unknown words and the tokens; writes every
# number into one float32 file, sentence after sentence: the per-step weights (T, S), then for each kind
# ("encoder" S × S, "decoder" T × T, "cross" T × S), each layer, each head, the map row by row.
RUNNER = r"""
const fs = require("fs"), vm = require("vm");
const [engine, exported, input, numbers] = process.argv.slice(2);
vm.runInThisContext(fs.readFileSync(engine, "utf8"));
vm.runInThisContext(fs.readFileSync(exported, "utf8"));
const name = Object.keys(globalThis.attentionCourseLiveModels)[0];
const model = AttentionCourseLiveEngine.load(globalThis.attentionCourseLiveModels[name]);
const { sentences } = JSON.parse(fs.readFileSync(input, "utf8"));
const values = [];
const out = sentences.map((words) => {
  const { ids, unknown } = model.encodeWords(words);
  const { tokens, weights, maps } = model.translate(ids);
  for (const row of weights) values.push(...row);
  for (const kind of ["encoder", "decoder", "cross"])
    for (const layer of maps[kind]) for (const head of layer) for (const row of head) values.push(...row);
  return { unknown, tokens };
});
fs.writeFileSync(numbers, Buffer.from(Float32Array.from(values).buffer));
process.stdout.write(JSON.stringify(out));
"""

pytestmark = pytest.mark.skipif(NODE is None, reason="needs Node (apt: nodejs)")


@pytest.fixture(scope="module")
def chapter_model():
    """Chapter 10's corpus and trained Transformer, with the chapter's own recipe (book/10-transformer.md)."""
    corpus = ToyTranslationCorpus(num_pairs=2000, seed=0)
    settings = {**MODEL, "positions": "sinusoidal", "seed": 0}
    model, _ = trained_model(corpus, build=build_transformer, model_kwargs=settings, steps=500, seed=0, log_every=100)
    return corpus, model


@pytest.fixture(scope="module")
def sentences(chapter_model):
    """200 sentences the model never trained on (tests/live_sentences.py)."""
    corpus, _ = chapter_model
    return unseen_sentences(corpus)


def pytorch_reference(model, corpus, sentences) -> list[dict]:
    """Per sentence, what PyTorch computes: the tokens ``greedy_decode`` writes (up to and with <eos>) and its
    per-step weights (T, S); and ``translate_with_maps``'s maps, {kind: [one (n_h, rows, columns) per layer]}."""
    results = []
    with one_thread():
        for words in sentences:
            ids = corpus.source_vocab.encode(words)
            tokens, weights = model.greedy_decode(torch.tensor([ids]), torch.tensor([len(ids)]))
            tokens = tokens[0].tolist()
            length = tokens.index(Vocab.eos_id) + 1 if Vocab.eos_id in tokens else len(tokens)
            written, maps = translate_with_maps(model, corpus, " ".join(words))
            assert corpus.target_vocab.decode(tokens[:length], keep_special=True).split()[: len(written)] == written
            results.append({"tokens": tokens[:length], "weights": weights[0, :length], "maps": maps})
    return results


@pytest.fixture(scope="module")
def pytorch_results(chapter_model, sentences):
    corpus, model = chapter_model
    return pytorch_reference(model, corpus, sentences)


def run_engine(tmp_path: Path, export_file: Path, sentences, layers: int, heads: int) -> list[dict]:
    """The engine's results, shaped as ``pytorch_reference``'s (float32 tensors)."""
    runner = tmp_path / "runner.js"
    runner.write_text(RUNNER)
    data = tmp_path / "sentences.json"
    data.write_text(json.dumps({"sentences": sentences}))
    numbers = tmp_path / "numbers.f32"
    done = subprocess.run([NODE, str(runner), str(ENGINE), str(export_file), str(data), str(numbers)],
                          capture_output=True, text=True, timeout=120, check=True)
    values = torch.from_numpy(np.fromfile(numbers, dtype="<f4"))
    results, at = [], 0

    def take(*shape):
        nonlocal at
        size = int(np.prod(shape))
        taken = values[at: at + size].reshape(shape)
        at += size
        return taken

    for words, result in zip(sentences, json.loads(done.stdout), strict=True):
        S, T = len(words), len(result["tokens"])
        weights = take(T, S)
        shapes = {"encoder": (heads, S, S), "decoder": (heads, T, T), "cross": (heads, T, S)}
        maps = {kind: [take(*shapes[kind]) for _ in range(layers)] for kind in KINDS}
        results.append({**result, "weights": weights, "maps": maps})
    assert at == len(values)
    return results


def differences(pytorch_results, sentences, engine_results) -> list[str]:
    """Every way the engine's results differ from PyTorch's: a token, or a weight of any map off by more than 1e-4."""
    found = []
    for words, ours, theirs in zip(sentences, engine_results, pytorch_results, strict=True):
        sentence = " ".join(words)
        if ours["tokens"] != theirs["tokens"]:
            found.append(f"{sentence!r}: engine {ours['tokens']}, PyTorch {theirs['tokens']}")
            continue
        gap = (ours["weights"] - theirs["weights"]).abs().max().item()
        if gap > WEIGHT_TOLERANCE:
            found.append(f"{sentence!r}: greedy_decode's per-step weights differ by {gap:.2e}")
        for kind in KINDS:
            assert len(ours["maps"][kind]) == len(theirs["maps"][kind])
            for layer, (a, b) in enumerate(zip(ours["maps"][kind], theirs["maps"][kind])):
                gap = (a - b).abs().max().item()
                if a.shape != b.shape or gap > WEIGHT_TOLERANCE:
                    found.append(f"{sentence!r}: {kind} layer {layer + 1}: shape {tuple(a.shape)} vs {tuple(b.shape)}, "
                                 f"largest difference {gap:.2e}")
    return found


def _sizes(model) -> tuple[int, int]:
    return len(model.decoder_layers), model.decoder_layers[0].self_attention.num_heads


@pytest.fixture(scope="module")
def exported_file(chapter_model, tmp_path_factory):
    corpus, model = chapter_model
    folder = tmp_path_factory.mktemp("live")
    return folder / write_export(model, corpus, folder)


def test_the_pages_engine_translates_and_attends_exactly_as_pytorch(chapter_model, sentences, pytorch_results,
                                                                     exported_file, tmp_path):
    corpus, model = chapter_model
    results = run_engine(tmp_path, exported_file, sentences, *_sizes(model))
    assert all(result["unknown"] == [] for result in results)
    assert differences(pytorch_results, sentences, results) == []
    # Every map was compared: 2 layers × 4 heads of three kinds, for every sentence.
    assert _sizes(model) == (2, 4)
    # The engine's translations are the chapter's: "Tom chase Jerry" → 汤姆 追逐 杰瑞.
    tom = run_engine(tmp_path, exported_file, [["Tom", "chase", "Jerry"]], *_sizes(model))[0]
    assert [corpus.target_vocab.tokens[t] for t in tom["tokens"]] == ["汤姆", "追逐", "杰瑞", "<eos>"]


def test_one_changed_weight_is_caught(chapter_model, sentences, pytorch_results, exported_file, tmp_path):
    """The comparison is not blind: change one weight of the first encoder layer's queries by 0.5 and the
    maps the engine computes, hence the comparison, change."""
    _, model = chapter_model
    name, exported = read_export(exported_file.read_text(encoding="utf-8"))
    values = np.frombuffer(base64.b64decode(exported["data"]), dtype="<f4").copy()
    offset = next(off for tensor, _, off in exported["tensors"] if tensor == "encoder_layers.0.self_attention.W_q.weight")
    values[offset] += 0.5  # one weight of 40 000
    changed = tmp_path / "perturbed.js"
    changed.write_text(export_text({**exported, "data": base64.b64encode(values.tobytes()).decode("ascii")}, name),
                       encoding="utf-8")
    found = differences(pytorch_results, sentences, run_engine(tmp_path, changed, sentences, *_sizes(model)))
    assert any("encoder layer 1" in difference for difference in found)


@pytest.mark.parametrize("settings", [{"norm_first": False, "positions": "learned"},
                                      {"norm_first": True, "positions": "none"}], ids=["post-LN-learned", "pre-LN-none"])
def test_the_engine_follows_the_models_settings(chapter_model, sentences, settings, tmp_path):
    """Untrained models with the other settings the export allows: the same tokens and maps as PyTorch."""
    corpus, _ = chapter_model
    model = build_transformer(corpus, seed=5, d_model=16, num_heads=2, num_layers=2, d_ff=24, **settings).eval()
    chosen = sentences[:5] + sentences[100:105]
    exported = tmp_path / write_export(model, corpus, tmp_path)
    results = run_engine(tmp_path, exported, chosen, *_sizes(model))
    assert differences(pytorch_reference(model, corpus, chosen), chosen, results) == []


def test_unknown_words_are_named_not_replaced(chapter_model, exported_file, tmp_path):
    _, model = chapter_model
    result = run_engine(tmp_path, exported_file, [["tom", "chase", "Garfield"]], *_sizes(model))[0]
    assert result["unknown"] == ["tom", "Garfield"]


def test_the_export_is_the_models_weights_in_float32_and_names_its_settings(chapter_model):
    corpus, model = chapter_model
    exported = export_transformer(model, corpus)
    count = sum(p.numel() for p in model.parameters())
    assert len(exported["data"]) * 3 // 4 - count * 4 in range(0, 3)
    assert exported["kind"] == "transformer" and exported["source_vocab"] == corpus.source_vocab.tokens
    assert exported["sizes"] == {"d_model": 32, "heads": 4, "encoder_layers": 2, "decoder_layers": 2, "d_ff": 64,
                                 "norm_first": True, "positions": "sinusoidal"}
    with pytest.raises(ValueError, match="rope"):
        export_transformer(build_transformer(corpus, positions="rope", d_model=16, num_heads=2, d_ff=24), corpus)

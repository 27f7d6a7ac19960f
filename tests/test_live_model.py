"""Chapter 6's trained model in the page: the page's own engine (widgets/live_engine.js), run in Node on
the file the build exports (attention_course/live_model.py), gives PyTorch's greedy translation token for
token and its attention weights within 1e-4, on held-out sentences and on sentences longer than any the
model was trained on; and the comparison fails when one weight of the export is changed."""

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
from attention_course.live_model import export_seq2seq, export_text, read_export, write_export
from attention_course.model_cache import trained_model
from live_sentences import one_thread, unseen_sentences

ENGINE = Path(__file__).resolve().parents[1] / "attention_course" / "widgets" / "live_engine.js"
WEIGHT_TOLERANCE = 1e-4
NODE = shutil.which("node")

# Runs the engine as the page does (a classic script, then the exported file, in one global scope) on
# {"sentences": [[word, ...], ...]}; prints, per sentence, the unknown words, the tokens and the weights.
RUNNER = r"""
const fs = require("fs"), vm = require("vm");
const [engine, exported, input] = process.argv.slice(2);
vm.runInThisContext(fs.readFileSync(engine, "utf8"));
vm.runInThisContext(fs.readFileSync(exported, "utf8"));
const name = Object.keys(globalThis.attentionCourseLiveModels)[0];
const model = AttentionCourseLiveEngine.load(globalThis.attentionCourseLiveModels[name]);
const { sentences } = JSON.parse(fs.readFileSync(input, "utf8"));
const out = sentences.map((words) => {
  const { ids, unknown } = model.encodeWords(words);
  const { tokens, weights } = model.translate(ids);
  return { unknown, tokens, weights };
});
process.stdout.write(JSON.stringify(out));
"""

pytestmark = pytest.mark.skipif(NODE is None, reason="needs Node (apt: nodejs)")


@pytest.fixture(scope="module")
def chapter_model():
    """Chapter 6's corpus and trained model, with the chapter's own recipe (book/06-attention-decoder.md)."""
    corpus = ToyTranslationCorpus(num_pairs=2000, seed=0)
    model, _ = trained_model(corpus, model_kwargs={"attention": True, "seed": 0}, steps=500, seed=0, log_every=100)
    return corpus, model


@pytest.fixture(scope="module")
def sentences(chapter_model):
    """200 sentences the model never trained on (tests/live_sentences.py)."""
    corpus, _ = chapter_model
    return unseen_sentences(corpus)


@pytest.fixture(scope="module")
def pytorch_results(chapter_model, sentences):
    """PyTorch's greedy decoding of every sentence, batched (the encoder packs, so a sentence decodes the
    same alone or beside longer ones): per sentence (tokens up to and with <eos>, weights (T, S))."""
    corpus, model = chapter_model
    results = []
    with one_thread():
        for start in range(0, len(sentences), 50):
            chunk = sentences[start:start + 50]
            lengths = torch.tensor([len(words) for words in chunk])  # (B,)
            source = torch.full((len(chunk), int(lengths.max())), Vocab.pad_id)  # (B, S)
            for row, words in enumerate(chunk):
                source[row, : len(words)] = torch.tensor(corpus.source_vocab.encode(words))
            tokens, weights = model.greedy_decode(source, lengths)
            for row, words, row_weights in zip(tokens.tolist(), chunk, weights):
                row = row[: 2 * len(words) + 2]
                length = row.index(Vocab.eos_id) + 1 if Vocab.eos_id in row else len(row)
                results.append((row[:length], row_weights[:length, : len(words)]))
    return results


def run_engine(tmp_path: Path, export_file: Path, sentences) -> list[dict]:
    runner = tmp_path / "runner.js"
    runner.write_text(RUNNER)
    data = tmp_path / "sentences.json"
    data.write_text(json.dumps({"sentences": sentences}))
    done = subprocess.run([NODE, str(runner), str(ENGINE), str(export_file), str(data)],
                          capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout)


def differences(pytorch_results, sentences, engine_results) -> list[str]:
    """Every way the engine's results differ from PyTorch's: a token, or a weight off by more than 1e-4."""
    found = []
    for words, (tokens, weights), result in zip(sentences, pytorch_results, engine_results, strict=True):
        if result["tokens"] != tokens:
            found.append(f"{' '.join(words)!r}: engine {result['tokens']}, PyTorch {tokens}")
            continue
        gap = (torch.tensor(result["weights"], dtype=torch.float32) - weights).abs().max().item()
        if gap > WEIGHT_TOLERANCE:
            found.append(f"{' '.join(words)!r}: attention weights differ by {gap:.2e}")
    return found


@pytest.fixture(scope="module")
def exported_file(chapter_model, tmp_path_factory):
    corpus, model = chapter_model
    folder = tmp_path_factory.mktemp("live")
    return folder / write_export(model, corpus, folder)


def test_the_pages_engine_translates_exactly_as_pytorch(chapter_model, sentences, pytorch_results, exported_file, tmp_path):
    corpus, _ = chapter_model
    results = run_engine(tmp_path, exported_file, sentences)
    assert all(result["unknown"] == [] for result in results)
    assert differences(pytorch_results, sentences, results) == []
    # The engine's translations are the chapter's: "Tom chase Jerry" → 汤姆 追逐 杰瑞.
    tom = run_engine(tmp_path, exported_file, [["Tom", "chase", "Jerry"]])[0]
    assert [corpus.target_vocab.tokens[t] for t in tom["tokens"]] == ["汤姆", "追逐", "杰瑞", "<eos>"]


def test_one_changed_weight_is_caught(chapter_model, sentences, pytorch_results, exported_file, tmp_path):
    """The comparison is not blind: raise one output bias (of the word PyTorch writes first for the first
    sentence's rival) and the engine's translation, hence the comparison, changes."""
    corpus, _ = chapter_model
    name, exported = read_export(exported_file.read_text(encoding="utf-8"))
    perturbed = {**exported}
    values = np.frombuffer(base64.b64decode(exported["data"]), dtype="<f4").copy()
    offset = next(off for tensor, _, off in exported["tensors"] if tensor == "decoder.output.bias")
    values[offset + corpus.target_vocab.token_ids["老鼠"]] += 0.5  # one weight of 70 000, by 0.5
    perturbed["data"] = base64.b64encode(values.astype("<f4").tobytes()).decode("ascii")
    changed = tmp_path / "perturbed.js"
    changed.write_text(export_text(perturbed, name), encoding="utf-8")
    results = run_engine(tmp_path, changed, sentences)
    assert differences(pytorch_results, sentences, results) != []


def test_unknown_words_are_named_not_replaced(exported_file, tmp_path):
    result = run_engine(tmp_path, exported_file, [["tom", "chase", "Garfield"]])[0]
    assert result["unknown"] == ["tom", "Garfield"]


def test_the_export_is_the_models_weights_in_float32(chapter_model):
    corpus, model = chapter_model
    exported = export_seq2seq(model, corpus)
    count = sum(p.numel() for p in model.parameters())
    assert len(exported["data"]) * 3 // 4 - count * 4 in range(0, 3)
    assert exported["source_vocab"] == corpus.source_vocab.tokens
    assert exported["target_vocab"] == corpus.target_vocab.tokens

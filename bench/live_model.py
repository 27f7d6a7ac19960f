"""Which engine runs chapter 6's trained model in the page: ours (widgets/live_engine.js), onnxruntime-web
1.30 or TensorFlow.js 4.22. Bytes a reader downloads, time per generated step, and exactness against PyTorch.

    .venv/bin/python bench/live_model.py [--scratch /tmp/live-bench] [--sentences 60]
    .venv/bin/python bench/live_model.py --model transformer [--sentences 60]

``--model transformer`` measures chapter 10's trained Transformer in our engine only: the bytes of the
engine and the exported weights (raw and gzipped), the time to load them, ms per generated step (p50, p95)
and exactness against PyTorch's greedy_decode (tokens, and the per-step weights). The page's budget is a
frame, 16 ms per step at p95. A run on the 2-core build machine (200 sentences, 3075 steps, load average
2.7-2.9): 0.117 ms per step at the median and 0.192 ms at p95, the encoder's pass 2.6 ms per sentence at the
median (5.4 ms at p95), 4 ms to decode the weights; 272,672 bytes for engine and weights (193,003 gzipped),
nearly all of it the weights; 200/200 sentences with PyTorch's tokens, per-step weights within 7.2e-7.

Measurement-only packages stay out of the project (install them once into the scratch folder):

    pip install --target SCRATCH/py onnx
    cd SCRATCH && npm init -y && npm install onnxruntime-web@1.30.0 \
        && npm pack @tensorflow/tfjs@4.22.0 @tensorflow/tfjs-backend-wasm@4.22.0

ORT runs the model as two ONNX graphs exported from the same weights (the encoder, and one decoder step),
with its WebAssembly backend in Node, one thread; ours runs the file the book exports. Both decode greedily,
one step per call, timed around that call. TF.js is counted by bytes only (its script and its WebAssembly
backend). Every figure is printed with the load average of the machine at that moment: these machines are
shared, and a step time means little without it.

The choice (bench/results/live_model.txt, a run on the 2-core build machine at load average 6-10): our
engine. Both engines gave PyTorch's tokens on every sentence, with weights within 3e-6, and both take
about 0.13 ms per step at the median, far below the 16 ms a frame allows; but onnxruntime-web makes
the reader download 14.6 MB (3.9 MB gzipped, over the 3 MB budget by itself) of WebAssembly runtime
and takes 0.4-1.7 s to create its sessions, against 384 kB (285 kB gzipped, nearly all of it the
weights) and 5-30 ms for ours; TensorFlow.js with its WebAssembly backend is 2.0 MB (0.5 MB gzipped)
before any weights. A GRU encoder and an attention GRU decoder are a few matrix-vector products per
step: a page can hold them in 200 lines that the tests pin to PyTorch.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from attention_course.corpus import ToyTranslationCorpus, Vocab, generate_pairs  # noqa: E402
from attention_course.live_model import write_export  # noqa: E402
from attention_course.model_cache import trained_model  # noqa: E402
from attention_course.transformer import build_transformer  # noqa: E402
from attention_course.transformer_length import MODEL  # noqa: E402

ENGINE = ROOT / "attention_course" / "widgets" / "live_engine.js"


def load() -> str:
    return "load average %.2f %.2f %.2f" % os.getloadavg()


def report(label: str, value: str) -> None:
    print(f"{label:<58} {value:<34} [{load()}]", flush=True)


def gz(data: bytes) -> int:
    return len(gzip.compress(data, 9))


class EncoderGraph(nn.Module):
    """Source ids (1, S) → (states (1, S, d_h), H_0 (1, d_h)): one sentence, so no packing is needed."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        states, final = self.model.encoder.rnn(self.model.encoder.embedding(ids))
        return states, torch.tanh(self.model.decoder.init_state(final[-1]))


class StepGraph(nn.Module):
    """One decoder step, as AttentionDecoder.step: (y_{i-1} (1,), H_{i-1} (1, d_h), states (1, S, d_h))
    → (logits (1, vocab), H_i (1, d_h), weights (1, S))."""

    def __init__(self, model):
        super().__init__()
        self.d = model.decoder

    def forward(self, previous, hidden, states):
        score = self.d.score
        features = torch.tanh(score.W_q(hidden).unsqueeze(1) + score.W_k(states))  # (1, S, A)
        weights = torch.softmax(score.w_v(features).squeeze(-1), -1)  # (1, S)
        context = torch.bmm(weights.unsqueeze(1), states).squeeze(1)
        embedded = self.d.embedding(previous)
        hidden = self.d.cell(torch.cat([embedded, context], -1), hidden)
        return self.d.output(torch.cat([hidden, context, embedded], -1)), hidden, weights


NODE_BENCH = r"""
import fs from "fs"; import vm from "vm"; import { createRequire } from "module";
const [mode, engineOrScratch, modelOrFolder, input] = process.argv.slice(2);
const { sentences } = JSON.parse(fs.readFileSync(input, "utf8"));
const times = [], results = [];
if (mode === "own") {
  vm.runInThisContext(fs.readFileSync(engineOrScratch, "utf8"));
  vm.runInThisContext(fs.readFileSync(modelOrFolder, "utf8"));
  const start = performance.now();
  const model = AttentionCourseLiveEngine.load(Object.values(globalThis.attentionCourseLiveModels)[0]);
  const loadMs = performance.now() - start;
  const startTimes = [];
  for (const ids of sentences) {
    const s0 = performance.now(); const decoder = model.start(ids); startTimes.push(performance.now() - s0);
    const tokens = [], weights = [];
    for (;;) { const t0 = performance.now(); const step = decoder.next(); const t1 = performance.now();
      if (!step) break; times.push(t1 - t0); tokens.push(step.token); weights.push(Array.from(step.weights)); }
    results.push({ tokens, weights });
  }
  process.stdout.write(JSON.stringify({ times, results, loadMs, startTimes }));
} else {
  const require = createRequire(engineOrScratch + "/package.json");
  const ort = require("onnxruntime-web");
  ort.env.wasm.numThreads = 1;
  const start = performance.now();
  const encoder = await ort.InferenceSession.create(modelOrFolder + "/encoder.onnx");
  const step = await ort.InferenceSession.create(modelOrFolder + "/step.onnx");
  const loadMs = performance.now() - start;
  for (const ids of sentences) {
    const enc = await encoder.run({ ids: new ort.Tensor("int64", BigInt64Array.from(ids.map(BigInt)), [1, ids.length]) });
    let hidden = enc.h0, previous = 1n; const tokens = [], weights = [];
    while (tokens.length < 2 * ids.length + 2) {
      const t0 = performance.now();
      const out = await step.run({ previous: new ort.Tensor("int64", BigInt64Array.from([previous]), [1]), hidden, states: enc.states });
      const logits = out.logits.data; let best = 0;
      for (let v = 1; v < logits.length; v++) if (logits[v] > logits[best]) best = v;
      times.push(performance.now() - t0);
      tokens.push(best); weights.push(Array.from(out.weights.data)); hidden = out.hidden_out; previous = BigInt(best);
      if (best === 2) break;
    }
    results.push({ tokens, weights });
  }
  process.stdout.write(JSON.stringify({ times, results, loadMs }));
}
"""


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def exactness(results, reference) -> str:
    same = sum(r["tokens"] == tokens for r, (tokens, _) in zip(results, reference))
    gap = max((torch.tensor(r["weights"]) - w).abs().max().item()
              for r, (tokens, w) in zip(results, reference) if r["tokens"] == tokens)
    return f"{same}/{len(reference)} same tokens, max |Δa| {gap:.1e}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/live-bench"))
    parser.add_argument("--sentences", type=int, default=60)
    parser.add_argument("--model", choices=["seq2seq", "transformer"], default="seq2seq",
                        help="chapter 6's model (our engine against the others) or chapter 10's (our engine)")
    args = parser.parse_args()
    torch.set_num_threads(1)

    corpus = ToyTranslationCorpus(num_pairs=2000, seed=0)
    if args.model == "transformer":
        settings = {**MODEL, "positions": "sinusoidal", "seed": 0}  # chapter 10's recipe
        model, _ = trained_model(corpus, build=build_transformer, model_kwargs=settings, steps=500, seed=0, log_every=100)
    else:
        model, _ = trained_model(corpus, model_kwargs={"attention": True, "seed": 0}, steps=500, seed=0, log_every=100)
    half = args.sentences // 2
    sentences = [list(p.source) for p in corpus.held_out_pairs[:half]]
    sentences += [list(p.source) for p in generate_pairs(args.sentences - half, seed=12345, min_clauses=4, max_clauses=5)]
    ids = [corpus.source_vocab.encode(s) for s in sentences]
    reference = []
    for row in ids:
        tokens, weights = model.greedy_decode(torch.tensor([row]), torch.tensor([len(row)]), max_len=2 * len(row) + 2)
        tokens = tokens[0].tolist()
        length = tokens.index(Vocab.eos_id) + 1 if Vocab.eos_id in tokens else len(tokens)
        reference.append((tokens[:length], weights[0, :length]))
    steps = sum(len(t) for t, _ in reference)
    chapter = "chapter 10's Transformer" if args.model == "transformer" else "chapter 6's model"
    print(f"{chapter}, {args.sentences} sentences ({half} held-out, the rest 4-5 clauses), {steps} greedy steps")

    work = Path(tempfile.mkdtemp(prefix="live-bench-"))
    (work / "bench.mjs").write_text(NODE_BENCH)
    (work / "ids.json").write_text(json.dumps({"sentences": ids}))

    def node(*argv):
        done = subprocess.run(["node", str(work / "bench.mjs"), *map(str, argv), str(work / "ids.json")],
                              capture_output=True, text=True, check=True, timeout=600)
        return json.loads(done.stdout)

    # Ours.
    exported = work / write_export(model, corpus, work)
    engine_bytes, model_bytes = ENGINE.read_bytes(), exported.read_bytes()
    report("ours: engine + weights, bytes (gzip)",
           f"{len(engine_bytes) + len(model_bytes):,} ({gz(engine_bytes) + gz(model_bytes):,})")
    own = node("own", ENGINE, exported)
    report("ours: load (decode the weights), ms", f"{own['loadMs']:.1f}")
    report("ours: ms per generated step, p50 / p95",
           f"{percentile(own['times'], 50):.3f} / {percentile(own['times'], 95):.3f}")
    report("ours: encoder pass (start), ms per sentence, p50 / p95",
           f"{percentile(own['startTimes'], 50):.3f} / {percentile(own['startTimes'], 95):.3f}")
    report("ours: exactness vs PyTorch", exactness(own["results"], reference))
    if args.model == "transformer":
        return  # the other engines were measured on chapter 6's model, which chose ours

    # onnxruntime-web 1.30.
    ort_dist = args.scratch / "node_modules" / "onnxruntime-web" / "dist"
    if ort_dist.is_dir():
        sys.path.append(str(args.scratch / "py"))  # onnx, for torch.onnx.export; appended: the venv's numpy wins
        S = 5
        torch.onnx.export(EncoderGraph(model), (torch.tensor([[4] * S]),), work / "encoder.onnx",
                          input_names=["ids"], output_names=["states", "h0"], dynamic_axes={"ids": {1: "S"}, "states": {1: "S"}},
                          opset_version=17, dynamo=False)
        H = model.encoder.hidden_dim
        torch.onnx.export(StepGraph(model), (torch.tensor([1]), torch.zeros(1, H), torch.zeros(1, S, H)), work / "step.onnx",
                          input_names=["previous", "hidden", "states"], output_names=["logits", "hidden_out", "weights"],
                          dynamic_axes={"states": {1: "S"}, "weights": {1: "S"}}, opset_version=17, dynamo=False)
        page = [ort_dist / "ort.wasm.min.js", ort_dist / "ort-wasm-simd-threaded.mjs", ort_dist / "ort-wasm-simd-threaded.wasm"]
        graphs = [work / "encoder.onnx", work / "step.onnx"]
        raw = sum(p.stat().st_size for p in page + graphs)
        zipped = sum(gz(p.read_bytes()) for p in page + graphs)
        report("onnxruntime-web 1.30 (wasm): runtime + graphs, bytes (gzip)", f"{raw:,} ({zipped:,})")
        ort = node("ort", args.scratch, work)
        report("onnxruntime-web: create sessions, ms", f"{ort['loadMs']:.1f}")
        report("onnxruntime-web: ms per generated step, p50 / p95",
               f"{percentile(ort['times'], 50):.3f} / {percentile(ort['times'], 95):.3f}")
        report("onnxruntime-web: exactness vs PyTorch", exactness(ort["results"], reference))
    else:
        print(f"onnxruntime-web: not measured ({ort_dist} missing; see the docstring)")

    # TensorFlow.js 4.22: bytes of the script and of its WebAssembly backend (the graphs would come on top).
    tfjs = args.scratch / "tensorflow-tfjs-4.22.0.tgz"
    wasm = args.scratch / "tensorflow-tfjs-backend-wasm-4.22.0.tgz"
    if tfjs.is_file() and wasm.is_file():
        wanted = {tfjs: ["package/dist/tf.min.js"],
                  wasm: ["package/dist/tf-backend-wasm.min.js", "package/dist/tfjs-backend-wasm-simd.wasm"]}
        raw = zipped = 0
        for archive, names in wanted.items():
            with tarfile.open(archive) as tar:
                for name in names:
                    data = tar.extractfile(name).read()
                    raw, zipped = raw + len(data), zipped + gz(data)
        report("TensorFlow.js 4.22 + wasm backend (no weights), bytes (gzip)", f"{raw:,} ({zipped:,})")
    else:
        print(f"TensorFlow.js: not measured ({tfjs} missing; see the docstring)")


if __name__ == "__main__":
    main()

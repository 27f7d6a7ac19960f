/* The live explorer's engine: chapter 6's trained model (attention_course/seq2seq.py), run in the page.
 *
 * A classic script, so that a page opened from file:// can load it (and the exported weights, which
 * attention_course/live_model.py writes as a script too); Node runs the same file in the tests
 * (tests/test_live_model.py), which compare it with PyTorch token for token. It defines
 * globalThis.AttentionCourseLiveEngine = { load(exported) -> model }.
 *
 * The forward pass, in the notation of seq2seq.py (d_h hidden size, S source words):
 *   encoder: a GRU over the source embeddings, h_1 … h_S, C = h_S;
 *   H_0 = tanh(W C + b);
 *   step i: s_ij = w_vᵀ tanh(W_q H_{i-1} + W_k h_j), a_i = softmax_j s_ij (hidden words take no part),
 *           C_i = Σ_j a_ij h_j, H_i = GRUCell([emb(y_{i-1}); C_i], H_{i-1}),
 *           logits = W_o [H_i; C_i; emb(y_{i-1})] + b_o, y_i = the first arg-max (greedy, as PyTorch).
 * Weights are float32; sums are taken in double precision (JavaScript's numbers). */
(function (root) {
  "use strict";

  function decodeBase64(text) {
    if (typeof atob === "function") {
      const binary = atob(text);
      const bytes = new Uint8Array(binary.length);
      for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
      return bytes;
    }
    return new Uint8Array(Buffer.from(text, "base64"));
  }

  function readTensors(exported) {
    const bytes = decodeBase64(exported.data);
    const all = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
    const tensors = {};
    for (const [name, shape, offset] of exported.tensors) {
      const size = shape.reduce((a, b) => a * b, 1);
      tensors[name] = { shape, values: all.subarray(offset, offset + size) };
    }
    return tensors;
  }

  // out[r] = Σ_c W[r, c] x[c] (+ bias[r]) for W (rows, cols) stored row-major; x may be read from `at`.
  function matVec(W, x, bias) {
    const [rows, cols] = W.shape;
    const out = new Float64Array(rows);
    const w = W.values;
    for (let r = 0; r < rows; r++) {
      let sum = bias ? bias.values[r] : 0;
      const base = r * cols;
      for (let c = 0; c < cols; c++) sum += w[base + c] * x[c];
      out[r] = sum;
    }
    return out;
  }

  const sigmoid = (x) => 1 / (1 + Math.exp(-x));

  // PyTorch's GRU cell (gates in the order r, z, n).
  function gruCell(w_ih, w_hh, b_ih, b_hh, x, h) {
    const size = h.length;
    const gi = matVec(w_ih, x, b_ih);
    const gh = matVec(w_hh, h, b_hh);
    const next = new Float64Array(size);
    for (let k = 0; k < size; k++) {
      const r = sigmoid(gi[k] + gh[k]);
      const z = sigmoid(gi[size + k] + gh[size + k]);
      const n = Math.tanh(gi[2 * size + k] + r * gh[2 * size + k]);
      next[k] = (1 - z) * n + z * h[k];
    }
    return next;
  }

  function row(table, index) {
    const cols = table.shape[1];
    return table.values.subarray(index * cols, (index + 1) * cols);
  }

  function load(exported) {
    if (exported.format !== 1 || exported.kind !== "seq2seq-attention") {
      throw new Error(`not a model this engine runs: format ${exported.format}, kind ${exported.kind}`);
    }
    const t = readTensors(exported);
    const hidden = exported.sizes.hidden;
    const special = exported.special;
    const sourceIds = new Map(exported.source_vocab.map((word, id) => [word, id]));

    /** The source's words as ids, and the words the vocabulary lacks (never silently <unk>). */
    function encodeWords(words) {
      const unknown = words.filter((w) => !sourceIds.has(w) || sourceIds.get(w) < 4);
      return { ids: words.map((w) => (sourceIds.has(w) ? sourceIds.get(w) : special.unk)), unknown };
    }

    function encode(ids) {
      let h = new Float64Array(hidden);
      const states = [];
      for (const id of ids) {
        h = gruCell(t["encoder.w_ih"], t["encoder.w_hh"], t["encoder.b_ih"], t["encoder.b_hh"], row(t["encoder.embedding"], id), h);
        states.push(h);
      }
      return states;
    }

    /** A decoder over source ids: each next() runs one step, returns {token, weights, logits} or null after <eos>.
     * options.hidden: source positions attention may not look at; options.forced: {step: token id}. */
    function start(ids, options = {}) {
      if (!ids.length) throw new Error("cannot translate an empty sentence");
      const masked = new Set(options.hidden || []);
      const forced = options.forced || {};
      const maxLen = options.maxLen ?? 2 * ids.length + 2;
      const states = encode(ids);
      const final = states[states.length - 1];
      const init = matVec(t["decoder.init.weight"], final, t["decoder.init.bias"]);
      let H = init.map(Math.tanh);
      const keys = states.map((h) => matVec(t["decoder.W_k"], h));  // W_k h_j, once per sentence
      const w_v = t["decoder.w_v"].values;
      let previous = special.bos;
      let produced = 0;
      let done = false;
      return {
        states,
        next() {
          if (done || produced >= maxLen) return null;
          const query = matVec(t["decoder.W_q"], H);
          const scores = keys.map((key, j) => {
            if (masked.has(j)) return -Infinity;
            let s = 0;
            for (let a = 0; a < query.length; a++) s += w_v[a] * Math.tanh(query[a] + key[a]);
            return s;
          });
          const top = Math.max(...scores);
          const exps = scores.map((s) => (s === -Infinity || top === -Infinity ? 0 : Math.exp(s - top)));
          const total = exps.reduce((a, b) => a + b, 0);
          const weights = exps.map((e) => (total > 0 ? e / total : 0));
          const context = new Float64Array(states[0].length);
          weights.forEach((a, j) => { if (a) for (let k = 0; k < context.length; k++) context[k] += a * states[j][k]; });
          const embedded = row(t["decoder.embedding"], previous);
          const input = Float64Array.from([...embedded, ...context]);
          H = gruCell(t["decoder.w_ih"], t["decoder.w_hh"], t["decoder.b_ih"], t["decoder.b_hh"], input, H);
          const logits = matVec(t["decoder.output.weight"], Float64Array.from([...H, ...context, ...embedded]), t["decoder.output.bias"]);
          let best = 0;
          for (let v = 1; v < logits.length; v++) if (logits[v] > logits[best]) best = v;
          const token = produced in forced ? forced[produced] : best;
          produced += 1;
          previous = token;
          if (token === special.eos) done = true;
          return { token, greedy: best, weights, logits };
        },
      };
    }

    /** The whole greedy translation: {tokens (ids, with the final <eos> if reached), weights (one row per token)}. */
    function translate(ids, options = {}) {
      const decoder = start(ids, options);
      const tokens = [], weights = [];
      for (let step = decoder.next(); step; step = decoder.next()) {
        tokens.push(step.token);
        weights.push(step.weights);
      }
      return { tokens, weights };
    }

    return {
      sourceVocab: exported.source_vocab,
      targetVocab: exported.target_vocab,
      special,
      encodeWords,
      start,
      translate,
    };
  }

  root.AttentionCourseLiveEngine = { load };
})(globalThis);

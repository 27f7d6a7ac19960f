/* The live explorer's engine: a chapter's trained model, run in the page. Two models:
 * chapter 6's GRU encoder–decoder with attention (attention_course/seq2seq.py, kind "seq2seq-attention")
 * and chapter 10's Transformer (attention_course/transformer.py, kind "transformer").
 *
 * A classic script, so that a page opened from file:// can load it (and the exported weights, which
 * attention_course/live_model.py writes as a script too); Node runs the same file in the tests
 * (tests/test_live_model.py, tests/test_live_transformer.py), which compare it with PyTorch token for
 * token. It defines globalThis.AttentionCourseLiveEngine = { load(exported) -> model }.
 *
 * Chapter 6's forward pass, in the notation of seq2seq.py (d_h hidden size, S source words):
 *   encoder: a GRU over the source embeddings, h_1 … h_S, C = h_S;
 *   H_0 = tanh(W C + b);
 *   step i: s_ij = w_vᵀ tanh(W_q H_{i-1} + W_k h_j), a_i = softmax_j s_ij (hidden words take no part),
 *           C_i = Σ_j a_ij h_j, H_i = GRUCell([emb(y_{i-1}); C_i], H_{i-1}),
 *           logits = W_o [H_i; C_i; emb(y_{i-1})] + b_o, y_i = the first arg-max (greedy, as PyTorch).
 * Chapter 10's is described at loadTransformer below.
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

  /** The source's words as ids, and the words the vocabulary lacks (never silently <unk>). */
  function wordEncoder(exported) {
    const sourceIds = new Map(exported.source_vocab.map((word, id) => [word, id]));
    return (words) => {
      const unknown = words.filter((w) => !sourceIds.has(w) || sourceIds.get(w) < 4);
      return { ids: words.map((w) => (sourceIds.has(w) ? sourceIds.get(w) : exported.special.unk)), unknown };
    };
  }

  function loadSeq2seq(exported) {
    const t = readTensors(exported);
    const hidden = exported.sizes.hidden;
    const special = exported.special;

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
      kind: exported.kind,
      sourceVocab: exported.source_vocab,
      targetVocab: exported.target_vocab,
      special,
      encodeWords: wordEncoder(exported),
      start,
      translate,
    };
  }

  // ---------------------------------------------------------------------------------------------
  // Chapter 10's Transformer.

  /** PyTorch's LayerNorm (ε = 1e-5, the biased variance) of x, with its weight and bias. */
  function layerNorm(x, weight, bias) {
    const n = x.length;
    let mean = 0;
    for (let k = 0; k < n; k++) mean += x[k];
    mean /= n;
    let variance = 0;
    for (let k = 0; k < n; k++) variance += (x[k] - mean) ** 2;
    const scale = 1 / Math.sqrt(variance / n + 1e-5);
    const out = new Float64Array(n);
    for (let k = 0; k < n; k++) out[k] = (x[k] - mean) * scale * weight.values[k] + bias.values[k];
    return out;
  }

  /** positions.sinusoidal_positions, one row: PE[t, 2k] = sin(t / 10000^(2k/d)), PE[t, 2k+1] = cos(…). */
  function sinusoid(t, d) {
    const out = new Float64Array(d);
    for (let k = 0; k < d; k += 2) {
      const angle = t * Math.pow(10000, -k / d);
      out[k] = Math.sin(angle);
      if (k + 1 < d) out[k + 1] = Math.cos(angle);
    }
    return out;
  }

  function add(a, b) {
    const out = new Float64Array(a.length);
    for (let k = 0; k < a.length; k++) out[k] = a[k] + b[k];
    return out;
  }

  /** One query against projected keys and values, every head at once (multi_head.py: head r owns
   * features r·d_head … (r+1)·d_head − 1). Keys in `hidden` take no part (-inf before the softmax).
   * Returns the heads' outputs side by side (d) and each head's weights over the keys. */
  function attend(query, keys, values, heads, hidden) {
    const d = query.length, dHead = d / heads, scale = Math.sqrt(dHead);
    const output = new Float64Array(d);
    const weights = [];
    for (let r = 0; r < heads; r++) {
      const base = r * dHead;
      const scores = keys.map((key, j) => {
        if (hidden && hidden.has(j)) return -Infinity;
        let s = 0;
        for (let k = base; k < base + dHead; k++) s += query[k] * key[k];
        return s / scale;
      });
      const top = Math.max(...scores);
      const exps = scores.map((s) => (s === -Infinity ? 0 : Math.exp(s - top)));
      const total = exps.reduce((a, b) => a + b, 0);
      const a = Float64Array.from(exps, (e) => (total > 0 ? e / total : 0));
      for (let j = 0; j < keys.length; j++) {
        if (!a[j]) continue;
        for (let k = base; k < base + dHead; k++) output[k] += a[j] * values[j][k];
      }
      weights.push(a);
    }
    return { output, weights };
  }

  /* The encoder–decoder of transformer.py, for one sentence (so no padding). d = d_model, n_h heads.
   *   x_j = √d · emb(w_j) + PE_j (sinusoidal or learned positions, or none);
   *   encoder layer: x ← x + SelfAttention(LN(x)), x ← x + FFN(LN(x))   (pre-LN; post-LN: x ← LN(x + F(x)));
   *   memory = LN(x) after the last layer (pre-LN only);
   *   decoder layer, at output step i (query position i, reading y_{i-1}, y_0 = <bos>): causal self-attention
   *     over positions 0 … i, cross-attention over the memory, the FFN, each as above; a last LN (pre-LN),
   *     the output layer, y_i = the first arg-max.
   * Each attention is MultiHeadAttention: q = W_q x + b_q, k, v likewise, per head softmax(q·k / √d_head),
   * the heads' sums side by side, W_o. Transformer.greedy_decode runs the decoder again over the whole
   * prefix at every step; here a key/value cache (chapter 11) keeps each layer's keys and values of the
   * positions already read. The numbers are the same: the causal mask keeps an earlier position from
   * ever reading a later one, so nothing already computed changes when a word is added. */
  function loadTransformer(exported) {
    const t = readTensors(exported);
    const { d_model: d, heads, encoder_layers: encoderLayers, decoder_layers: decoderLayers, norm_first: preLN,
      positions } = exported.sizes;
    const special = exported.special;
    const embedScale = Math.sqrt(d);
    const linear = (name, x) => matVec(t[`${name}.weight`], x, t[`${name}.bias`]);
    const norm = (name, x) => layerNorm(x, t[`${name}.weight`], t[`${name}.bias`]);
    const feedForward = (name, x) => linear(`${name}.linear2`, linear(`${name}.linear1`, x).map((v) => Math.max(v, 0)));

    // A residual connection around a sublayer F, named by its block (whose LN it uses): x + F(LN(x)) in
    // pre-LN, LN(x + F(x)) in post-LN. sublayerInput gives F's input, closeResidual the block's output.
    const sublayerInput = (block, x) => (preLN ? norm(`${block}.norm`, x) : x);
    const closeResidual = (block, x, fx) => (preLN ? add(x, fx) : norm(`${block}.norm`, add(x, fx)));
    const residual = (block, x, sublayer) => closeResidual(block, x, sublayer(sublayerInput(block, x)));

    function embed(id, position, side) {
      const x = Float64Array.from(row(t[`${side}_embedding.weight`], id), (v) => v * embedScale);
      if (positions === "sinusoidal") return add(x, sinusoid(position, d));
      if (positions === "learned") {
        const table = t[`${side}_positions.table.weight`];
        if (position >= table.shape[0]) throw new Error(`learned positions end at ${table.shape[0] - 1}`);
        return add(x, row(table, position));
      }
      return x;
    }

    /** The encoder over source ids: the memory (S vectors of d) and each layer's self-attention, [layer][head][i][j]. */
    function encode(ids) {
      let xs = ids.map((id, j) => embed(id, j, "source"));
      const maps = [];
      for (let l = 0; l < encoderLayers; l++) {
        const name = `encoder_layers.${l}`;
        const layerMaps = Array.from({ length: heads }, () => []);
        // Self-attention: every position's query against every position's key (all of them real words).
        const inputs = xs.map((x) => sublayerInput(`${name}.attention_block`, x));
        const keys = inputs.map((h) => linear(`${name}.self_attention.W_k`, h));
        const values = inputs.map((h) => linear(`${name}.self_attention.W_v`, h));
        xs = xs.map((x, i) => {
          const { output, weights } = attend(linear(`${name}.self_attention.W_q`, inputs[i]), keys, values, heads);
          weights.forEach((a, r) => layerMaps[r].push(a));
          return closeResidual(`${name}.attention_block`, x, linear(`${name}.self_attention.W_o`, output));
        });
        xs = xs.map((x) => residual(`${name}.feed_forward_block`, x, (h) => feedForward(`${name}.feed_forward`, h)));
        maps.push(layerMaps);
      }
      return { memory: preLN ? xs.map((x) => norm("encoder_norm", x)) : xs, maps };
    }

    /** A decoder over source ids: each next() runs one step and returns {token, greedy, weights, logits,
     * self, cross} or null after <eos> or max_len steps. `weights` are greedy_decode's for the step (the last
     * layer's cross-attention, averaged over its heads); `self` and `cross` are this step's rows of every
     * layer's maps, [layer][head] → weights over positions 0 … i, and over the source words.
     * options.hidden: source positions that cross-attention may not look at (the encoder still reads
     * them); options.forced: {step: token id}. The decoder's `encoder` holds the encoder's maps. */
    function start(ids, options = {}) {
      if (!ids.length) throw new Error("cannot translate an empty sentence");
      const hidden = new Set(options.hidden || []);
      const forced = options.forced || {};
      const maxLen = options.maxLen ?? 2 * ids.length + 2;
      const { memory, maps: encoderMaps } = encode(ids);
      const crossKeys = [], crossValues = [];
      for (let l = 0; l < decoderLayers; l++) {  // the memory's keys and values, once per sentence
        crossKeys.push(memory.map((m) => linear(`decoder_layers.${l}.cross_attention.W_k`, m)));
        crossValues.push(memory.map((m) => linear(`decoder_layers.${l}.cross_attention.W_v`, m)));
      }
      const cacheKeys = Array.from({ length: decoderLayers }, () => []);
      const cacheValues = Array.from({ length: decoderLayers }, () => []);
      let previous = special.bos;
      let produced = 0;
      let done = false;
      return {
        encoder: encoderMaps,
        next() {
          if (done || produced >= maxLen) return null;
          let x = embed(previous, produced, "target");
          const self = [], cross = [];
          for (let l = 0; l < decoderLayers; l++) {
            const name = `decoder_layers.${l}`;
            x = residual(`${name}.self_attention_block`, x, (h) => {
              cacheKeys[l].push(linear(`${name}.self_attention.W_k`, h));
              cacheValues[l].push(linear(`${name}.self_attention.W_v`, h));
              const { output, weights } = attend(linear(`${name}.self_attention.W_q`, h), cacheKeys[l], cacheValues[l], heads);
              self.push(weights);
              return linear(`${name}.self_attention.W_o`, output);
            });
            x = residual(`${name}.cross_attention_block`, x, (h) => {
              const { output, weights } = attend(linear(`${name}.cross_attention.W_q`, h), crossKeys[l], crossValues[l], heads, hidden);
              cross.push(weights);
              return linear(`${name}.cross_attention.W_o`, output);
            });
            x = residual(`${name}.feed_forward_block`, x, (h) => feedForward(`${name}.feed_forward`, h));
          }
          const logits = linear("output", preLN ? norm("decoder_norm", x) : x);
          let best = 0;
          for (let v = 1; v < logits.length; v++) if (logits[v] > logits[best]) best = v;
          const last = cross[cross.length - 1];
          const weights = Float64Array.from(ids, (_, j) => last.reduce((sum, a) => sum + a[j], 0) / heads);
          const token = produced in forced ? forced[produced] : best;
          produced += 1;
          previous = token;
          if (token === special.eos) done = true;
          return { token, greedy: best, weights, logits, self, cross };
        },
      };
    }

    /** The whole greedy translation: {tokens (ids, with the final <eos> if reached), weights (one row per
     * token, as greedy_decode's), maps} with maps as translate_with_maps's: "encoder" [layer][head] (S × S),
     * "decoder" (T × T, zero above the diagonal) and "cross" (T × S), T the number of tokens. */
    function translate(ids, options = {}) {
      const decoder = start(ids, options);
      const steps = [];
      for (let step = decoder.next(); step; step = decoder.next()) steps.push(step);
      const T = steps.length;
      const layers = (kind, width) => Array.from({ length: decoderLayers }, (_, l) => Array.from({ length: heads }, (_, r) =>
        steps.map((step) => { const out = new Float64Array(width); out.set(step[kind][l][r]); return out; })));
      return {
        tokens: steps.map((step) => step.token),
        weights: steps.map((step) => step.weights),
        maps: { encoder: decoder.encoder, decoder: layers("self", T), cross: layers("cross", ids.length) },
      };
    }

    return {
      kind: exported.kind,
      sizes: exported.sizes,
      sourceVocab: exported.source_vocab,
      targetVocab: exported.target_vocab,
      special,
      encodeWords: wordEncoder(exported),
      start,
      translate,
    };
  }

  function load(exported) {
    const loaders = { "seq2seq-attention": loadSeq2seq, transformer: loadTransformer };
    if (exported.format !== 1 || !(exported.kind in loaders)) {
      throw new Error(`not a model this engine runs: format ${exported.format}, kind ${exported.kind}`);
    }
    return loaders[exported.kind](exported);
  }

  root.AttentionCourseLiveEngine = { load };
})(globalThis);

// encode_node.js — the reference figures for encode_bench: the same data built in Node
// (same xorshift32 generator, so the same float32 values), timed with Node's own tools.
// Prints "name value_ms" lines (median of many runs), names matching encode_bench's:
//   base64_rows    1000 x Buffer.from(row.buffer, offset, 6144).toString('base64')
//   base64_whole   Buffer.from(all.buffer).toString('base64') over the 1000 x 1536 floats
//   base64_js_client  the official JS client's way (chromadb 3.x, embeddingsToBase64Bytes):
//                  per row, the float32 bytes become a binary string one character at a
//                  time, then btoa; rows given as plain arrays, as a client receives them
//   body_json      JSON.stringify({ids, embeddings, metadatas}) for 20,000 records, 4 dims,
//                  2-key metadata objects
// Usage: node encode_node.js [runs]   (BENCH_CLOCK=wall for wall-clock time; default is
// the process's CPU time, steadier on a shared machine)
'use strict';

const ROWS = 1000;
const DIM = 1536;
const BODY_RECORDS = 20000;
const BODY_DIM = 4;
const runs = Math.max(1, parseInt(process.argv[2] || '101', 10));
const useWall = process.env.BENCH_CLOCK === 'wall';

let state = 2463534242;
function nextValue() {
  let x = state;
  x = (x ^ (x << 13)) >>> 0;
  x = (x ^ (x >>> 17)) >>> 0;
  x = (x ^ (x << 5)) >>> 0;
  state = x;
  return (x >>> 8) / 16777216 * 2 - 1;
}

const embeddings = new Float32Array(ROWS * DIM);
for (let i = 0; i < embeddings.length; i++) embeddings[i] = nextValue();
const bodyFloats = new Float32Array(BODY_RECORDS * BODY_DIM);
for (let i = 0; i < bodyFloats.length; i++) bodyFloats[i] = nextValue();

let rowArrays = null; // built on first use, so the other figures run without it in memory

const ids = [];
const bodyEmbeddings = [];
const metadatas = [];
for (let i = 0; i < BODY_RECORDS; i++) {
  ids.push('id-' + i);
  bodyEmbeddings.push(Array.from(bodyFloats.subarray(i * BODY_DIM, (i + 1) * BODY_DIM)));
  metadatas.push({ category: 'cat-' + (i % 10), rank: i });
}

function nowMs() {
  if (useWall) return Number(process.hrtime.bigint()) / 1e6;
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e3;
}

let sink = 0;
const benches = {
  base64_rows() {
    const rowBytes = DIM * 4;
    for (let i = 0; i < ROWS; i++)
      sink += Buffer.from(embeddings.buffer, i * rowBytes, rowBytes).toString('base64').length;
  },
  base64_whole() {
    sink += Buffer.from(embeddings.buffer).toString('base64').length;
  },
  base64_js_client() {
    if (rowArrays === null) {
      rowArrays = [];
      for (let i = 0; i < ROWS; i++) rowArrays.push(Array.from(embeddings.subarray(i * DIM, (i + 1) * DIM)));
    }
    for (const row of rowArrays) {
      const bytes = new Uint8Array(new Float32Array(row).buffer);
      sink += btoa(Array.from(bytes, (b) => String.fromCharCode(b)).join('')).length;
    }
  },
  body_json() {
    sink += JSON.stringify({ ids, embeddings: bodyEmbeddings, metadatas }).length;
  },
};

function median(v) {
  v.sort((a, b) => a - b);
  const n = v.length;
  return n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

console.log(`# node ${process.version}`);
for (const [name, fn] of Object.entries(benches)) {
  for (let i = 0; i < 5; i++) fn(); // warm up: let the JIT settle
  const times = [];
  for (let i = 0; i < runs; i++) {
    const start = nowMs();
    fn();
    times.push(nowMs() - start);
  }
  console.log(`${name} ${median(times).toFixed(4)}`);
}
console.log(`# body_json size ${JSON.stringify({ ids, embeddings: bodyEmbeddings, metadatas }).length} bytes`);
if (sink < 0) console.log(sink);

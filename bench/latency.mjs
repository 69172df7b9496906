// latency.mjs — commit -> visible in Chroma, for a mirrored table with the worker running.
// Inserts single-row transactions at a fixed rate on one connection; for each row, the time
// its INSERT (autocommit) returned is its commit time. A separate loop polls Chroma's get
// over HTTP for the ids not seen yet; a row's latency is (first seen - commit). Prints
// "rows N p50_ms X p99_ms Y max_ms Z missing M".
//
//   node latency.mjs CHROMA_PORT TABLE COLLECTION RATE SECONDS DIM [direct]
//
// With "direct", the server's own floor measured the same way: each record is upserted
// straight into Chroma over HTTP (no PostgreSQL), one request at a time on one connection,
// like the worker. Two figures: from the moment the record is sent (Chroma's own
// send -> visible time), and from the moment it was due by the rate (a single writer's
// arrival -> visible time, which also counts waiting for the upsert before it, as a
// mirrored row waits for the request in flight). The second line is
// "arrival_p50_ms X arrival_p99_ms Y request_p50_ms Z request_p99_ms W", the last two each
// upsert's round trip (a record can be visible before its upsert's response arrives).
//
// PostgreSQL connection from the usual PG* environment variables.
import pg from "pg";

const [chromaPort, table, collectionName, rateArg, secondsArg, dimArg, mode] = process.argv.slice(2);
const direct = mode === "direct";
const rate = Number(rateArg), seconds = Number(secondsArg), dim = Number(dimArg);
if (!chromaPort || !table || !collectionName || !(rate > 0) || !(seconds > 0) || !(dim > 0)) {
  console.error("usage: node latency.mjs CHROMA_PORT TABLE COLLECTION RATE SECONDS DIM");
  process.exit(2);
}
const base = `http://127.0.0.1:${chromaPort}/api/v2/tenants/default_tenant/databases/default_database/collections`;
const now = () => Number(process.hrtime.bigint()) / 1e6; // ms
const sleep = (ms) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

async function chroma(path, body) {
  const res = await fetch(base + path, body === undefined ? {} : {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status}: ${await res.text()}`);
  return res.json();
}

const collId = (await chroma(`/${collectionName}`)).id;
const db = direct ? null : new pg.Client();
if (db) await db.connect();
const emb = "{" + Array.from({ length: dim }, (_, i) => ((i % 97) / 97).toFixed(4)).join(",") + "}";
const embArray = Array.from({ length: dim }, (_, i) => Number(((i % 97) / 97).toFixed(4)));

const committed = new Map(); // id -> commit time (ms)
const due = new Map(); // direct: id -> the time the rate made it due (ms)
const latencies = [];
const arrivals = [];
const requests = []; // direct: each upsert's round trip (ms)
let writing = true;

async function poller() {
  while (writing || committed.size > 0) {
    const ids = [...committed.keys()];
    if (ids.length > 0) {
      const got = await chroma(`/${collId}/get`, { ids, include: [] });
      const t = now();
      for (const id of got.ids) {
        const c = committed.get(id);
        if (c !== undefined) {
          latencies.push(t - c);
          committed.delete(id);
          if (due.has(id)) arrivals.push(t - due.get(id));
        }
      }
    }
    if (!writing && committed.size > 0 && now() - lastCommit > 10000) break;
    await sleep(2);
  }
}

let lastCommit = now();
const poll = poller();
const total = Math.round(rate * seconds);
const interval = 1000 / rate;
const t0 = now();
for (let i = 0; i < total; i++) {
  await sleep(t0 + i * interval - now());
  if (direct) {
    // the record is "committed" when it is handed to Chroma: the upsert counts as latency
    const id = `direct-${i}`;
    due.set(id, t0 + i * interval);
    lastCommit = now();
    committed.set(id, lastCommit);
    const sent = now();
    await chroma(`/${collId}/upsert`, { ids: [id], embeddings: [embArray] });
    requests.push(now() - sent);
  } else {
    const { rows } = await db.query(`INSERT INTO ${table} (embedding) VALUES ($1) RETURNING id::text AS id`, [emb]);
    lastCommit = now();
    committed.set(rows[0].id, lastCommit);
  }
}
writing = false;
await poll;
if (db) await db.end();

latencies.sort((a, b) => a - b);
arrivals.sort((a, b) => a - b);
requests.sort((a, b) => a - b);
const pctOf = (l, p) => l.length ? l[Math.min(l.length - 1, Math.ceil(p * l.length) - 1)] : NaN;
const pct = (p) => pctOf(latencies, p);
console.log(`rows ${total} p50_ms ${pct(0.5).toFixed(1)} p99_ms ${pct(0.99).toFixed(1)} ` +
  `max_ms ${pct(1).toFixed(1)} missing ${committed.size}`);
if (direct)
  console.log(`arrival_p50_ms ${pctOf(arrivals, 0.5).toFixed(1)} arrival_p99_ms ${pctOf(arrivals, 0.99).toFixed(1)} ` +
    `request_p50_ms ${pctOf(requests, 0.5).toFixed(1)} request_p99_ms ${pctOf(requests, 0.99).toFixed(1)}`);

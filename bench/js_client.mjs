// js_client.mjs — the hand-written alternative to chroma_upsert_query: node-postgres reads
// the table page by page (keyset, by id) and the official Chroma JS client upserts each
// page. Prints "records N seconds S records_per_s R".
//
//   node js_client.mjs CHROMA_PORT TABLE COLLECTION BATCH
//
// PostgreSQL connection from the usual PG* environment variables (PGHOST, PGPORT, ...).
import pg from "pg";
import { ChromaClient } from "chromadb";

const [chromaPort, table, collectionName, batchArg] = process.argv.slice(2);
const batch = Number(batchArg);
if (!chromaPort || !table || !collectionName || !(batch > 0)) {
  console.error("usage: node js_client.mjs CHROMA_PORT TABLE COLLECTION BATCH");
  process.exit(2);
}

const db = new pg.Client();
await db.connect();
const chroma = new ChromaClient({ host: "127.0.0.1", port: Number(chromaPort), ssl: false });
const collection = await chroma.getOrCreateCollection({
  name: collectionName,
  embeddingFunction: null,
});

const sql = `SELECT t.id::text AS id, t.id AS k, t.embedding FROM ${table} t
             WHERE t.id > $1 ORDER BY t.id LIMIT $2`;
let after = -1;
let records = 0;
const t0 = process.hrtime.bigint();
for (;;) {
  const { rows } = await db.query(sql, [after, batch]);
  if (rows.length === 0) break;
  await collection.upsert({
    ids: rows.map((r) => r.id),
    embeddings: rows.map((r) => r.embedding),
  });
  records += rows.length;
  after = rows[rows.length - 1].k;
}
const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
console.log(`records ${records} seconds ${seconds.toFixed(3)} records_per_s ${(records / seconds).toFixed(1)}`);
await db.end();

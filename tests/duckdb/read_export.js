// read_export.js FILE COLUMN...: reads an export object (zstd JSON lines) with
// DuckDB's read_json, the way an analyst would, and prints
// {"count":N,"rows":[[COLUMN values...],...]} ordered by _id, as JSON.
// Used by tests/e2e_export.py.
const { DuckDBInstance } = require('@duckdb/node-api');

async function main() {
  const [file, ...columns] = process.argv.slice(2);
  if (!file) throw new Error('usage: node read_export.js FILE COLUMN...');
  const instance = await DuckDBInstance.create(':memory:');
  const conn = await instance.connect();
  const quoted = file.replace(/'/g, "''");
  const source = `read_json('${quoted}', format = 'newline_delimited', compression = 'zstd')`;
  const count = await conn.runAndReadAll(`SELECT count(*)::INTEGER AS n FROM ${source}`);
  const cols = columns.map((c) => `CAST(${c} AS VARCHAR)`).join(', ');
  const rows = cols
    ? (await conn.runAndReadAll(`SELECT ${cols} FROM ${source} ORDER BY _id`)).getRows()
    : [];
  process.stdout.write(JSON.stringify({ count: count.getRows()[0][0], rows }) + '\n');
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + '\n');
  process.exit(1);
});

// Test oracle: gpt-3-encoder's encode, run under node (NODE_PATH must reach
// assets/npm/node_modules). Commands, each printing JSON or ok/not ok lines:
//   encode-file TEXT OUT.json     tokens of a whole text file, as a JSON array
//   cases CASES DIR               writes DIR/case_NNN.txt (raw UTF-8) and
//                                 DIR/expected.json for a hard-strings file
//   check-stream EXPECTED.json PREFIX    compares shards with expected tokens
//   check-cases DIR PREFIX        compares shards with each case's tokens
//   check-shards PREFIX VAL SHARD TOTAL  header and split checks
'use strict';
const fs = require('fs');
const path = require('path');
const { encode } = require('gpt-3-encoder');

const EOT = 50256;

// gpt-3-encoder's encode concatenates arrays quadratically, so a long text
// is encoded in chunks. A chunk ends between a non-space character and a
// U+0020 space: no regex match spans that point (only whitespace matches
// hold a space after a non-space, and they start at it), and the match
// before it is not whitespace, so no look-ahead crosses it.
function encodeLong(text) {
  const out = [];
  let start = 0;
  while (start < text.length) {
    let end = Math.min(text.length, start + 2000);
    while (end < text.length && !(text[end] === ' ' && /\S/.test(text[end - 1]))) end++;
    for (const t of encode(text.slice(start, end))) out.push(t);
    start = end;
  }
  return out;
}

// One case a line: LABEL<TAB>JSON string. '#' lines and blank lines are skipped.
function readCases(file) {
  const cases = [];
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (!line.trim() || line.startsWith('#')) continue;
    const tab = line.indexOf('\t');
    if (tab < 0) throw new Error(`${file}: no TAB in line: ${line}`);
    cases.push({ label: line.slice(0, tab), text: JSON.parse(line.slice(tab + 1)) });
  }
  return cases;
}

// Reads PREFIX_val_000000.bin (if any) then PREFIX_train_NNNNNN.bin in order;
// returns { shards: [{file, count, tokens}], problems: [string] }.
function readShards(prefix) {
  const dir = path.dirname(prefix), base = path.basename(prefix);
  const names = fs.readdirSync(dir).filter(n => n.startsWith(base + '_') && n.endsWith('.bin')).sort();
  const val = names.filter(n => n === `${base}_val_000000.bin`);
  const train = names.filter(n => /^_train_\d{6}\.bin$/.test(n.slice(base.length)));
  const shards = [], problems = [];
  for (const n of val.concat(train)) {
    const buf = fs.readFileSync(path.join(dir, n));
    const magic = buf.readInt32LE(0), version = buf.readInt32LE(4), count = buf.readInt32LE(8);
    if (magic !== 20240520 || version !== 1) problems.push(`${n}: bad magic/version ${magic}/${version}`);
    if (buf.length !== 1024 + 2 * count) problems.push(`${n}: header count ${count} but ${buf.length} bytes`);
    const tokens = [];
    for (let i = 1024; i + 1 < buf.length; i += 2) tokens.push(buf.readUInt16LE(i));
    shards.push({ file: n, count, tokens });
  }
  train.forEach((n, i) => {
    if (n !== `${base}_train_${String(i).padStart(6, '0')}.bin`) problems.push(`train shards not numbered from 0: ${n}`);
  });
  if (names.some(n => n.endsWith('.tmp'))) problems.push('temporary files left');
  return { shards, problems };
}

function firstDiff(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
}

function report(ok, name, why) {
  console.log(ok ? `ok ${name}` : `not ok ${name} - ${why}`);
  return ok;
}

function compare(name, got, want) {
  const i = firstDiff(got, want);
  return report(i < 0, name, `first difference at token ${i} of ${want.length}: ` +
    `got [${got.slice(Math.max(0, i - 3), i + 5)}] expected [${want.slice(Math.max(0, i - 3), i + 5)}] ` +
    `(got ${got.length} tokens)`);
}

function streamOf(prefix) {
  const { shards, problems } = readShards(prefix);
  return { stream: [].concat(...shards.map(s => s.tokens)), shards, problems };
}

const cmds = {
  'encode-file'(text, out) {
    fs.writeFileSync(out, JSON.stringify(encodeLong(fs.readFileSync(text, 'utf8'))));
  },
  cases(file, dir) {
    const cases = readCases(file);
    cases.forEach((c, i) => fs.writeFileSync(path.join(dir, `case_${String(i).padStart(3, '0')}.txt`), c.text, 'utf8'));
    const expected = cases.map(c => ({ label: c.label, tokens: encode(c.text) }));
    fs.writeFileSync(path.join(dir, 'expected.json'), JSON.stringify(expected));
  },
  'check-stream'(expectedFile, prefix) {
    const want = [EOT].concat(JSON.parse(fs.readFileSync(expectedFile, 'utf8')));
    const { stream, problems } = streamOf(prefix);
    report(problems.length === 0, 'kjv_shards_readable', problems.join('; '));
    compare('kjv_tokens_equal_gpt3_encoder', stream, want);
  },
  'check-cases'(dir, prefix) {
    const expected = JSON.parse(fs.readFileSync(path.join(dir, 'expected.json'), 'utf8'));
    const { stream, problems } = streamOf(prefix);
    report(problems.length === 0, 'hard_shards_readable', problems.join('; '));
    // Text never encodes to 50256 in gpt-3-encoder, so it splits documents.
    const docs = [];
    for (const t of stream) t === EOT ? docs.push([]) : docs[docs.length - 1].push(t);
    report(docs.length === expected.length, 'hard_case_count', `${docs.length} documents for ${expected.length} cases`);
    expected.forEach((c, i) => compare(`hard_${c.label}`, docs[i] || [], c.tokens));
  },
  'check-shards'(prefix, valTokens, shardTokens, total) {
    [valTokens, shardTokens, total] = [valTokens, shardTokens, total].map(Number);
    const { shards, problems } = readShards(prefix);
    const counts = shards.map(s => s.count);
    const val = Math.min(valTokens, total), rest = total - val;
    const want = val > 0 ? [val] : [];
    for (let left = rest; left > 0; left -= shardTokens) want.push(Math.min(left, shardTokens));
    const ok = problems.length === 0 && JSON.stringify(counts) === JSON.stringify(want);
    report(ok, `split_val${valTokens}_shard${shardTokens}`,
      `${problems.join('; ')} shard counts ${JSON.stringify(counts)}, expected ${JSON.stringify(want)}`);
  },
};

const [cmd, ...args] = process.argv.slice(2);
if (!cmds[cmd]) {
  console.error(`usage: node oracle.js ${Object.keys(cmds).join('|')} ARGS...`);
  process.exit(2);
}
cmds[cmd](...args);

// Test oracle: tiktoken's "gpt2" encoding (OpenAI's GPT-2 tokenizer: Python
// regex semantics, byte-pair ranks of GPT-2's files), run under node (NODE_PATH
// must reach assets/npm/node_modules). Commands, each printing JSON or ok/not ok lines:
//   encode-file TEXT OUT.json     tokens of a whole text file, as a JSON array
//   encode-json IN.json OUT.json  tokens of each string of a JSON array, as an array of arrays
//   cases CASES DIR               writes DIR/case_NNN.txt (raw UTF-8) and
//                                 DIR/expected.json for a hard-strings file
//   random DIR N SEED             the same for N random Unicode documents
//   random-unicode16 DIR N SEED MODULES  the same for N random documents dense in
//                                 the letters, digits and marks added in Unicode
//                                 15.0 to 16.0 (and 17.0's letters), then one
//                                 document a 500 of every letter and number added
//                                 in 15.0 to 16.0, each followed by "'ta"
//   unicode-version MODULES       checks tiktoken's \p{L}, \p{N} and \s are
//                                 Unicode 16.0.0's
// MODULES: the node_modules folder holding @unicode/unicode-14.0.0 and -16.0.0.
//   check-stream EXPECTED.json PREFIX    compares shards with expected tokens
//   check-cases DIR PREFIX [NAME] compares shards with each case's tokens (with
//                                 NAME: one summary check instead of one per case)
//   check-shards PREFIX VAL SHARD TOTAL  header and split checks
'use strict';
const fs = require('fs');
const path = require('path');
const { get_encoding, Tiktoken } = require('tiktoken');
const { pathToFileURL } = require('url');

const EOT = 50256;
const gpt2 = get_encoding('gpt2');
// encode_ordinary: "<|endoftext|>" in a text is plain text, as in ./prepare.
const encode = text => Array.from(gpt2.encode_ordinary(text));

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

function writeCases(cases, dir) {
  cases.forEach((c, i) => fs.writeFileSync(path.join(dir, `case_${String(i).padStart(4, '0')}.txt`), c.text, 'utf8'));
  const expected = cases.map(c => ({ label: c.label, tokens: encode(c.text) }));
  fs.writeFileSync(path.join(dir, 'expected.json'), JSON.stringify(expected));
}

// Pools of the random documents: every kind of whitespace (Unicode
// White_Space, and look-alikes that are not: U+FEFF, U+180E, U+200B, the
// C0 separators U+001C-U+001F that Python's str.isspace accepts), marks,
// digits of several systems, letters of several scripts, emoji and
// contractions. Only characters assigned long ago, so that the C side's
// PCRE2 tables and tiktoken's agree on their classes.
const range = (lo, hi) => Array.from({ length: hi - lo + 1 }, (_, i) => String.fromCodePoint(lo + i));
const POOLS = {
  space: [' ', ' ', ' ', '\t', '\n', '\n', '\r\n', '\r', '\v', '\f', '\u0085', '\u00a0', '\u1680',
    ...range(0x2000, 0x200a), '\u2028', '\u2029', '\u202f', '\u205f', '\u3000', '\ufeff', '\u180e',
    '\u200b', '\u200d', '\u2060', ...range(0x1c, 0x1f)],
  mark: [...range(0x300, 0x36f), '\u0591', '\u05b8', '\u064e', '\u0651', '\u093f', '\u094d', '\u0e31',
    '\u20dd', '\u20e3', '\ufe0f', '\u3099'],
  digit: [...range(0x30, 0x39), ...range(0x660, 0x669), ...range(0x966, 0x96f), ...range(0xff10, 0xff19),
    '\u00b2', '\u00b3', '\u00bd', '\u2160', '\u216b', '\u2460', '\u2461', '\u3007'],
  letter: [...range(0x61, 0x7a), ...range(0x41, 0x5a), ...range(0xe0, 0xff), ...range(0x3b1, 0x3c9),
    ...range(0x410, 0x44f), ...range(0x5d0, 0x5ea), ...range(0x627, 0x64a), ...range(0x905, 0x939),
    ...range(0xe01, 0xe2e), ...range(0x3041, 0x3096), ...range(0x4e00, 0x4e80), ...range(0xac00, 0xac40),
    '\u01c5', '\u02b0', '\u1d43', '\u00aa'],
  emoji: ['\u{1f600}', '\u{1f603}', '\u{1f44d}', '\u{1f3fd}', '\u2764\ufe0f', '\u{1f468}\u200d\u{1f469}',
    '\u{1f1fa}\u{1f1f8}', '\u2615', '\u{1f525}', '\u{1f4a9}', '#\ufe0f\u20e3'],
  contraction: ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'RE", "'x", "''", '\u2019s', "'"],
  punct: [...'!"#$%&()*+,-./:;<=>?@[\\]^_`{|}~', '\u2014', '\u2026', '\u00ab', '\u00bb', '\u00bf', '\u00a7',
    '\u2022', '\u3002', '\uff01', '\u060c'],
  word: ['the', 'and', ' of', ' God', 'Hello', ' world', 'ing', 'tion', ' 2024', 'I', ' it', 'don',
    'caf\u00e9', ' na\u00efve', '\u043c\u0438\u0440', '\u4e16\u754c'],
};

// N documents of 1 to 40 runs, each run 1 to 4 picks from one pool.
function randomDocs(n, seed, pools = POOLS) {
  const kinds = Object.keys(pools);
  let state = seed >>> 0; // mulberry32
  const rnd = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const pick = arr => arr[Math.floor(rnd() * arr.length)];
  const docs = [];
  for (let d = 0; d < n; d++) {
    let text = '';
    const runs = 1 + Math.floor(rnd() * 40);
    for (let s = 0; s < runs; s++) {
      const pool = pools[pick(kinds)], len = 1 + Math.floor(rnd() * 4);
      for (let r = 0; r < len; r++) text += pick(pool);
    }
    docs.push({ label: `random_${d}`, text });
  }
  return docs;
}

// Code points of a Unicode property (e.g. 'General_Category/Letter') in the
// npm package @unicode/unicode-VERSION under MODULES.
async function unicodeSet(modules, version, property) {
  const file = path.join(path.resolve(modules), '@unicode', `unicode-${version}`, property, 'code-points.mjs');
  return new Set((await import(pathToFileURL(file).href)).default);
}
const minus = (a, b) => [...a].filter(c => !b.has(c));

// The members of one class of tiktoken's regex engine: a Tiktoken whose
// pattern is that class and whose tokens are the 256 bytes keeps exactly the
// characters the class matches (encode skips what the pattern does not match).
function tiktokenClass(cls) {
  const ranks = Array.from({ length: 256 }, (_, b) => `${Buffer.from([b]).toString('base64')} ${b}`).join('\n');
  const enc = new Tiktoken(ranks, {}, cls);
  const members = new Set();
  for (let lo = 0; lo <= 0x10ffff; lo += 0x10000) {
    const cps = [];
    for (let c = lo; c < lo + 0x10000; c++) if (c < 0xd800 || c > 0xdfff) cps.push(c);
    const bytes = Buffer.from(enc.encode_ordinary(String.fromCodePoint(...cps)).map(Number));
    for (const ch of bytes.toString('utf8')) members.add(ch.codePointAt(0));
  }
  enc.free();
  return members;
}

async function unicode16Docs(n, seed, modules) {
  const added = async prop => minus(await unicodeSet(modules, '16.0.0', prop), await unicodeSet(modules, '14.0.0', prop));
  const letters = await added('General_Category/Letter'), numbers = await added('General_Category/Number');
  const l16 = await unicodeSet(modules, '16.0.0', 'General_Category/Letter');
  const chars = cps => cps.map(c => String.fromCodePoint(c));
  // Letters of the Unicode node's ICU carries (17.0 in node 20.20) that 16.0
  // lacks: tiktoken classes them apart from letters, so must the C side.
  const newer = [];
  for (let c = 0; c <= 0x10ffff; c++)
    if ((c < 0xd800 || c > 0xdfff) && !l16.has(c) && /\p{L}/u.test(String.fromCodePoint(c))) newer.push(c);
  const pools = {
    ...POOLS,
    new_letter: chars(letters), new_letter2: chars(letters), new_letter3: chars(letters),
    new_number: chars(numbers), new_mark: chars(await added('General_Category/Mark')),
    contraction2: POOLS.contraction,
    ...(newer.length ? { newer_letter: chars(newer) } : {}),
  };
  const docs = randomDocs(n, seed, pools);
  const every = letters.concat(numbers);
  for (let i = 0; i < every.length; i += 500)
    docs.push({ label: `every_new_${i}`, text: every.slice(i, i + 500).map(c => `${String.fromCodePoint(c)}'ta `).join('') });
  return docs;
}

const cmds = {
  'encode-file'(text, out) {
    fs.writeFileSync(out, JSON.stringify(encode(fs.readFileSync(text, 'utf8'))));
  },
  'encode-json'(input, out) {
    fs.writeFileSync(out, JSON.stringify(JSON.parse(fs.readFileSync(input, 'utf8')).map(encode)));
  },
  cases(file, dir) { writeCases(readCases(file), dir); },
  random(dir, n, seed) { writeCases(randomDocs(Number(n), Number(seed)), dir); },
  async 'random-unicode16'(dir, n, seed, modules) { writeCases(await unicode16Docs(Number(n), Number(seed), modules), dir); },
  async 'unicode-version'(modules) {
    const want = { L: 'General_Category/Letter', N: 'General_Category/Number', s: 'Binary_Property/White_Space' };
    const bad = [];
    for (const [cls, prop] of Object.entries(want)) {
      const tk = tiktokenClass(`\\${cls === 's' ? 's' : `p{${cls}}`}`), u = await unicodeSet(modules, '16.0.0', prop);
      const extra = minus(tk, u), missing = minus(u, tk);
      if (extra.length || missing.length) bad.push(`${cls}: ${extra.length} beyond Unicode 16.0.0's, ${missing.length} of it missing`);
    }
    report(bad.length === 0, 'oracle_classes_are_unicode_16', bad.join('; '));
  },
  'check-stream'(expectedFile, prefix) {
    const want = [EOT].concat(JSON.parse(fs.readFileSync(expectedFile, 'utf8')));
    const { stream, problems } = streamOf(prefix);
    report(problems.length === 0, 'kjv_shards_readable', problems.join('; '));
    compare('kjv_tokens_equal_tiktoken', stream, want);
  },
  'check-cases'(dir, prefix, name) {
    const expected = JSON.parse(fs.readFileSync(path.join(dir, 'expected.json'), 'utf8'));
    const { stream, problems } = streamOf(prefix);
    const tag = name || 'hard';
    report(problems.length === 0, `${tag}_shards_readable`, problems.join('; '));
    // Text never encodes to 50256 (a special token), so it splits documents.
    const docs = [];
    for (const t of stream) t === EOT ? docs.push([]) : docs[docs.length - 1].push(t);
    report(docs.length === expected.length, `${tag}_case_count`, `${docs.length} documents for ${expected.length} cases`);
    if (!name) return expected.forEach((c, i) => compare(`hard_${c.label}`, docs[i] || [], c.tokens));
    const bad = expected.filter((c, i) => firstDiff(docs[i] || [], c.tokens) >= 0).map(c => c.label);
    report(bad.length === 0, name, `${bad.length} of ${expected.length} documents differ (${bad.slice(0, 8).join(', ')})`);
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
Promise.resolve(cmds[cmd](...args)).catch(err => { console.error(err); process.exit(1); });

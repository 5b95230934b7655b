#!/usr/bin/python3
"""Golden data for llm.c's bf16 model files (version 5): tests/data/gpt_tiny_bf16.bin, the
parameters of tests/data/gpt_tiny.bin (made by tools/make_reference.py) rounded to bfloat16 by
PyTorch itself, as llm.c's train_gpt2.py write_model(model, filename, dtype="bfloat16") writes
them: int32 header[256] = {20240326, 5, maxT, V, L, NH, C, Vp, 0...}, then every parameter as
the 16-bit words of tensor.to(torch.bfloat16), in the float32 file's order.

Run (from the repository root, with Debian's python3-torch):

    /usr/bin/python3 tools/make_bf16_reference.py

Deterministic: it reads gpt_tiny.bin and writes the same bytes every time. tests/test_gpt_pytorch.c
checks that vkattn's vka_gpt_save_dtype(VKA_BF16) rounds the same float32 values to the same
words (round to nearest, ties to even) and that loading the file widens them as PyTorch does.
"""
import struct
import sys

import torch

SRC, DST = "tests/data/gpt_tiny.bin", "tests/data/gpt_tiny_bf16.bin"


def main():
    with open(SRC, "rb") as f:
        data = f.read()
    header = list(struct.unpack("<256i", data[:1024]))
    if header[0] != 20240326 or header[1] != 3:
        sys.exit(f"{SRC}: not an llm.c float32 checkpoint (magic {header[0]}, version {header[1]})")
    payload = torch.frombuffer(bytearray(data[1024:]), dtype=torch.float32)
    words = payload.to(torch.bfloat16).view(torch.int16)
    out = [20240326, 5] + header[2:8] + [0] * 248  # llm.c writes no trailer: words 8.. are 0
    with open(DST, "wb") as f:
        f.write(struct.pack("<256i", *out))
        f.write(words.numpy().tobytes())
    print(f"wrote {DST}: {payload.numel()} parameters, {1024 + 2 * payload.numel()} bytes")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Golden files for folio's quantized-type kernels, made with an independent implementation:
the numpy (de)quantizers of PyPI's `gguf` package (gguf.quants).

For every weight type it writes, under tests/golden/quant/:
  <TYPE>.bin        raw blocks: random bytes with valid (finite) fp16 / bf16 / f32 fields
  <TYPE>.f32        gguf.quants.dequantize of <TYPE>.bin, little-endian float32
and, for the types whose gguf quantizer reproduces GGUF's reference quantizer bit for bit:
  <TYPE>.quant.f32  float inputs (varied scales)
  <TYPE>.quant.bin  gguf.quants.quantize of those inputs

Usage: pip install gguf numpy; python3 scripts/make-quant-goldens.py [output dir]
The seed is fixed: rerunning it rewrites identical files.
"""
import sys
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

SEED = 20240607
# type -> (elements per block, bytes per block, byte offsets of fp16 fields, blocks to write)
LAYOUTS = {
    "F32": (1, 4, [], 512),
    "F16": (1, 2, [], 512),
    "BF16": (1, 2, [], 512),
    "Q4_0": (32, 18, [0], 64),
    "Q4_1": (32, 20, [0, 2], 64),
    "Q5_0": (32, 22, [0], 64),
    "Q5_1": (32, 24, [0, 2], 64),
    "Q8_0": (32, 34, [0], 64),
    "Q4_K": (256, 144, [0, 2], 16),
    "Q5_K": (256, 176, [0, 2], 16),
    "Q6_K": (256, 210, [208], 16),
}
QUANTIZABLE = ["F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"]


def random_fp16_bits(rng, count):
    """Finite fp16 bit patterns: normal values of all exponents, subnormals, zeros, the max."""
    bits = rng.integers(0, 1 << 16, size=count, dtype=np.uint32)
    exponent = (bits >> 10) & 0x1F
    bits = np.where(exponent == 31, bits & ~np.uint32(1 << 14), bits)  # exponent 31 -> 15
    special = rng.integers(0, 8, size=count)
    bits = np.where(special == 0, 0x7BFF | (bits & 0x8000), bits)  # +-65504
    bits = np.where(special == 1, bits & 0x83FF, bits)  # subnormal or zero
    return bits.astype(np.uint16)


def random_blocks(rng, name):
    block_elems, block_bytes, fp16_offsets, num_blocks = LAYOUTS[name]
    raw = rng.integers(0, 256, size=(num_blocks, block_bytes), dtype=np.uint8)
    if name == "F32":
        values = raw.view(np.uint32).copy()
        exponent = (values >> 23) & 0xFF
        values = np.where(exponent == 255, values & ~np.uint32(1 << 30), values)
        return values.view(np.uint8).reshape(num_blocks, block_bytes)
    if name == "F16":
        return random_fp16_bits(rng, num_blocks).view(np.uint8).reshape(num_blocks, 2)
    if name == "BF16":
        values = raw.view(np.uint16).copy()
        exponent = (values >> 7) & 0xFF
        values = np.where(exponent == 255, values & ~np.uint16(1 << 14), values)
        return values.view(np.uint8).reshape(num_blocks, 2)
    for offset in fp16_offsets:
        raw[:, offset:offset + 2] = random_fp16_bits(rng, num_blocks).view(np.uint8).reshape(-1, 2)
    return raw


def random_floats(rng, count):
    """Normal values with a scale per 32 elements spanning 1e-4 .. 1e2, some all-zero groups."""
    groups = count // 32
    scale = 10.0 ** rng.uniform(-4, 2, size=(groups, 1))
    values = rng.standard_normal((groups, 32)) * scale
    # All-zero groups are +0.0: with signed zeros, which zero numpy's min() returns is unspecified.
    values[rng.integers(0, groups, size=max(1, groups // 16))] = 0.0
    return values.astype(np.float32).reshape(-1)


def main():
    out_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "tests/golden/quant"
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)
    total = 0
    for name, (block_elems, block_bytes, _, num_blocks) in LAYOUTS.items():
        blocks = random_blocks(rng, name)
        expected = quants.dequantize(blocks.reshape(-1), T[name]).astype(np.float32).reshape(-1)
        assert expected.size == num_blocks * block_elems
        files = {f"{name}.bin": blocks.tobytes(), f"{name}.f32": expected.astype("<f4").tobytes()}
        if name in QUANTIZABLE:
            inputs = random_floats(rng, 64 * 32)
            quantized = quants.quantize(inputs, T[name])
            files[f"{name}.quant.f32"] = inputs.astype("<f4").tobytes()
            files[f"{name}.quant.bin"] = np.ascontiguousarray(quantized).view(np.uint8).tobytes()
        for file_name, data in files.items():
            (out_dir / file_name).write_bytes(data)
            total += len(data)
    print(f"wrote {total} bytes to {out_dir}")


if __name__ == "__main__":
    main()

"""Minimal GGUF v2/v3 reader written from the GGUF spec (standard library + numpy).

Layout (little endian):
  magic "GGUF", u32 version, u64 tensor_count, u64 kv_count,
  kv_count x (string key, u32 value_type, value),
  tensor_count x (string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset),
  padding to general.alignment (default 32), then the tensor data section.
A string is a u64 byte length followed by UTF-8 bytes.
"""
import struct

import numpy as np

# GGUF metadata value types -> struct format of scalar types
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i",
           6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9

# Tensor types this reader can decode: ggml's float types; ggml's block types, in blocks of 32
# values (Q8_0: FP16 d, 32 int8 q, x = d*q; Q4_0: FP16 d, 16 bytes whose low nibbles are values
# 0-15 and high nibbles 16-31, x = d*(nibble - 8); Q4_1: FP16 d and m, nibbles, x = d*q + m;
# Q5_0/Q5_1: as Q4_0/Q4_1 with a 32-bit mask of fifth bits after d (and m), x = d*(q - 16) or
# d*q + m; IQ4_NL: FP16 d, nibbles as Q4_0's indexing 16 fixed int8 levels, x = d*level[nibble])
# or super-blocks of 256 (the K-quants, decoded by _decode_k below); and cpullm's
# per-channel INT8 (each row an FP32 scale d, then one int8 q per value, x = d*q).
GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q4_1, GGML_Q5_0, GGML_Q5_1, GGML_Q8_0 = 0, 1, 2, 3, 6, 7, 8
GGML_Q2_K, GGML_Q3_K, GGML_Q4_K, GGML_Q5_K, GGML_Q6_K, GGML_IQ4_NL, GGML_BF16 = 10, 11, 12, 13, 14, 20, 30
IQ4_NL_LEVELS = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], dtype=np.float64)
CPULLM_INT8_CHANNEL = 4097

K_QUANTS = (GGML_Q2_K, GGML_Q3_K, GGML_Q4_K, GGML_Q5_K, GGML_Q6_K)
# (values, bytes) per block
BLOCKS = {GGML_Q4_0: (32, 18), GGML_Q4_1: (32, 20), GGML_Q5_0: (32, 22), GGML_Q5_1: (32, 24), GGML_Q8_0: (32, 34),
           GGML_Q2_K: (256, 84), GGML_Q3_K: (256, 110), GGML_Q4_K: (256, 144), GGML_Q5_K: (256, 176),
           GGML_Q6_K: (256, 210), GGML_IQ4_NL: (32, 18)}
GGML_TYPES = (GGML_F32, GGML_F16, GGML_BF16) + tuple(BLOCKS)  # the ones of ggml's numbering
DECODED_TYPES = GGML_TYPES + (CPULLM_INT8_CHANNEL,)


def row_bytes(gtype, n):
    """Bytes of one row of n values."""
    if gtype in BLOCKS:
        values, size = BLOCKS[gtype]
        if n % values:
            raise ValueError(f"a row of {n} values is not whole blocks of {values}")
        return n // values * size
    if gtype == CPULLM_INT8_CHANNEL:
        return 4 + n
    return n * (4 if gtype == GGML_F32 else 2)


def _f16(blocks, at):
    """The FP16 at byte `at` of every block, as float64 [blocks, 1]."""
    return blocks[:, at:at + 2].copy().view("<f2").astype(np.float64)


def _nibbles(b):
    """[blocks, 32] values 0..15 from 16 bytes per block: low nibbles first, then the high ones."""
    return np.concatenate([b & 0x0F, b >> 4], axis=1).astype(np.int64)


def _fifth_bits(b):
    """[blocks, 32] bit j of each block's little-endian 32-bit mask, times 16."""
    mask = b.copy().view("<u4").astype(np.int64)  # [blocks, 1]
    return ((mask >> np.arange(32)) & 1) << 4


# Where each of a super-block's 256 values sits, as index arrays over the value's position v.
_V = np.arange(256)
_HALF, _IN_HALF = _V // 128, _V % 128          # Q2_K, Q3_K, Q6_K: two halves of 128
_GROUP, _L = _IN_HALF // 32, _IN_HALF % 32     # four groups of 32 in a half
_CHUNK, _IN_CHUNK = _V // 64, _V % 64          # Q4_K, Q5_K: four chunks of 64


def _six_bit_scales(s):
    """Q4_K/Q5_K: the 8 six-bit scales and minimums packed in 12 bytes, [blocks, 8] each."""
    s = s.astype(np.int64)
    j = np.arange(4)
    low_sc, low_m = s[:, j] & 63, s[:, j + 4] & 63
    high_sc = (s[:, j + 8] & 0x0F) | ((s[:, j] >> 6) << 4)
    high_m = (s[:, j + 8] >> 4) | ((s[:, j + 4] >> 6) << 4)
    return np.concatenate([low_sc, high_sc], axis=1), np.concatenate([low_m, high_m], axis=1)


def _decode_k(blocks, gtype):
    """float64 [blocks, 256] of K-quant super-blocks."""
    b = blocks.astype(np.int64)
    if gtype == GGML_Q2_K:  # 16 scale bytes (low nibble scale, high minimum), 64 bytes of 2-bit q, d, dmin
        sc = b[:, _HALF * 8 + _GROUP * 2 + _L // 16]
        q = (b[:, 16 + _HALF * 32 + _L] >> (2 * _GROUP)) & 3
        return _f16(blocks, 80) * (sc & 0x0F) * q - _f16(blocks, 82) * (sc >> 4)
    if gtype == GGML_Q3_K:  # 32 bytes of third bits, 64 of 2-bit q, 12 of packed scales, d
        i = np.arange(16)
        packed = b[:, 96:108]
        low = np.where(i < 8, packed[:, i % 8] & 0x0F, packed[:, i % 8] >> 4)
        scales = (low | (((packed[:, 8 + i % 4] >> (2 * (i // 4))) & 3) << 4)) - 32
        sc = scales[:, _HALF * 8 + _GROUP * 2 + _L // 16]
        low_bits = (b[:, 32 + _HALF * 32 + _L] >> (2 * _GROUP)) & 3
        third = (b[:, _L] >> (_HALF * 4 + _GROUP)) & 1
        return _f16(blocks, 108) * sc * (low_bits - 4 * (1 - third))
    if gtype in (GGML_Q4_K, GGML_Q5_K):  # d, dmin, 12 bytes of scales, (Q5_K: 32 of fifth bits), nibbles
        scales, minimums = _six_bit_scales(b[:, 4:16])
        sub = _CHUNK * 2 + _IN_CHUNK // 32
        qs = 16 if gtype == GGML_Q4_K else 48
        byte = b[:, qs + _CHUNK * 32 + _IN_CHUNK % 32]
        q = np.where(_IN_CHUNK < 32, byte & 0x0F, byte >> 4)
        if gtype == GGML_Q5_K:
            q = q | (((b[:, 16 + _IN_CHUNK % 32] >> sub) & 1) << 4)
        return _f16(blocks, 0) * scales[:, sub] * q - _f16(blocks, 2) * minimums[:, sub]
    # Q6_K: 128 bytes of low nibbles, 64 of high 2-bit pairs, 16 int8 scales, d
    byte = b[:, _HALF * 64 + (_GROUP % 2) * 32 + _L]
    low = np.where(_GROUP < 2, byte & 0x0F, byte >> 4)
    high = (b[:, 128 + _HALF * 32 + _L] >> (2 * _GROUP)) & 3
    sc = blocks[:, 192:208].copy().view(np.int8).astype(np.int64)[:, _HALF * 8 + _L // 16 + 2 * _GROUP]
    return _f16(blocks, 208) * sc * ((low | (high << 4)) - 32)


def _decode_rows(raw, gtype, n):
    """float64 [rows, n] from the rows' bytes."""
    if gtype == GGML_F32:
        return np.frombuffer(raw, dtype="<f4").astype(np.float64).reshape(-1, n)
    if gtype == GGML_F16:
        return np.frombuffer(raw, dtype="<f2").astype(np.float64).reshape(-1, n)
    if gtype == GGML_BF16:  # the upper 16 bits of an IEEE float32
        return (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64).reshape(-1, n)
    if gtype == CPULLM_INT8_CHANNEL:
        rows = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 4 + n)
        scale = rows[:, :4].copy().view("<f4").astype(np.float64)          # [rows, 1]
        return scale * rows[:, 4:].copy().view(np.int8).astype(np.float64)
    blocks = np.frombuffer(raw, dtype=np.uint8).reshape(-1, BLOCKS[gtype][1])
    if gtype in K_QUANTS:
        return _decode_k(blocks, gtype).reshape(-1, n)
    d = _f16(blocks, 0)                                                      # [blocks, 1]
    if gtype == GGML_Q8_0:
        x = d * blocks[:, 2:].copy().view(np.int8)
    elif gtype == GGML_Q4_0:
        x = d * (_nibbles(blocks[:, 2:]) - 8)
    elif gtype == GGML_Q4_1:
        x = d * _nibbles(blocks[:, 4:]) + _f16(blocks, 2)
    elif gtype == GGML_IQ4_NL:
        x = d * IQ4_NL_LEVELS[_nibbles(blocks[:, 2:])]
    elif gtype == GGML_Q5_0:
        x = d * ((_nibbles(blocks[:, 6:]) | _fifth_bits(blocks[:, 2:6])) - 16)
    else:  # Q5_1
        x = d * (_nibbles(blocks[:, 8:]) | _fifth_bits(blocks[:, 4:8])) + _f16(blocks, 2)
    return x.reshape(-1, n)


class _Cursor:
    """Sequential little-endian reader over a bytes buffer."""

    def __init__(self, buf):
        self.buf, self.pos = buf, 0

    def unpack(self, fmt):
        """Read one scalar with struct format fmt."""
        (v,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def string(self):
        """Read a GGUF string (u64 length + bytes)."""
        n = self.unpack("<Q")
        s = self.buf[self.pos:self.pos + n].decode("utf-8", errors="replace")
        self.pos += n
        return s

    def value(self, vtype):
        """Read one metadata value of GGUF type vtype (arrays may nest)."""
        if vtype in _SCALAR:
            return self.unpack(_SCALAR[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            etype, count = self.unpack("<I"), self.unpack("<Q")
            return [self.value(etype) for _ in range(count)]
        raise ValueError(f"unknown GGUF metadata value type {vtype}")


class GGUFFile:
    """A parsed GGUF file.

    Attributes:
      version:  GGUF version (2 or 3)
      metadata: dict key -> value (python scalars, str, or lists)
      tensors:  dict name -> (ne list, ggml type, absolute byte offset)
    """

    def __init__(self, path):
        with open(path, "rb") as f:
            self.buf = f.read()
        c = _Cursor(self.buf)
        if self.buf[:4] != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file (magic {self.buf[:4]!r})")
        c.pos = 4
        self.version = c.unpack("<I")
        if self.version not in (2, 3):
            raise ValueError(f"{path}: unsupported GGUF version {self.version}")
        n_tensors, n_kv = c.unpack("<Q"), c.unpack("<Q")

        self.metadata = {}
        for _ in range(n_kv):
            key = c.string()
            self.metadata[key] = c.value(c.unpack("<I"))

        infos = []
        for _ in range(n_tensors):
            name = c.string()
            n_dims = c.unpack("<I")
            ne = [c.unpack("<Q") for _ in range(n_dims)]
            gtype, offset = c.unpack("<I"), c.unpack("<Q")
            infos.append((name, ne, gtype, offset))

        align = int(self.metadata.get("general.alignment", 32))
        data_start = (c.pos + align - 1) // align * align
        self.tensors = {name: (ne, gtype, data_start + off) for name, ne, gtype, off in infos}

    def has(self, name):
        """True if the file holds a tensor called name."""
        return name in self.tensors

    def tensor(self, name):
        """Return tensor `name` as a float64 array of shape reversed(ne).

        For a matrix with ne = [n_in, n_out] the result is (n_out, n_in): row-major,
        one row per output feature.
        """
        ne, gtype, start = self.tensors[name]
        if gtype not in DECODED_TYPES:
            raise NotImplementedError(f"tensor {name}: ggml type {gtype} not supported (only {DECODED_TYPES})")
        n = int(ne[0]) if ne else 1
        rows = int(np.prod(ne[1:], dtype=np.int64)) if len(ne) > 1 else 1
        size = rows * row_bytes(gtype, n)
        raw = self.buf[start:start + size]
        if len(raw) != size:
            raise ValueError(f"tensor {name}: data runs past end of file")
        return _decode_rows(raw, gtype, n).reshape(tuple(reversed(ne)))

    def tensor_type(self, name):
        """The type number tensor `name` is stored in."""
        return self.tensors[name][1]


def read_gguf(path):
    """Parse path; return (metadata dict, get_tensor(name) -> float64 ndarray)."""
    g = GGUFFile(path)
    return g.metadata, g.tensor

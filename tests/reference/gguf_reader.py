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

# Tensor types this reader can decode: ggml's float types, ggml's Q8_0 and Q4_0 (blocks of 32
# values: an FP16 scale d, then 32 int8 q with x = d*q, or 16 bytes whose low nibbles are values
# 0-15 and high nibbles 16-31 with x = d*(nibble - 8)), and cpullm's per-channel INT8 (each row
# an FP32 scale d, then one int8 q per value, x = d*q; docs/kernels.md).
GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q8_0, GGML_BF16 = 0, 1, 2, 8, 30
CPULLM_INT8_CHANNEL = 4097


GGML_TYPES = (GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q8_0, GGML_BF16)  # the ones of ggml's numbering
DECODED_TYPES = GGML_TYPES + (CPULLM_INT8_CHANNEL,)
_BLOCK_BYTES = {GGML_Q4_0: 18, GGML_Q8_0: 34}  # per block of 32 values


def row_bytes(gtype, n):
    """Bytes of one row of n values."""
    if gtype in _BLOCK_BYTES:
        if n % 32:
            raise ValueError(f"a row of {n} values is not whole blocks of 32")
        return n // 32 * _BLOCK_BYTES[gtype]
    if gtype == CPULLM_INT8_CHANNEL:
        return 4 + n
    return n * (4 if gtype == GGML_F32 else 2)


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
    blocks = np.frombuffer(raw, dtype=np.uint8).reshape(-1, _BLOCK_BYTES[gtype])
    d = blocks[:, :2].copy().view("<f2").astype(np.float64)                 # [blocks, 1]
    if gtype == GGML_Q8_0:
        q = blocks[:, 2:].copy().view(np.int8).astype(np.float64)
    else:
        nibbles = blocks[:, 2:]
        q = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=1).astype(np.float64) - 8
    return (d * q).reshape(-1, n)


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

"""Reads and writes kiln plan files (runtime/plan_format.h, docs/plan_format.md)
in pure Python, so the robustness corpus can damage a real plan in ways that
keep its checksums valid: the loader's bounds checks must then catch what the
checksums no longer can. Standard library only (xxh64 is implemented here).
"""
import struct

MAGIC = b"KILNPLAN"
FORMAT_VERSION = 2
ALIGN = 256
FIXED_HEADER = 40  # magic 8, version 4, header size 4, file size 8, count 4, pad 4, xxh64 8
TABLE_ENTRY = 32   # id 4, pad 4, offset 8, size 8, xxh64 8
CHECKSUM_AT = 32
META, GRAPH, WEIGHTS, KERNELS, LAUNCHES, MEMORY, RESOURCES = 1, 2, 3, 4, 5, 6, 7  # resources: optional
SECTION_NAMES = {META: "meta", GRAPH: "graph", WEIGHTS: "weights", KERNELS: "kernels", LAUNCHES: "launches",
                 MEMORY: "memory", RESOURCES: "resources"}

_M = (1 << 64) - 1
_P1, _P2, _P3, _P4, _P5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x85EBCA77C2B2AE63,
                           0x27D4EB2F165667C5)


def _rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & _M


def _round(acc, lane):
    return (_rotl((acc + lane * _P2) & _M, 31) * _P1) & _M


def xxh64(data, seed=0):
    """XXH64 of `data` (bytes), as the xxHash library computes it."""
    n, p = len(data), 0
    if n >= 32:
        v = [(seed + _P1 + _P2) & _M, (seed + _P2) & _M, seed & _M, (seed - _P1) & _M]
        while p + 32 <= n:
            for i in range(4):
                v[i] = _round(v[i], struct.unpack_from("<Q", data, p + 8 * i)[0])
            p += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M
        for x in v:
            h = ((h ^ _round(0, x)) * _P1 + _P4) & _M
    else:
        h = (seed + _P5) & _M
    h = (h + n) & _M
    while p + 8 <= n:
        h ^= _round(0, struct.unpack_from("<Q", data, p)[0])
        h = (_rotl(h, 27) * _P1 + _P4) & _M
        p += 8
    if p + 4 <= n:
        h ^= (struct.unpack_from("<I", data, p)[0] * _P1) & _M
        h = (_rotl(h, 23) * _P2 + _P3) & _M
        p += 4
    while p < n:
        h ^= (data[p] * _P5) & _M
        h = (_rotl(h, 11) * _P1) & _M
        p += 1
    h ^= h >> 33
    h = (h * _P2) & _M
    h ^= h >> 29
    h = (h * _P3) & _M
    return h ^ (h >> 32)


def _align(v):
    return (v + ALIGN - 1) // ALIGN * ALIGN


def parse(data):
    """A plan's sections as [(id, bytes)] in table order (checks nothing)."""
    count = struct.unpack_from("<I", data, 24)[0]
    out = []
    for i in range(count):
        sid, _, off, size, _ = struct.unpack_from("<IIQQQ", data, FIXED_HEADER + TABLE_ENTRY * i)
        out.append((sid, bytes(data[off:off + size])))
    return out


def table_entry_at(i):
    """File offset of section table entry i (id, pad, offset, size, xxh64)."""
    return FIXED_HEADER + TABLE_ENTRY * i


def fix_header_checksum(data):
    """Recomputes the header's xxh64 after the header or table was edited."""
    b = bytearray(data)
    header_size = struct.unpack_from("<I", b, 12)[0]
    struct.pack_into("<Q", b, CHECKSUM_AT, 0)
    struct.pack_into("<Q", b, CHECKSUM_AT, xxh64(bytes(b[:header_size])))
    return bytes(b)


def build(sections, version=FORMAT_VERSION):
    """A plan file from [(id, bytes)], laid out as kiln's serializer does, every checksum valid."""
    header_size = FIXED_HEADER + TABLE_ENTRY * len(sections)
    offsets, at = [], _align(header_size)
    for _, body in sections:
        offsets.append(at)
        at = _align(at + len(body))
    out = bytearray(at)
    out[:8] = MAGIC
    struct.pack_into("<IIQII", out, 8, version, header_size, at, len(sections), 0)
    for i, ((sid, body), off) in enumerate(zip(sections, offsets)):
        struct.pack_into("<IIQQQ", out, table_entry_at(i), sid, 0, off, len(body), xxh64(body))
        out[off:off + len(body)] = body
    return fix_header_checksum(bytes(out))


def replace(sections, sid, body):
    return [(i, body if i == sid else b) for i, b in sections]


# --- section bodies ---------------------------------------------------------

def _str(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def read_meta(body):
    def s(p):
        n = struct.unpack_from("<Q", body, p)[0]
        return body[p + 8:p + 8 + n].decode(), p + 8 + n
    m = {}
    m["kiln_version"], p = s(0)
    m["target"], p = s(p)
    m["precision"], p = s(p)
    n = struct.unpack_from("<Q", body, p)[0]
    p += 8
    m["archs"] = []
    for _ in range(n):
        a, p = s(p)
        m["archs"].append(a)
    m["gpu_kernels"] = body[p] != 0
    m["no_gpu_reason"], p = s(p + 1)
    m["graph_constants"] = struct.unpack_from("<Q", body, p)[0]
    m["cubin_driver_version"], m["ptx_driver_version"] = struct.unpack_from("<ii", body, p + 8)
    return m


def write_meta(m):
    return (_str(m["kiln_version"]) + _str(m["target"]) + _str(m["precision"]) + struct.pack("<Q", len(m["archs"]))
            + b"".join(_str(a) for a in m["archs"]) + struct.pack("<B", m["gpu_kernels"]) + _str(m["no_gpu_reason"])
            + struct.pack("<Qii", m["graph_constants"], m.get("cubin_driver_version", 0),
                          m.get("ptx_driver_version", 0)))


def write_kernels(kernels):
    """kernels: [(name, source, arch, cubin bytes, ptx)] (no CUBINs of more archs)."""
    out = struct.pack("<Q", len(kernels))
    for name, source, arch, cubin, ptx in kernels:
        out += _str(name) + _str(source) + _str(arch) + _str(cubin) + _str(ptx) + struct.pack("<Q", 0)
    return out


def write_steps(steps):
    """steps: [(kind, node, kernel, grid(3), block(3), shared, [(buffer kind, index, offset, nbytes, elements)])]."""
    out = struct.pack("<Q", len(steps))
    for kind, node, kernel, grid, block, shared, args in steps:
        out += struct.pack("<BII3I3IIQ", kind, node, kernel, *grid, *block, shared, len(args))
        for a in args:
            out += struct.pack("<BIQQq", *a)
    return out


def weight_entries(body):
    """[(entry offset in the section, dtype, rank, offset field position, nbytes field position)]."""
    n = struct.unpack_from("<Q", body, 0)[0]
    p, out = 8, []
    for _ in range(n):
        start = p
        rank = struct.unpack_from("<Q", body, p + 2)[0]
        p += 10 + 8 * rank
        out.append((start, body[start], rank, p, p + 8))
        p += 16
    return out


def memory_arena_bytes(body):
    return struct.unpack_from("<Q", body, 0)[0]

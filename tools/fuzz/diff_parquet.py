#!/usr/bin/env python3
"""Differential check of verlc's Parquet reader against pyarrow: random tables (ints of every width, floats, bools,
strings, binary, lists, structs, maps, nested, nulls everywhere) written by pyarrow with random writer settings (row
group and page sizes, data page v1 / v2, dictionary or not, PLAIN / DELTA_BINARY_PACKED / DELTA_LENGTH_BYTE_ARRAY /
DELTA_BYTE_ARRAY / BYTE_STREAM_SPLIT encodings, each compression codec), read back by `verlc data jsonl` and compared
with the values written, put as verlc puts rows into JSON (maps as objects, binary as a data URI unless it is UTF-8 text, NaN as null,
timestamps and dates as their integers).

usage: diff_parquet.py N [SEED]     (from the repository root; needs pyarrow and build/verlc). Prints how many files
differ and the first few differences; $DIFF_PARQUET_KEEP=DIR keeps the files that differ there."""
import base64, json, math, os, random, subprocess, sys, tempfile
import pyarrow as pa
import pyarrow.parquet as pq

R = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
INTS = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]


def rtype(depth=0):
    k = R.random()
    if depth < 2 and k < 0.12:
        return pa.list_(rtype(depth + 1))
    if depth < 2 and k < 0.2:
        return pa.struct([(f"f{i}", rtype(depth + 1)) for i in range(R.randint(1, 3))])
    if depth < 2 and k < 0.25:
        return pa.map_(pa.string(), rtype(depth + 1))
    return R.choice(INTS + [pa.float32(), pa.float64(), pa.bool_(), pa.string(), pa.string(), pa.binary(),
                            pa.timestamp("ms"), pa.date32(), pa.large_string()])


def rval(t, nulls):
    if nulls and R.random() < 0.15:
        return None
    if pa.types.is_list(t):
        return [rval(t.value_type, nulls) for _ in range(R.randint(0, 4))]
    if pa.types.is_struct(t):
        return {f.name: rval(f.type, nulls) for f in t}
    if pa.types.is_map(t):
        return [(f"k{i}", rval(t.item_type, nulls)) for i in R.sample(range(9), R.randint(0, 3))]
    if pa.types.is_integer(t):
        bits = t.bit_width
        lo, hi = (0, 2 ** bits - 1) if pa.types.is_unsigned_integer(t) else (-2 ** (bits - 1), 2 ** (bits - 1) - 1)
        return R.choice([lo, hi, 0, 1, -1 if lo < 0 else 2, R.randint(lo, hi), R.randint(-100, 100) if lo < 0 else R.randint(0, 100)])
    if pa.types.is_floating(t):
        v = R.choice([0.0, -0.0, 1.5, 1e300, -2.5e-7, float("nan"), float("inf"), R.uniform(-1e6, 1e6), 0.1])
        return v if t == pa.float64() else float(__import__("numpy").float32(v)) if math.isfinite(v) else v
    if pa.types.is_boolean(t):
        return R.random() < 0.5
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "".join(R.choice(["a", "é", "中", "😀", " ", "\n", "\"", "\\", "x" * 20]) for _ in range(R.randint(0, 6)))
    if pa.types.is_binary(t):
        return bytes(R.randrange(256) for _ in range(R.randint(0, 8)))
    if pa.types.is_timestamp(t):
        return R.randint(-10 ** 12, 10 ** 13)
    if pa.types.is_date(t):
        return R.randint(-1000, 30000)
    raise ValueError(t)


def norm(v, t):
    """pyarrow's Python value as verlc writes it into JSON"""
    if v is None:
        return None
    if pa.types.is_list(t):
        return [norm(x, t.value_type) for x in v]
    if pa.types.is_struct(t):
        return {f.name: norm(v[f.name], f.type) for f in t}
    if pa.types.is_map(t):
        return {k: norm(x, t.item_type) for k, x in v}
    if pa.types.is_floating(t):
        return v if math.isfinite(v) else None
    if pa.types.is_binary(t):  # verlc reads bytes that are UTF-8 text (no NUL) as the text, others as a data URI
        try:
            if b"\0" not in v:
                return v.decode("utf-8")
        except UnicodeDecodeError:
            pass
        return "data:application/octet-stream;base64," + base64.b64encode(v).decode()
    return v


def one(i, tmp):
    ncol = R.randint(1, 5)
    schema = pa.schema([(f"c{j}", rtype()) for j in range(ncol)])
    nrows = R.choice([0, 1, 3, 17, 100, 1000])
    nulls = R.random() < 0.7
    cols = {f.name: [rval(f.type, nulls) for _ in range(nrows)] for f in schema}
    table = pa.table(cols, schema=schema)
    kw = dict(row_group_size=R.choice([None, 1, 7, 64]), data_page_size=R.choice([None, 64, 1024]),
              data_page_version=R.choice(["1.0", "2.0"]), compression=R.choice(["NONE", "SNAPPY", "GZIP", "ZSTD", "LZ4", "BROTLI"]),
              use_dictionary=R.random() < 0.5, write_statistics=R.random() < 0.5)
    if not kw["use_dictionary"] and R.random() < 0.6:  # per-column encodings where their types allow them
        enc = {}
        for f in schema:
            t = f.type
            if pa.types.is_integer(t) and t.bit_width >= 32:
                enc[f.name] = R.choice(["PLAIN", "DELTA_BINARY_PACKED", "BYTE_STREAM_SPLIT"])
            elif pa.types.is_floating(t):
                enc[f.name] = R.choice(["PLAIN", "BYTE_STREAM_SPLIT"])
            elif pa.types.is_string(t) or pa.types.is_binary(t):
                enc[f.name] = R.choice(["PLAIN", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY"])
        kw["column_encoding"] = enc
    kw = {k: v for k, v in kw.items() if v is not None}
    path = os.path.join(tmp, f"t{i}.parquet")
    try:
        pq.write_table(table, path, **kw)
        pq.read_table(path)  # (pyarrow 26 writes some nested tables with data_page_size and page v2 it cannot read back)
    except Exception:  # a combination pyarrow refuses
        return None
    ref = [{f.name: norm(cols[f.name][r], f.type) for f in schema} for r in range(nrows)]  # the values written
    out = os.path.join(tmp, f"t{i}.jsonl")
    r = subprocess.run(["build/verlc", "data", "jsonl", "--input", path, "--out", out], capture_output=True, text=True)
    keep = os.environ.get("DIFF_PARQUET_KEEP")  # a folder for the files that differ
    if keep and r.returncode == 0:
        got = [json.loads(l) for l in open(out)] if nrows else []
    if keep and (r.returncode or got != ref):
        os.makedirs(keep, exist_ok=True)
        __import__("shutil").copy(path, keep)
    if r.returncode:
        return (kw, str(schema), "verlc failed: " + r.stderr.strip()[-300:])
    got = [json.loads(l) for l in open(out)] if nrows else []
    if got != ref:
        k = next((j for j in range(min(len(got), len(ref))) if got[j] != ref[j]), min(len(got), len(ref)))
        return (kw, str(schema), f"row {k}: pyarrow {json.dumps(ref[k]) if k < len(ref) else '-'} verlc "
                                 f"{json.dumps(got[k]) if k < len(got) else '-'}")
    return False


N = int(sys.argv[1])
bad, done = [], 0
with tempfile.TemporaryDirectory() as tmp:
    for i in range(N):
        r = one(i, tmp)
        if r is None:
            continue
        done += 1
        if r:
            bad.append(r)
print(f"{done} files, {len(bad)} differ")
for kw, schema, msg in bad[:5]:
    print(" ", kw, schema.replace("\n", "; ")[:300], "\n   ", msg[:600])
sys.exit(1 if bad else 0)

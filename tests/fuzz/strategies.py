"""Hypothesis strategies over the real fixtures (``tests/data``) and structured fields."""

from __future__ import annotations

import gzip
import json
from functools import cache

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from tests import reliability_inputs as inputs


def fuzz_settings(examples: int) -> settings:
    """Bounded, deterministic (``derandomize``), no example database written anywhere."""
    return settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        phases=(Phase.explicit, Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )


#: values that broke an importer once or sit on a boundary
NASTY_TEXT = (
    "", " ", "-1", "0", "1e30", "-1e30", "1e400", "inf", "-inf", "nan", "NaN", "Infinity",
    "9223372036854775807", "9223372036854775808", "-9223372036854775809",
    "18446744073709551616", "1" + "0" * 400, "0x10", "1,000", "true", "null", "\x00", "\xff",
    '"', '""', "\n", ",", "[]", "{}", "(1, 1, 1)", "(99999999999999999999, 1, 1)", "é",
    "\u202e", "<script>", "n/a",
)

NASTY_BYTES = tuple(t.encode("utf-8", "surrogatepass") for t in NASTY_TEXT) + (
    b"\xff\xfe", b"\x00" * 64, b"[" * 2000, b"{" * 2000, b"\x1f\x8b", b"SQLite format 3\x00",
)

numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([2**63 - 1, 2**63, -(2**63) - 1, 10**30, 0, -1]),
)

cell_text = st.one_of(
    st.sampled_from(NASTY_TEXT),
    numbers.map(str),
    st.text(max_size=12),
)

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), numbers, st.text(max_size=8)),
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=6,
)

sqlite_values = st.one_of(
    st.none(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=True),
    st.text(max_size=10),
    st.binary(max_size=10),
)


@st.composite
def byte_mutations(draw, data: bytes) -> bytes:
    """1-4 byte-level edits of ``data``: flip, insert (nasty or random), delete, duplicate
    a range (repeated rows), truncate."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "dup", "truncate"]))
        pos = draw(st.integers(0, max(len(out) - 1, 0)))
        if op == "flip" and out:
            out[pos] = draw(st.integers(0, 255))
        elif op == "insert":
            token = draw(st.one_of(st.sampled_from(NASTY_BYTES), st.binary(min_size=1,
                                                                           max_size=8)))
            out[pos:pos] = token
        elif op == "delete":
            del out[pos : pos + draw(st.integers(1, 64))]
        elif op == "dup":
            length = draw(st.integers(1, 4096))
            out[pos:pos] = out[pos : pos + length]
        elif op == "truncate":
            del out[pos:]
    return bytes(out)


# ------------------------------------------------------------------------- seeds


@cache
def kineto_window() -> tuple[dict, ...]:
    """~300 consecutive events of the real V100 trace around its first kernels (CPU ops,
    runtime calls, flows, kernels), so mutations reach every branch of the import."""
    data = json.loads(gzip.decompress(inputs.KINETO.read_bytes()))
    events = [e for e in data["traceEvents"] if isinstance(e.get("ts"), int | float)]
    events.sort(key=lambda e: e["ts"])
    first = next(i for i, e in enumerate(events) if e.get("cat") == "kernel")
    return tuple(events[max(0, first - 150) : first + 150])


def kineto_bytes(events=None) -> bytes:
    return json.dumps({"traceEvents": list(events or kineto_window())}).encode()


@cache
def seed_files() -> dict[str, bytes]:
    """Small real inputs by name (suffix tells the importer what it is)."""
    wide = b"\n".join(inputs.WIDE.read_bytes().splitlines()[:60]) + b"\n"
    return {
        "gpu-trace-a.csv": inputs.NSYS_CSV.read_bytes(),
        "gpu-trace-b.csv": (inputs.DATA / "nsys"
                            / "vernier-nsys2025.3.2-thor_cuda_gpu_trace.csv").read_bytes(),
        "wide.csv": wide,
        "trace.json": kineto_bytes(),
        "trace.json.gz": gzip.compress(kineto_bytes(), mtime=0),
    }

"""PyTorch profiler (Kineto) Chrome-trace importer: launches, regions, counters, device.

Reads the JSON trace that ``torch.profiler`` / libkineto writes (``.json`` or gzip'd
``.json.gz``; the top level is an object with ``traceEvents``). Facts the code relies on,
checked against real traces (see ``tests/data/kineto/README.md``):

* **Times.** ``ts`` and ``dur`` are always microseconds. Traces written with nanosecond
  resolution (``"displayTimeUnit": "ns"``, e.g. the V100 HTA trace) still use microseconds,
  with three decimals (``"ts": 1712195495505582.988``); ``displayTimeUnit`` is only a viewer
  hint. A float64 holds epoch microseconds (~1.7e15) to 0.25 us only, so ``json.loads``'s
  default float parsing would lose up to 125 ns per timestamp; numbers are parsed as
  :class:`~decimal.Decimal` and converted exactly to int64 nanoseconds (round half even).
* **Kernels** are ``"ph": "X"`` events with ``cat`` ``"kernel"`` (older ``"Kernel"``).
  ``args``: ``device``, ``stream``, ``correlation``, ``registers per thread``, ``grid``
  and ``block`` ``[x, y, z]``, ``shared memory``. Kineto writes ``shared memory`` as
  ``staticSharedMemory + dynamicSharedMemory`` of the CUPTI kernel record (bytes per block):
  the split is lost, so the total goes to ``smem_static`` and ``smem_dynamic`` stays null
  (``launches.attrs["smem_static_is_total"]`` says so).
* **Copies.** ``gpu_memcpy`` / ``gpu_memset`` (older ``Memcpy`` / ``Memset``) events are
  not kernels: dropped and counted in ``launches.attrs``.
* **Regions.** ``gpu_user_annotation`` events are GPU-side ranges (``record_function`` /
  profiler steps projected onto the kernels they launched), one lane per ``pid`` (device)
  and ``tid`` (stream). Nesting is by containment in a lane (sorted by start, longest first;
  a range partially overlapping the open one closes it and becomes a sibling); ``depth`` 0
  is outermost and ``path`` joins the names with ``/``. A kernel's ``region`` is the path of
  the deepest range on its device whose ``[start, end]`` contains the kernel's
  ``[start, end]`` (ties at equal depth prefer the kernel's own stream). Without GPU
  ranges, the CPU-side ``user_annotation`` ranges are used instead: the kernel's
  ``correlation`` is the id of its ``ac2g`` flow and equals the ``correlation`` of the
  launching ``cuda_runtime`` / ``cuda_driver`` event, whose thread and time pick the
  deepest annotation on that thread containing the launch call.
* **CUPTI range profiler.** With ``experimental_config(profiler_metrics=[...],
  profiler_measure_per_kernel=True)`` Kineto writes one ``cuda_profiler_range`` event per
  kernel (``name`` = kernel name, ``"__missing__"`` when CUPTI had none; ``args`` = counter
  name -> value, e.g. ``smsp__sass_thread_inst_executed_op_ffma_pred_on.sum``) and *no*
  ``kernel`` events. Their ``ts``/``dur`` are placeholders: the profiled span cut into equal
  slices (every ``dur`` equal), not measured kernel times. Such a trace yields launches built
  from the ranges (``launches.attrs["durations_measured"] = False``) and ``metrics`` from
  their args. As Holistic Trace Analysis does, the ranges are paired in order with the
  ``cudaLaunchKernel``-like runtime calls when the counts agree, which gives each launch a
  ``correlation_id`` and a CPU ``user_annotation`` region. When a trace has both kernel
  events and ranges, the ranges are joined to the kernels in start order; the counts must
  agree and so must the names (``"__missing__"`` matches anything), else a one-line
  :class:`~hilsim.core.errors.HilsimError`.

Every failure (unreadable or truncated gzip, not JSON, no ``traceEvents``, no kernels, file
larger than ``max_bytes``) is one ``HilsimError`` line naming the file.

**Streaming.** The trace is never held whole: its (decompressed) text is read in blocks of a
few MB. The events of ``traceEvents`` are decoded many at a time by ``msgspec`` into a typed
record of the fields the import reads (the others are skipped unbuilt; ``ts``, ``dur`` and
``args`` stay raw JSON text until needed), and only the events the import uses are kept:
kernels and launch calls as columns, converted per batch with numpy / pyarrow (times exactly,
from their digits, through pyarrow decimals, round half even: never through float64). Memory
follows the number of kernels, not the file size (1M kernels, a 1.2 GB trace: ~0.7 GB).
A block of text is cut after its last ``},``; that is a boundary between two events exactly
when ``[`` + text + ``]`` decodes (a cut inside a string or a nested object cannot). Where it
is not, or an item is not an object, or the JSON is invalid, the events are read one at a
time by the standard library's scanner, which locates and words errors as ``json.loads``
does (line and column of the whole text). Dependencies: ``msgspec`` (typed decoding that
skips unread fields and keeps raw spans, ~4x the stdlib's speed here); not ``ijson``, whose
``items`` follows one path, so the top-level keys written after ``traceEvents``
(``traceName``, ``displayTimeUnit``) would need a second pass, and whose errors carry no
line and column.
"""

from __future__ import annotations

import codecs
import gzip
import json
import os
import re
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from hilsim.core import limits
from hilsim.core.bundle import Bundle, default_manifest
from hilsim.core.errors import HilsimError
from hilsim.core.schema import REGION_COLUMNS, normalize_launches, shown_value

FORMAT = "kineto-json"
PROFILER_NAME = "pytorch-profiler (kineto)"
MAX_TRACE_BYTES = 32 * 1024**3
"""Default limit on the (decompressed) trace size; larger files are refused. The trace is
streamed, so memory follows the kernels, not the bytes: a PyTorch trace takes ~1.2 KB per
kernel (with its launch call and flow events) and the import ~0.7 KB of memory per kernel,
so the limit is ~28M kernels and ~20 GB of memory."""

KERNEL_CATS = frozenset({"kernel", "Kernel"})
COPY_CATS = {
    "gpu_memcpy": "n_gpu_memcpy",
    "Memcpy": "n_gpu_memcpy",
    "gpu_memset": "n_gpu_memset",
    "Memset": "n_gpu_memset",
}
GPU_ANNOTATION_CAT = "gpu_user_annotation"
CPU_ANNOTATION_CAT = "user_annotation"
RANGE_CAT = "cuda_profiler_range"
LAUNCH_API_CATS = frozenset({"cuda_runtime", "cuda_driver"})
MISSING_RANGE_NAME = "__missing__"
REGION_MODES = ("auto", "gpu", "cpu", "none")

_GZIP_MAGIC = b"\x1f\x8b"
_NULL = msgspec.Raw(b"null")
_DEVICE_KEYS = {
    "id": "id",
    "totalGlobalMem": "memory_bytes",
    "numSms": "sm_count",
    "maxThreadsPerBlock": "max_threads_per_block",
    "maxThreadsPerMultiprocessor": "max_threads_per_sm",
    "regsPerBlock": "regs_per_block",
    "regsPerMultiprocessor": "regs_per_sm",
    "warpSize": "warp_size",
    "sharedMemPerBlock": "smem_per_block",
    "sharedMemPerMultiprocessor": "smem_per_sm",
    "sharedMemPerBlockOptin": "smem_per_block_optin",
}


@dataclass
class KinetoProfile:
    """What a Kineto trace holds, as bundle-v1 tables.

    Attributes:
        launches: bundle-v1 launches table (:func:`~hilsim.core.schema.normalize_launches`);
            ``attrs`` carries import counts and caveats (``n_gpu_memcpy``,
            ``n_gpu_memset``, ``dropped_non_kernel_rows``, ``launch_source``,
            ``durations_measured``, ``smem_static_is_total``, ``region_source``).
        regions: annotation ranges with exactly :data:`~hilsim.core.schema.REGION_COLUMNS`,
            or ``None`` when the trace has none (or ``regions="none"``).
        metrics: ``launch_id`` + one float64 column per CUPTI range-profiler counter
            (named as Kineto names them), or ``None`` without ``cuda_profiler_range``.
        device: the kernels' device from ``deviceProperties`` (``name``,
            ``compute_capability`` like ``"7.0"``, ``sm_count``, ``memory_bytes``, ...).
        meta: the trace's top-level fields except ``traceEvents`` / ``deviceProperties``
            (``schemaVersion``, ``traceName``, ``displayTimeUnit``, ...).
    """

    launches: pd.DataFrame
    regions: pd.DataFrame | None = None
    metrics: pd.DataFrame | None = None
    device: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------------------- reading


class _Event(msgspec.Struct, gc=False):
    """The fields of a trace event the import reads (the decoder skips the others).

    ``ts``, ``dur`` and ``args`` stay raw JSON text, converted only for the events kept
    (times exactly, from their digits). ``name`` is ``UNSET`` when absent. Not tracked by
    the garbage collector (``gc=False``): decoded JSON values cannot form cycles.
    """

    ph: Any = None
    cat: Any = None
    name: Any = msgspec.UNSET
    pid: Any = None
    tid: Any = None
    ts: msgspec.Raw = _NULL
    dur: msgspec.Raw = _NULL
    args: msgspec.Raw = _NULL


class _KernelArgs(msgspec.Struct, gc=False):
    """The ``args`` of a kernel event the import reads."""

    device: Any = None
    stream: Any = None
    correlation: Any = None
    registers: Any = msgspec.field(name="registers per thread", default=None)
    shared_memory: Any = msgspec.field(name="shared memory", default=None)
    grid: Any = None
    block: Any = None


class _CallArgs(msgspec.Struct, gc=False):
    """The ``args`` of a launch API call the import reads."""

    correlation: Any = None


# Numbers with a fraction become Decimal (exact), as json.loads(parse_float=Decimal) gives
_EVENTS_DECODER = msgspec.json.Decoder(list[_Event], float_hook=Decimal)
_KERNEL_ARGS_DECODER = msgspec.json.Decoder(list[_KernelArgs], float_hook=Decimal)
_CALL_ARGS_DECODER = msgspec.json.Decoder(list[_CallArgs], float_hook=Decimal)
_RAW_ENCODER = msgspec.json.Encoder(decimal_format="number")
# The stdlib scanner: top-level values, and events where msgspec cannot be used (errors
# are then located and worded exactly as json.loads words them)
_VALUE_DECODER = json.JSONDecoder(parse_float=Decimal)
_READ_BYTES = 1 << 22  # bytes read (decompressed) per block
_CHUNK_CHARS = 1 << 22  # text decoded per msgspec call (whole events)
# A decode error this many characters before the end of the text read so far cannot be
# caused by the end of the block (no JSON token of a trace is that long): it is real.
_ERROR_MARGIN = 1 << 24
_NONBLANK = re.compile(r"[^ \t\n\r]")


def _text_blocks(path: Path, max_bytes: int) -> Iterator[str]:
    """The trace's text (gunzipped if gzip'd, decoded as ``json.loads`` decodes bytes).

    Raises :class:`HilsimError` for an unreadable or broken file, or one larger than
    ``max_bytes`` once decompressed.
    """
    too_large = HilsimError(
        f"{path}: trace larger than {max_bytes} bytes (decompressed); "
        "refusing to load it (raise max_bytes to read it anyway)"
    )
    digits = limits.DigitRuns(path)
    try:
        with open(path, "rb") as handle:
            magic = handle.read(2)
            handle.seek(0)
            size = os.fstat(handle.fileno()).st_size
            if magic != _GZIP_MAGIC and size > max_bytes:
                raise too_large  # (known before reading; a gzip'd trace, once read)
            stream: Any = gzip.GzipFile(fileobj=handle) if magic == _GZIP_MAGIC else handle
            ratio = limits.Inflation(path, size) if magic == _GZIP_MAGIC else None
            with stream:
                total = 0
                decoder = None
                while True:
                    block = stream.read(_READ_BYTES)
                    total += len(block)
                    if total > max_bytes:
                        raise too_large
                    if ratio is not None:
                        ratio.check(total)
                    digits.feed(block)
                    if decoder is None:
                        if not block:
                            return
                        encoding = json.detect_encoding(block[:4])
                        decoder = codecs.getincrementaldecoder(encoding)()
                        offset = 0
                    try:
                        text = decoder.decode(block, final=not block)
                    except UnicodeDecodeError as exc:
                        where = offset + exc.start  # as json.loads words it for the whole
                        span = (
                            f"byte 0x{exc.object[exc.start]:02x} in position {where}"
                            if exc.end - exc.start == 1
                            else f"bytes in position {where}-{offset + exc.end - 1}"
                        )
                        raise HilsimError(
                            f"{path}: not a Kineto trace: not readable JSON ('{exc.encoding}' "
                            f"codec can't decode {span}: {exc.reason})"
                        ) from exc
                    offset += len(block)
                    if text:
                        yield text
                    if not block:
                        return
    except EOFError as exc:
        raise HilsimError(f"{path}: truncated gzip file (stream ended early: {exc})") from exc
    except (gzip.BadGzipFile, zlib.error) as exc:
        raise HilsimError(f"{path}: corrupt gzip file ({exc})") from exc
    except OSError as exc:
        raise HilsimError(f"{path}: cannot read ({exc.strerror or exc})") from exc


class _JsonText:
    """JSON text read block by block; values decoded one at a time (stdlib C scanner).

    Keeps only the text not consumed yet (plus the line and column where it starts, for
    error messages that count from the start of the whole text, as ``json.loads`` does).
    """

    def __init__(self, path: Path, blocks: Iterator[str]) -> None:
        self.path = path
        self._blocks = blocks
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.base = 0  # characters before buf[0]
        self._line = 0  # newlines before buf[0]
        self._column = 0  # characters since the last newline before buf[0]

    def more(self) -> bool:
        """Append the next block of text (dropping what was consumed); False at the end."""
        if self.eof:
            return False
        block = next(self._blocks, None)
        if block is None:
            self.eof = True
            return False
        if self.pos:
            newlines = self.buf.count("\n", 0, self.pos)
            if newlines:
                self._line += newlines
                self._column = self.pos - self.buf.rfind("\n", 0, self.pos) - 1
            else:
                self._column += self.pos
            self.buf = self.buf[self.pos :] + block
            self.base += self.pos
            self.pos = 0
        else:
            self.buf += block
        return True

    def peek(self) -> str:
        """The next non-blank character ('' at the end), skipping the blanks before it."""
        while True:
            match = _NONBLANK.search(self.buf, self.pos)
            if match:
                self.pos = match.start()
                return self.buf[self.pos]
            self.pos = len(self.buf)
            if not self.more():
                return ""

    def value(self, decoder: json.JSONDecoder) -> Any:
        """Decode the value at the current position (which may span blocks)."""
        while True:
            try:
                value, end = decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if self.eof or len(self.buf) - exc.pos >= _ERROR_MARGIN or not self.more():
                    raise self.error(exc.msg, exc.pos) from exc
                continue
            except (RecursionError, ValueError) as exc:
                raise HilsimError(
                    f"{self.path}: not a Kineto trace: not readable JSON ({exc})"
                ) from exc
            # a value ending where the text read so far ends may go on (a number)
            if end < len(self.buf) or not self.more():
                self.pos = end
                return value

    def expect(self, char: str) -> None:
        """Consume ``char``, the next non-blank character (the caller checked it)."""
        self.pos += 1

    def after_item(self, closer: str) -> bool:
        """After an object member or array item: consume ``closer`` (True) or the ','
        before the next item (False); anything else is the error json.loads reports."""
        char = self.peek()
        if char == closer:
            self.expect(closer)
            return True
        if char != ",":
            raise self.error("Expecting ',' delimiter", self.pos)
        self.expect(",")
        return False

    def rest(self) -> str:
        """All the text not consumed yet (read to the end)."""
        while self.more():
            pass
        return self.buf[self.pos :]

    def error(self, message: str, pos: int) -> HilsimError:
        """``message`` at ``pos`` of the buffer, located as ``json.loads`` locates it."""
        newlines = self.buf.count("\n", 0, pos)
        column = pos - self.buf.rfind("\n", 0, pos) if newlines else self._column + pos + 1
        return HilsimError(
            f"{self.path}: not a Kineto trace: invalid JSON at line {self._line + newlines + 1} "
            f"column {column} ({message})"
        )


def _stream_trace(path: Path, max_bytes: int, scan: _Scan) -> dict[str, Any]:
    """Feed the events of ``traceEvents`` to ``scan``; return the other top-level keys."""
    text = _JsonText(path, _text_blocks(path, max_bytes))
    char = text.peek()
    if not char:
        raise HilsimError(f"{path}: empty file: not a Kineto trace")
    if char != "{":  # not an object: parsed whole, to say what it is
        try:
            data = json.loads(text.rest(), parse_float=Decimal)
        except json.JSONDecodeError as exc:
            raise text.error(exc.msg, text.pos + exc.pos) from exc
        except (RecursionError, ValueError) as exc:
            raise HilsimError(f"{path}: not a Kineto trace: not readable JSON ({exc})") from exc
        _check_top(path, data)
    top: dict[str, Any] = {}
    seen_events = False
    text.expect("{")
    char = text.peek()
    if char == "}":
        text.expect("}")
    else:
        while True:
            if char != '"':
                raise text.error("Expecting property name enclosed in double quotes", text.pos)
            key = text.value(_VALUE_DECODER)
            if text.peek() != ":":
                raise text.error("Expecting ':' delimiter", text.pos)
            text.expect(":")
            if key == "traceEvents" and text.peek() == "[":
                if seen_events:  # a repeated key: json.loads keeps the last value
                    scan.reset()
                text.expect("[")
                _stream_events(text, scan)
                top[key] = scan.events_marker
                seen_events = True
            else:
                if not text.peek():
                    raise text.error("Expecting value", text.pos)
                top[key] = text.value(_VALUE_DECODER)
            if text.after_item("}"):
                break
            char = text.peek()
    if text.peek():
        raise text.error("Extra data", text.pos)
    if seen_events and top.get("traceEvents") is not scan.events_marker:
        scan.reset()  # a later 'traceEvents' key replaced the streamed list (json.loads)
    _check_top(path, top)
    return top


def _check_top(path: Path, data: Any) -> None:
    if not isinstance(data, dict) or "traceEvents" not in data:
        what = "an object without" if isinstance(data, dict) else f"a JSON {type(data).__name__}"
        raise HilsimError(
            f"{path}: not a Kineto trace: {what} a 'traceEvents' key "
            "(expected the PyTorch profiler's Chrome trace JSON)"
        )
    if data["traceEvents"] is not _EVENTS and not isinstance(data["traceEvents"], list):
        raise HilsimError(f"{path}: 'traceEvents' is not a list of events")


def _stream_events(text: _JsonText, scan: _Scan) -> None:
    """Decode the items of the array whose '[' was just consumed, feeding them to ``scan``.

    Fast path: the text up to the last ``},`` read so far is decoded in one msgspec call
    (typed, skipping unread fields). That text ends between two events exactly when it
    decodes as ``[...]``: a cut inside a string or a nested object leaves it unbalanced,
    and msgspec rejects it. Otherwise (or for items that are not objects, NaN, ...) the
    events are read one at a time by the stdlib scanner, which also words any error.
    """
    char = text.peek()
    if char == "]":
        text.expect("]")
        return
    while True:
        # here text.pos is at the start of an item
        while len(text.buf) - text.pos < _CHUNK_CHARS and text.more():
            pass
        cut = text.buf.rfind("},", text.pos)
        events = None
        if cut > text.pos:
            try:
                events = _EVENTS_DECODER.decode("[" + text.buf[text.pos : cut + 1] + "]")
            except (msgspec.DecodeError, msgspec.ValidationError):
                events = None
        if events is not None:
            scan.add_many(events)
            text.pos = cut + 2
            if not text.peek():
                raise text.error("Expecting value", text.pos)
            continue
        # careful path: one item at a time, past the chunk tried (or to the array's end)
        stop = text.base + max(cut + 2, text.pos + 1)
        while True:
            scan.add_value(text.value(_VALUE_DECODER))
            if text.after_item("]"):
                return
            if not text.peek():
                raise text.error("Expecting value", text.pos)
            if text.base + text.pos >= stop:
                break


def _ns(value: Any) -> int | None:
    """Microseconds (int, Decimal or float) -> int nanoseconds, exactly for int/Decimal."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value * 1000
    if isinstance(value, Decimal):
        try:
            return int((value * 1000).to_integral_value(rounding=ROUND_HALF_EVEN))
        except (InvalidOperation, OverflowError, ValueError):
            return None
    if isinstance(value, float) and np.isfinite(value):
        return round(value * 1000)
    return None


def _int(value: Any) -> int | None:
    """An optional integer fact (grid, stream, ...); None when absent, not a number, or
    beyond int64 (never wrapped)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, Decimal | float):
        try:
            value = int(round(value))
        except (InvalidOperation, OverflowError, ValueError):
            return None
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**63 else None
    return None


def _float(value: Any) -> float:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float | Decimal):
        return float(value)
    return np.nan


def _plain(value: Any) -> Any:
    """Decimals -> float, recursively (for meta / device dicts that end up in JSON)."""
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _triple(value: Any) -> tuple[int | None, int | None, int | None]:
    if isinstance(value, list) and len(value) == 3:
        x, y, z = (_int(v) for v in value)
        return x, y, z
    return None, None, None


def _int_array(values: list[int | None]) -> pd.arrays.IntegerArray:
    return pd.array(values, dtype="Int64")


# ----------------------------------------------------------------------------- columns


def _ns_raw(raws: list[msgspec.Raw]) -> tuple[np.ndarray, np.ndarray]:
    """Raw JSON microsecond numbers -> (int64 nanoseconds, valid mask), exactly.

    The digits go through pyarrow decimals (exact, round half even, as :func:`_ns`);
    a batch with anything else (null, text, more than 9 decimals, ...) is read value by
    value with the stdlib (Decimal) and :func:`_ns`.
    """
    n = len(raws)
    try:
        # (a NUL byte cannot occur in JSON text: a safe separator, split in C)
        text = pa.array(b"\x00".join(raws).split(b"\x00"), pa.binary()).cast(pa.string())
        micro = text.cast(pa.decimal128(30, 9))
        nano = pc.multiply(micro, pa.scalar(Decimal(1000), pa.decimal128(4, 0)))
        rounded = pc.round(nano, ndigits=0, round_mode="half_to_even")
        return rounded.cast(pa.int64()).to_numpy(), np.ones(n, dtype=bool)
    except (pa.ArrowException, OverflowError, ValueError, TypeError):
        pass
    out = np.zeros(n, dtype=np.int64)
    ok = np.zeros(n, dtype=bool)
    for i, raw in enumerate(raws):  # unusual values only
        ns = _ns(_raw_value(raw))
        if ns is not None and -(2**63) <= ns < 2**63:
            out[i], ok[i] = ns, True
    return out, ok


def _raw_value(raw: msgspec.Raw) -> Any:
    """The value of raw JSON text, as ``json.loads(parse_float=Decimal)`` gives it."""
    return _VALUE_DECODER.decode(bytes(raw).decode("utf-8"))


def _args(
    raws: list[msgspec.Raw], decoder: msgspec.json.Decoder, keys: dict[str, str]
) -> dict[str, list[Any]]:
    """Per JSON key of ``keys`` (key -> attribute of the decoder's struct), that arg of
    every event (None where absent, or where ``args`` is not an object)."""
    try:
        structs = decoder.decode(b"[" + b",".join(raws) + b"]")
        return {key: list(map(attrgetter(attr), structs)) for key, attr in keys.items()}
    except (msgspec.DecodeError, msgspec.ValidationError):
        pass
    dicts = []
    for raw in raws:  # some args are not objects (or hold what msgspec refuses)
        value = _raw_value(raw)
        dicts.append(value if isinstance(value, dict) else {})
    return {key: [d.get(key) for d in dicts] for key in keys}


def _int_values(values: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """JSON values -> (int64 values, null mask) as :func:`_int` reads each (null: None)."""
    try:
        array = pa.array(values)  # typed int64 (or null) only when all are ints or None
        if array.type in (pa.int64(), pa.null()):
            mask = np.array(array.is_null().to_numpy(zero_copy_only=False), dtype=bool)
            data = array.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
            return np.array(data, dtype=np.int64), mask
    except (pa.ArrowException, OverflowError, ValueError, TypeError):
        pass
    read = [_int(v) for v in values]  # mixed or unusual values only
    mask = np.array([v is None for v in read], dtype=bool)
    return np.array([0 if v is None else v for v in read], dtype=np.int64), mask


def _triple_values(values: list[Any]) -> list[tuple[np.ndarray, np.ndarray]]:
    """``[x, y, z]`` JSON lists -> three (int64 values, null mask) pairs (as :func:`_triple`)."""
    n = len(values)
    try:
        array = pa.array(values)  # typed list<int64> only when all are lists of ints
        lengths = pc.list_value_length(array) if array.type == pa.list_(pa.int64()) else None
        if lengths is not None and array.null_count == 0 and pc.all(pc.equal(lengths, 3)).as_py():
            flat = array.flatten()
            if flat.null_count == 0:
                xyz = np.array(flat.to_numpy(), dtype=np.int64).reshape(n, 3)
                return [(xyz[:, k].copy(), np.zeros(n, dtype=bool)) for k in range(3)]
    except (pa.ArrowException, OverflowError, ValueError, TypeError):
        pass
    triples = [_triple(v) for v in values]  # mixed or unusual values only
    out = []
    for k in range(3):
        mask = np.array([t[k] is None for t in triples], dtype=bool)
        out.append((np.array([t[k] or 0 for t in triples], dtype=np.int64), mask))
    return out


class _Columns:
    """Columns built batch by batch: int64 / bool numpy parts, nullable ones with a mask."""

    def __init__(self) -> None:
        self.parts: dict[str, list[np.ndarray]] = {}

    def add(self, name: str, values: np.ndarray) -> None:
        self.parts.setdefault(name, []).append(values)

    def add_int(self, name: str, values: tuple[np.ndarray, np.ndarray]) -> None:
        self.add(name, values[0])
        self.add(f"{name}\x00mask", values[1])

    def get(self, name: str, dtype: Any = np.int64) -> np.ndarray:
        """The whole column (its parts replaced by it: no second copy stays behind)."""
        parts = self.parts.get(name, [])
        if not parts:
            return np.empty(0, dtype=dtype)
        if len(parts) > 1:
            self.parts[name] = parts = [np.concatenate(parts)]
        return parts[0]

    def get_int(self, name: str) -> pd.arrays.IntegerArray:
        return pd.arrays.IntegerArray(self.get(name), self.get(f"{name}\x00mask", bool))


def _or_else(first: tuple[np.ndarray, np.ndarray], other: tuple[np.ndarray, np.ndarray]):
    """``first`` where not null, else ``other`` (values, mask pairs)."""
    (values, mask), (other_values, other_mask) = first, other
    return np.where(mask, other_values, values), mask & other_mask


_BATCH = 1 << 15  # events per conversion batch
_CAT, _TS, _DUR, _ARGS = (attrgetter(f) for f in ("cat", "ts", "dur", "args"))
_PID, _TID = attrgetter("pid"), attrgetter("tid")
_KERNEL_ARG_KEYS = {
    "device": "device",
    "stream": "stream",
    "correlation": "correlation",
    "registers per thread": "registers",
    "shared memory": "shared_memory",
    "grid": "grid",
    "block": "block",
}


def _name(name: Any, missing: str) -> str:
    """``str(event.get("name", missing))`` of an :class:`_Event`."""
    if type(name) is str:
        return name
    return missing if name is msgspec.UNSET else str(name)


class _Kernels:
    """Kernel events as columns: name, start/duration (ns), device (``args.device``, else
    ``pid``), stream (``args.stream``, else ``tid``), correlation, registers, shared memory,
    grid and block, pid and tid. Converted per batch; the first kernel without numeric
    ``ts``/``dur`` (input order) is raised by :meth:`frame`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.batch: list[_Event] = []
        self.columns = _Columns()
        self.names: dict[str, int] = {}
        self.count = 0
        self.error: HilsimError | None = None

    def flush(self) -> None:
        events, self.batch = self.batch, []
        if not events:
            return
        self.count += len(events)
        names = self.names
        codes = [names.setdefault(_name(e.name, ""), len(names)) for e in events]
        self.columns.add("name", np.array(codes, dtype=np.int64))
        start, start_ok = _ns_raw(list(map(_TS, events)))
        dur, dur_ok = _ns_raw(list(map(_DUR, events)))
        bad = ~(start_ok & dur_ok)
        if bad.any() and self.error is None:
            event = events[int(np.flatnonzero(bad)[0])]
            self.error = HilsimError(
                f"{self.path}: kernel {_name(event.name, '?')[:80]!r}: ts/dur not a number "
                f"of ns below 2^63 (ts={shown_value(_raw_value(event.ts))}, "
                f"dur={shown_value(_raw_value(event.dur))})"
            )
        self.columns.add("start_ns", start)
        self.columns.add("duration_ns", dur)
        args = _args(list(map(_ARGS, events)), _KERNEL_ARGS_DECODER, _KERNEL_ARG_KEYS)
        pid = _int_values(list(map(_PID, events)))
        tid = _int_values(list(map(_TID, events)))
        self.columns.add_int("device", _or_else(_int_values(args["device"]), pid))
        self.columns.add_int("stream", _or_else(_int_values(args["stream"]), tid))
        for column, key in (
            ("correlation_id", "correlation"),
            ("regs", "registers per thread"),
            ("smem_static", "shared memory"),
        ):
            self.columns.add_int(column, _int_values(args[key]))
        for prefix in ("grid", "block"):
            xyz = _triple_values(args[prefix])
            for axis, values in zip("xyz", xyz, strict=True):
                self.columns.add_int(f"{prefix}_{axis}", values)
        self.columns.add_int("pid", pid)
        self.columns.add_int("tid", tid)

    def frame(self) -> pd.DataFrame:
        """The kernels in input order (``name`` categorical, sorted categories)."""
        self.flush()
        if self.error is not None:
            raise self.error
        categories = np.array(list(self.names), dtype=object)
        order = np.argsort(categories, kind="stable")
        recode = np.empty(len(order), dtype=np.int64)
        recode[order] = np.arange(len(order))
        frame = pd.DataFrame(
            {
                "name": pd.Categorical.from_codes(
                    recode[self.columns.get("name")], categories=categories[order]
                ),
                "start_ns": self.columns.get("start_ns"),
                "duration_ns": self.columns.get("duration_ns"),
            }
        )
        for column in (
            "device",
            "stream",
            "correlation_id",
            "regs",
            "smem_static",
            "grid_x",
            "grid_y",
            "grid_z",
            "block_x",
            "block_y",
            "block_z",
            "pid",
            "tid",
        ):
            frame[column] = self.columns.get_int(column)
        self.columns = _Columns()  # the frame holds the columns now
        return frame


class _LaunchCalls:
    """``cuda_runtime`` / ``cuda_driver`` events as columns: correlation, thread lane, span,
    and whether the call launches a kernel (name has ``Launch`` and ``Kernel``)."""

    def __init__(self) -> None:
        self.batch: list[_Event] = []
        self.columns = _Columns()
        self.lanes: dict[Any, int] = {}  # (pid, tid) -> lane code
        self.lane_keys: dict[str, int] = {}  # "pid\0tid" -> lane code
        self.count = 0

    def _lane(self, pid: Any, tid: Any) -> int:
        key = (type(pid), pid, type(tid), tid)
        try:
            return self.lanes[key]
        except KeyError:
            code = self.lane_keys.setdefault(f"{pid!s}\x00{tid!s}", len(self.lane_keys))
            self.lanes[key] = code
            return code
        except TypeError:  # unhashable pid/tid
            return self.lane_keys.setdefault(f"{pid!s}\x00{tid!s}", len(self.lane_keys))

    def flush(self) -> None:
        events, self.batch = self.batch, []
        if not events:
            return
        self.count += len(events)
        args = _args(list(map(_ARGS, events)), _CALL_ARGS_DECODER, {"correlation": "correlation"})
        self.columns.add_int("correlation", _int_values(args["correlation"]))
        start, start_ok = _ns_raw(list(map(_TS, events)))
        dur, dur_ok = _ns_raw(list(map(_DUR, events)))
        self.columns.add("start", start)
        self.columns.add("start_ok", start_ok)
        self.columns.add("end", start + dur)
        self.columns.add("span_ok", start_ok & dur_ok)
        lane = self._lane
        self.columns.add("lane", np.array([lane(e.pid, e.tid) for e in events], np.int64))
        names = [_name(e.name, "") for e in events]
        launches = [("Launch" in name and "Kernel" in name) for name in names]
        self.columns.add("launches_kernel", np.array(launches, dtype=bool))

    def get(self, name: str, dtype: Any = np.int64) -> np.ndarray:
        self.flush()
        return self.columns.get(name, dtype)

    def get_int(self, name: str) -> pd.arrays.IntegerArray:
        self.flush()
        return self.columns.get_int(name)

    def lane_names(self) -> list[str]:
        """The "pid\\0tid" key of every lane code."""
        return list(self.lane_keys)


_EVENTS = object()  # stands for the streamed traceEvents list in the top-level dict


class _Scan:
    """The events of interest, sorted by category as they stream by."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.events_marker = _EVENTS
        self.reset()

    def reset(self) -> None:
        self.kernels = _Kernels(self.path)
        self.launch_calls = _LaunchCalls()
        self.ranges: list[dict[str, Any]] = []
        self.gpu_annotations: list[dict[str, Any]] = []
        self.cpu_annotations: list[dict[str, Any]] = []
        self.counts: Counter = Counter()
        self.categories: Counter = Counter()
        self.n_events = 0

    def add_many(self, events: list[_Event]) -> None:
        """Events in trace order (kernels and launch calls are batched, the rest sorted)."""
        self.n_events += len(events)
        timed = [e for e in events if e.ph == "X"]
        cats = list(map(_CAT, timed))
        try:
            self.categories.update(cats)
        except TypeError:  # a 'cat' that is a list or an object: no category of ours
            cats = [c if isinstance(c, str) else f"<{type(c).__name__}>" for c in cats]
            self.categories.update(cats)
        kernels, calls = self.kernels.batch, self.launch_calls.batch
        for event, cat in zip(timed, cats, strict=True):
            if cat in KERNEL_CATS:
                kernels.append(event)
            elif cat in LAUNCH_API_CATS:
                calls.append(event)
            else:
                self._other(event, cat)
        if len(kernels) >= _BATCH:
            self.kernels.flush()
        if len(calls) >= _BATCH:
            self.launch_calls.flush()

    def _other(self, event: _Event, cat: Any) -> None:
        if cat in COPY_CATS:
            self.counts[COPY_CATS[cat]] += 1
        elif cat == GPU_ANNOTATION_CAT:
            self.gpu_annotations.append(_event_dict(event))
        elif cat == CPU_ANNOTATION_CAT:
            self.cpu_annotations.append(_event_dict(event))
        elif cat == RANGE_CAT:
            self.ranges.append(_event_dict(event))

    def add_value(self, value: Any) -> None:
        """An item the stdlib decoded (one that is not an object counts, and is skipped)."""
        if isinstance(value, dict):
            self.add_many([_as_event(value)])
        else:
            self.n_events += 1


def _as_event(event: dict[str, Any]) -> _Event:
    """The :class:`_Event` of an event the stdlib decoded (raw fields re-encoded exactly)."""
    return _Event(
        ph=event.get("ph"),
        cat=event.get("cat"),
        name=event.get("name", msgspec.UNSET),
        pid=event.get("pid"),
        tid=event.get("tid"),
        ts=_raw(event.get("ts")),
        dur=_raw(event.get("dur")),
        args=_raw(event["args"]) if "args" in event else _NULL,
    )


def _raw(value: Any) -> msgspec.Raw:
    """JSON text of a value the stdlib decoded (Decimals as their digits; NaN/Infinity as
    ``json`` writes them, for the stdlib to read back)."""
    if isinstance(value, float) and not np.isfinite(value):
        return msgspec.Raw(json.dumps(value).encode())
    return msgspec.Raw(_RAW_ENCODER.encode(value))


def _event_dict(event: _Event) -> dict[str, Any]:
    """An event kept whole (ranges, annotations) as the dict ``json.loads`` gives for it."""
    out = {
        "ph": event.ph,
        "cat": event.cat,
        "pid": event.pid,
        "tid": event.tid,
        "ts": _raw_value(event.ts),
        "dur": _raw_value(event.dur),
        "args": _raw_value(event.args),
    }
    if event.name is not msgspec.UNSET:
        out["name"] = event.name
    return out


def _span(path: Path, event: dict[str, Any], what: str) -> tuple[int, int]:
    start, dur = _ns(event.get("ts")), _ns(event.get("dur"))
    if start is None or dur is None or not (abs(start) < 2**63 and abs(dur) < 2**63):
        raise HilsimError(
            f"{path}: {what} {str(event.get('name', '?'))[:80]!r}: ts/dur not a number of ns "
            f"below 2^63 (ts={shown_value(event.get('ts'))}, dur={shown_value(event.get('dur'))})"
        )
    return start, dur


# ----------------------------------------------------------------------------- tables


def _range_frame(path: Path, ranges: list[dict[str, Any]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Launch rows and counter columns from ``cuda_profiler_range`` events (input order)."""
    n = len(ranges)
    names: list[str] = []
    start = np.empty(n, dtype=np.int64)
    dur = np.empty(n, dtype=np.int64)
    device: list[int | None] = []
    counters: dict[str, np.ndarray] = {}
    for i, event in enumerate(ranges):
        names.append(str(event.get("name", MISSING_RANGE_NAME)))
        start[i], dur[i] = _span(path, event, "cuda_profiler_range")
        device.append(_int(event.get("pid")))
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        for key, value in args.items():
            if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
                continue
            column = counters.get(key)
            if column is None:
                column = counters[key] = np.full(n, np.nan)
            column[i] = float(value)
    frame = pd.DataFrame({"name": names, "start_ns": start, "duration_ns": dur})
    frame["device"] = _int_array(device)
    return frame, pd.DataFrame(counters, index=pd.RangeIndex(n))


def _kernel_lane_codes(region_keys: list[str], values: pd.Series) -> list[np.ndarray]:
    """:func:`_lane_codes` of the regions' keys and ``str`` of each kernel's value (-1 for
    null), worked out once per distinct value."""
    codes, uniques = pd.factorize(values.fillna(-1).to_numpy(dtype=np.int64))
    reg_lane, unique_lane = _lane_codes(region_keys, [str(int(u)) for u in uniques])
    return [reg_lane, unique_lane[codes] if len(codes) else codes.astype(np.int64)]


def _lane_codes(*keys: list[Any]) -> list[np.ndarray]:
    """Factorize lane keys (pid, tid may be int or str) jointly across several lists."""
    joined = [str(k) for ks in keys for k in ks]
    codes, _ = pd.factorize(pd.Index(joined, dtype=object))
    out, offset = [], 0
    for ks in keys:
        out.append(codes[offset : offset + len(ks)].astype(np.int64))
        offset += len(ks)
    return out


def _nest(path: Path, annotations: list[dict[str, Any]], what: str) -> pd.DataFrame:
    """Regions table (plus ``lane`` and ``pid``/``tid``) with depth/path by containment."""
    rows = []
    for event in annotations:
        start, dur = _span(path, event, what)
        rows.append(
            (str(event.get("name", "")), start, start + dur, event.get("pid"), event.get("tid"))
        )
    frame = pd.DataFrame(rows, columns=["name", "start_ns", "end_ns", "pid", "tid"])
    frame["lane_key"] = [f"{p!s}\x00{t!s}" for p, t in zip(frame["pid"], frame["tid"], strict=True)]
    frame = frame.sort_values(
        ["lane_key", "start_ns", "end_ns"], ascending=[True, True, False], kind="stable"
    ).reset_index(drop=True)
    depth = np.zeros(len(frame), dtype=np.int64)
    paths: list[str] = []
    stack: list[tuple[int, str]] = []  # (end_ns, path) of the open ranges of this lane
    lane = None
    for i, (key, name, end) in enumerate(
        zip(frame["lane_key"], frame["name"], frame["end_ns"].to_numpy(), strict=True)
    ):
        if key != lane:
            lane, stack = key, []
        while stack and stack[-1][0] < end:  # open range does not contain this one
            stack.pop()
        depth[i] = len(stack)
        full = f"{stack[-1][1]}/{name}" if stack else name
        paths.append(full)
        stack.append((int(end), full))
    frame["depth"] = depth
    frame["path"] = paths
    frame = frame.sort_values(["start_ns", "depth"], kind="stable").reset_index(drop=True)
    frame["region_id"] = np.arange(len(frame), dtype=np.int64)
    return frame


def _innermost(
    point_lane: np.ndarray,
    point_start: np.ndarray,
    point_end: np.ndarray,
    point_pref: np.ndarray,
    reg_lane: np.ndarray,
    reg_pref: np.ndarray,
    regions: pd.DataFrame,
) -> np.ndarray:
    """Index of the deepest region containing each point interval (-1 if none).

    A point matches regions whose ``reg_lane`` equals its ``point_lane``; among regions of
    equal depth, one whose ``reg_pref`` equals ``point_pref`` wins (e.g. the same stream).
    Vectorised per (region sub-lane, depth) group with ``searchsorted``: within a group the
    ranges do not nest, so the candidate is the last one starting at or before the point.
    """
    best = np.full(len(point_lane), -1, dtype=np.int64)
    best_depth = np.full(len(point_lane), -1, dtype=np.int64)
    if len(regions) == 0 or len(point_lane) == 0:
        return best
    starts = regions["start_ns"].to_numpy(dtype=np.int64)
    ends = regions["end_ns"].to_numpy(dtype=np.int64)
    depths = regions["depth"].to_numpy(dtype=np.int64)
    groups = pd.DataFrame({"lane": reg_lane, "pref": reg_pref, "depth": depths})
    for (lane, pref, depth), index in groups.groupby(["lane", "pref", "depth"]).indices.items():
        members = index[np.argsort(starts[index], kind="stable")]
        sel = np.flatnonzero(point_lane == lane)
        if len(sel) == 0:
            continue
        pos = np.searchsorted(starts[members], point_start[sel], side="right") - 1
        candidate = members[np.maximum(pos, 0)]
        inside = (pos >= 0) & (point_end[sel] <= ends[candidate])
        better = (depth > best_depth[sel]) | (
            (depth == best_depth[sel]) & (point_pref[sel] == pref)
        )
        take = inside & better
        best[sel[take]] = candidate[take]
        best_depth[sel[take]] = depth
    return best


def _gpu_regions(
    path: Path, frame: pd.DataFrame, annotations: list[dict[str, Any]]
) -> tuple[pd.DataFrame, np.ndarray]:
    regions = _nest(path, annotations, GPU_ANNOTATION_CAT)
    reg_device = [str(_int(p)) for p in regions["pid"]]
    reg_stream = [str(_int(t)) for t in regions["tid"]]
    reg_lane, k_lane = _kernel_lane_codes(reg_device, frame["device"])
    reg_pref, k_pref = _kernel_lane_codes(reg_stream, frame["stream"])
    start = frame["start_ns"].to_numpy(dtype=np.int64)
    end = start + frame["duration_ns"].to_numpy(dtype=np.int64)
    index = _innermost(k_lane, start, end, k_pref, reg_lane, reg_pref, regions)
    return regions, index


def _cpu_regions(
    path: Path,
    frame: pd.DataFrame,
    annotations: list[dict[str, Any]],
    calls: _LaunchCalls,
) -> tuple[pd.DataFrame, np.ndarray] | None:
    """Regions from CPU ``user_annotation`` via kernel correlation -> launching API call.

    Each correlation id names its last launch call with numeric ts/dur (as a dict keyed
    by it would); a kernel takes that call's thread and span.
    """
    correlation = calls.get_int("correlation")
    valid = ~correlation.isna() & calls.get("span_ok", bool)
    if not valid.any():
        return None
    ids = correlation.to_numpy(dtype=np.int64, na_value=0)[valid]
    rows = np.flatnonzero(valid)
    last = ~pd.Index(ids[::-1]).duplicated()[::-1]  # the last call of every correlation id
    ids, rows = ids[last], rows[last]
    regions = _nest(path, annotations, CPU_ANNOTATION_CAT)
    reg_lane, call_lane = _lane_codes(list(regions["lane_key"]), calls.lane_names())
    kernel_corr = frame["correlation_id"]
    position = pd.Index(ids).get_indexer(kernel_corr.to_numpy(dtype=np.int64, na_value=-1))
    position[kernel_corr.isna().to_numpy()] = -1
    found = position >= 0
    call = rows[np.maximum(position, 0)]
    k_lane = np.where(found, call_lane[calls.get("lane")[call]] if len(call) else 0, -1)
    k_start = np.where(found, calls.get("start")[call] if len(call) else 0, -1)
    k_end = np.where(found, calls.get("end")[call] if len(call) else 0, -1)
    zeros_k = np.zeros(len(frame), dtype=np.int64)
    zeros_r = np.zeros(len(regions), dtype=np.int64)
    index = _innermost(k_lane, k_start, k_end, zeros_k, reg_lane, zeros_r, regions)
    index[~found] = -1
    return regions, index


def _pair_ranges_with_launch_calls(frame: pd.DataFrame, calls: _LaunchCalls) -> bool:
    """Give range-built launches the correlation of the n-th kernel-launch API call."""
    launches = calls.get("launches_kernel", bool)
    count = int(launches.sum())
    if count != len(frame) or not count:
        return False
    start = np.where(calls.get("start_ok", bool), calls.get("start"), 0)[launches]
    order = np.argsort(start, kind="stable")
    correlation = calls.get_int("correlation")[launches]
    frame["correlation_id"] = correlation[order]
    return True


def _region_labels(paths: pd.Series, index: np.ndarray) -> pd.Categorical:
    """The path of region ``index[i]`` per kernel (null for -1), categories sorted (what
    ``pd.Categorical`` of the labels gives), built from codes."""
    path_codes, names = pd.factorize(paths.to_numpy(dtype=object))
    codes = np.where(index >= 0, path_codes[np.maximum(index, 0)], -1)
    present = np.unique(codes[codes >= 0])
    kept = np.asarray(names, dtype=object)[present]
    order = np.argsort(kept, kind="stable")
    recode = np.full(len(names), -1, dtype=np.int64)
    recode[present[order]] = np.arange(len(order))
    codes = np.where(codes >= 0, recode[np.maximum(codes, 0)], -1)
    return pd.Categorical.from_codes(codes, categories=pd.Index(list(kept[order])))


def _check_names(path: Path, kernel_names: pd.Series, range_names: pd.Series) -> None:
    k = kernel_names.astype(str).to_numpy()
    r = range_names.astype(str).to_numpy()
    bad = (k != r) & (r != MISSING_RANGE_NAME)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise HilsimError(
            f"{path}: cuda_profiler_range #{i} is for kernel {r[i][:80]!r} but kernel #{i} in "
            f"start order is {k[i][:80]!r}: counters cannot be joined to kernels"
        )


def _device(properties: Any, device_id: int | None) -> dict[str, Any]:
    if not isinstance(properties, list) or not properties:
        return {}
    chosen = next(
        (p for p in properties if isinstance(p, dict) and _int(p.get("id")) == device_id),
        properties[0] if isinstance(properties[0], dict) else {},
    )
    out: dict[str, Any] = {}
    if "name" in chosen:
        out["name"] = str(chosen["name"])
    major, minor = _int(chosen.get("computeMajor")), _int(chosen.get("computeMinor"))
    if major is not None and minor is not None:
        out["compute_capability"] = f"{major}.{minor}"
    for key, name in _DEVICE_KEYS.items():
        if key in chosen:
            out[name] = _plain(chosen[key])
    out["devices_in_trace"] = len(properties)
    return out


def read_kineto_trace(
    path: str | Path, regions: str = "auto", max_bytes: int = MAX_TRACE_BYTES
) -> KinetoProfile:
    """Read a PyTorch profiler (Kineto) trace into bundle-v1 tables (module doc for details).

    ``regions``: ``"auto"`` (GPU annotations if any, else CPU annotations linked by
    correlation), ``"gpu"``, ``"cpu"`` or ``"none"``. Files above ``max_bytes``
    (decompressed) are refused. Raises :class:`HilsimError` (one line naming the file).
    """
    source = Path(path)
    if regions not in REGION_MODES:
        raise HilsimError(f"regions must be one of {', '.join(REGION_MODES)}, got {regions!r}")
    scan = _Scan(source)
    try:
        data = _stream_trace(source, max_bytes, scan)
    except RecursionError as exc:
        raise limits.too_deep(source) from exc
    meta = {k: _plain(v) for k, v in data.items() if k not in ("traceEvents", "deviceProperties")}
    attrs: dict[str, Any] = {
        "n_gpu_memcpy": int(scan.counts["n_gpu_memcpy"]),
        "n_gpu_memset": int(scan.counts["n_gpu_memset"]),
        "n_cuda_profiler_range": len(scan.ranges),
    }
    attrs["dropped_non_kernel_rows"] = attrs["n_gpu_memcpy"] + attrs["n_gpu_memset"]

    metrics_frame: pd.DataFrame | None = None
    scan.kernels.flush()
    if scan.kernels.count:
        frame = scan.kernels.frame()
        start = frame["start_ns"].to_numpy()
        if len(start) > 1 and not (start[1:] >= start[:-1]).all():  # (traces are mostly sorted)
            frame = frame.iloc[np.argsort(start, kind="stable")].reset_index(drop=True)
        attrs["launch_source"] = "kernel"
        attrs["durations_measured"] = True
        attrs["smem_static_is_total"] = True
        if scan.ranges:
            ranges, counters = _range_frame(source, scan.ranges)
            order = np.argsort(ranges["start_ns"].to_numpy(), kind="stable")
            if len(order) != len(frame):
                raise HilsimError(
                    f"{source}: {len(order)} cuda_profiler_range events but {len(frame)} "
                    "kernels: counters cannot be joined to kernels"
                )
            _check_names(source, frame["name"], ranges["name"].iloc[order])
            metrics_frame = counters.iloc[order].reset_index(drop=True)
    elif scan.ranges:
        frame, counters = _range_frame(source, scan.ranges)
        order = np.argsort(frame["start_ns"].to_numpy(), kind="stable")
        frame = frame.iloc[order].reset_index(drop=True)
        metrics_frame = counters.iloc[order].reset_index(drop=True)
        attrs["launch_source"] = RANGE_CAT
        attrs["durations_measured"] = False
        attrs["n_unnamed_ranges"] = int((frame["name"] == MISSING_RANGE_NAME).sum())
        attrs["ranges_paired_with_launch_calls"] = _pair_ranges_with_launch_calls(
            frame, scan.launch_calls
        )
    else:
        seen = ", ".join(f"{c}" for c, _ in scan.categories.most_common(6)) or "none"
        raise HilsimError(
            f"{source}: no GPU kernel events (cat 'kernel') in the Kineto trace "
            f"({scan.n_events} events; categories seen: {seen}); "
            "was it recorded with ProfilerActivity.CUDA?"
        )

    region_table: pd.DataFrame | None = None
    region_index: np.ndarray | None = None
    region_source: str | None = None
    by_time = attrs["launch_source"] == "kernel"  # placeholder range times: no GPU overlap
    if regions in ("auto", "gpu") and scan.gpu_annotations and by_time:
        region_table, region_index = _gpu_regions(source, frame, scan.gpu_annotations)
        region_source = GPU_ANNOTATION_CAT
    elif regions in ("auto", "cpu") and scan.cpu_annotations and "correlation_id" in frame:
        found = _cpu_regions(source, frame, scan.cpu_annotations, scan.launch_calls)
        if found is not None:
            region_table, region_index = found
            region_source = CPU_ANNOTATION_CAT
    if region_table is not None and region_index is not None:
        frame["region"] = _region_labels(region_table["path"], region_index)
        region_table = region_table[list(REGION_COLUMNS)].copy()
        attrs["n_launches_in_region"] = int((region_index >= 0).sum())
    attrs["region_source"] = region_source

    launches = normalize_launches(frame.drop(columns=["pid", "tid"], errors="ignore"), str(source))
    launches.attrs.update(attrs)
    metrics: pd.DataFrame | None = None
    if metrics_frame is not None:
        metrics = pd.concat(
            [pd.DataFrame({"launch_id": launches["launch_id"].to_numpy()}), metrics_frame],
            axis=1,
        )
        metrics = metrics.astype({c: np.float64 for c in metrics_frame.columns})
    devices = launches["device"].dropna()
    device_id = int(devices.mode().iloc[0]) if len(devices) else None
    device = _device(data.get("deviceProperties"), device_id)
    return KinetoProfile(launches, region_table, metrics, device, meta)


def bundle_from_kineto(path: str | Path, regions: str = "auto") -> Bundle:
    """Import a Kineto trace as an in-memory :class:`~hilsim.core.bundle.Bundle`."""
    source = Path(path)
    profile = read_kineto_trace(source, regions=regions)
    attrs = profile.launches.attrs
    profiler: dict[str, Any] = {
        "name": PROFILER_NAME,
        "format": FORMAT,
        "file": source.name,
        "schema_version": profile.meta.get("schemaVersion"),
        "launch_source": attrs.get("launch_source"),
        "durations_measured": attrs.get("durations_measured"),
    }
    if profile.metrics is not None:
        profiler["counters"] = [c for c in profile.metrics.columns if c != "launch_id"]
    source_info: dict[str, Any] = {
        "files": [str(source)],
        "format": FORMAT,
        "dropped_non_kernel_rows": attrs.get("dropped_non_kernel_rows", 0),
        "region_source": attrs.get("region_source"),
    }
    for key in ("traceName", "displayTimeUnit"):
        if key in profile.meta:
            source_info[key] = profile.meta[key]
    manifest = default_manifest(device=profile.device, profilers=[profiler], source=source_info)
    return Bundle(
        launches=profile.launches,
        metrics=profile.metrics,
        regions=profile.regions,
        manifest=manifest,
    )

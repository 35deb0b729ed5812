"""Generated nsys ``cuda_gpu_trace`` CSV files: the real Thor fixture's rows, edited cells
(numbers past int64, hexadecimal, ``nan``, quoted names holding line breaks...), repeated
rows (so block cuts fall everywhere); ``\\n`` line breaks (the tests write the other
styles)."""

from __future__ import annotations

from hypothesis import strategies as st

from tests import reliability_inputs as inputs

THOR = inputs.DATA / "nsys" / "vernier-nsys2025.3.2-thor_cuda_gpu_trace.csv"

#: cells the readers once read differently (or sit on a boundary of one of them)
CELLS = (
    "0x10", "0X1F", " 0x10", "0xFFFFFFFFFFFFFFFF", "nan", "NaN", "inf", "-inf", "1e30",
    "9007199254740993", "9223372036854775807", "9223372036854775808",
    "18446744073709551616", "99999999999999999999", "-1", "-0", "+5", " 5", "5 ", "5.0",
    "5.5", "1_000", "1,000", "", '""', '"7"', "٣", "1e3", "0.000", "4.194",
)

NAMES = (
    '"k\nernel(int)"', '"kernel(int)\r\nrest"', '"a ""quoted"" kernel"', '"k,1"',
    "plain_kernel", '"\u2028kernel"', '"kernel\x0bname"', '"0x10kernel"', "foo_0x1",
    '"bar\rbaz"',
)


def _rows() -> tuple[str, list[str]]:
    lines = THOR.read_text(encoding="utf-8").splitlines()
    return lines[0], lines[1:]


@st.composite
def gpu_trace_csv(draw) -> str:
    header, rows = _rows()
    rows = list(rows)
    copies = draw(st.integers(1, 6))
    body = [
        f"{int(r.split(',', 1)[0]) + c * 10**8},{r.split(',', 1)[1]}"
        for c in range(copies) for r in rows
    ]
    kernel_rows = [i for i, r in enumerate(body) if r.split(",")[3]]
    for _ in range(draw(st.integers(0, 3))):
        row = draw(st.sampled_from(kernel_rows))
        fields = body[row].split(",", 20)
        column = draw(st.sampled_from([0, 1, 2, 3, 4, 6, 9, 16, 19, 20]))
        if column == 20:
            fields[20] = draw(st.sampled_from(NAMES))
        elif column == 16:
            fields[16] = draw(st.sampled_from(["NVIDIA Thor (1)", "(99999999999999999999)",
                                               "NVIDIA Thor (0x1)", "NVIDIA Thor", "0"]))
        else:
            fields[column] = draw(st.one_of(st.sampled_from(CELLS),
                                            st.integers(-(2**65), 2**65).map(str)))
        body[row] = ",".join(fields)
    return "\n".join([header, *body]) + "\n"

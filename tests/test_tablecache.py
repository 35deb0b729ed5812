"""TableCache: values derived from a table reused inside a scope, recomputed otherwise."""

import numpy as np
import pandas as pd
from hilsim.analyzer.tablecache import TableCache, derived


def counting(table: pd.DataFrame, calls: list[int]):
    def compute() -> float:
        calls.append(1)
        return float(table["x"].sum())

    return compute


def test_outside_a_scope_every_call_computes() -> None:
    table = pd.DataFrame({"x": [1.0, 2.0]})
    calls: list[int] = []
    assert derived(table, "sum", counting(table, calls)) == 3.0
    assert derived(table, "sum", counting(table, calls)) == 3.0
    assert len(calls) == 2


def test_inside_a_scope_once_per_table_and_kind() -> None:
    table = pd.DataFrame({"x": [1.0, 2.0]})
    calls: list[int] = []
    with TableCache() as cache:
        for _ in range(3):
            assert derived(table, "sum", counting(table, calls)) == 3.0
        assert derived(table, ("sum", 2), counting(table, calls)) == 3.0  # another kind
        assert len(calls) == 2 and len(cache) == 2
    derived(table, "sum", counting(table, calls))  # scope closed: computed again
    assert len(calls) == 3


def test_replaced_or_reshaped_table_is_recomputed() -> None:
    table = pd.DataFrame({"x": [1.0, 2.0]})
    calls: list[int] = []
    with TableCache():
        derived(table, "sum", counting(table, calls))
        other = pd.DataFrame({"x": [5.0, 5.0]})  # a new table: new entry
        assert derived(other, "sum", counting(other, calls)) == 10.0
        table["y"] = np.zeros(2)  # a column more: the entry is stale
        assert derived(table, "sum", counting(table, calls)) == 3.0
        grown = pd.concat([table, table])
        assert derived(grown, "sum", counting(grown, calls)) == 6.0
    assert len(calls) == 4


def test_scope_is_reentrant_and_nests() -> None:
    table = pd.DataFrame({"x": [1.0]})
    calls: list[int] = []
    outer = TableCache()
    with outer:
        derived(table, "sum", counting(table, calls))
    with outer:  # re-entered: the entry is still there
        derived(table, "sum", counting(table, calls))
        with TableCache():  # the innermost scope answers
            derived(table, "sum", counting(table, calls))
    assert len(calls) == 2

"""TimingConfig JSON (hilsim.timing/1) and the shipped presets."""

from __future__ import annotations

import json

import pytest
from hilsim.simmodel.config import Source, Sourced, TimingConfig, read_timing
from hilsim.simmodel.presets import PRESET_NAMES, all_presets, load_preset

from hilsim.core.errors import HilsimError


def test_presets_load_validate_and_cite_sources() -> None:
    presets = all_presets()
    assert [p.name for p in presets] == list(PRESET_NAMES)
    for p in presets:
        p.timing.validate()
        assert p.timing.items(), p.name
        for path, value in p.timing.items():
            assert value.source.kind in ("preset", "derived"), (p.name, path)
            assert value.source.detail, (p.name, path)
        assert len(p.gpgpusim) > 100 and p.trace
        assert all(o.source for o in (*p.gpgpusim, *p.trace))
    h100 = load_preset("h100 sxm")
    assert h100.timing.get("core.sm_count").value == 132
    assert h100.timing.get("l2.capacity_bytes").value == 50 * 1024 * 1024
    assert h100.timing.get("dram.bus_width_bits").value == 5120
    assert all(o.source.startswith("estimate") for o in h100.gpgpusim)


def test_preset_values_match_shipped_configs() -> None:
    qv = load_preset("QV100")
    assert qv.option("-gpgpu_n_clusters").value == "80"
    assert qv.option("-gpgpu_l1_latency").value == "20"
    assert qv.timing.get("l1.hit_latency_cycles").value == 28.0  # paper Table IV


def test_an_unknown_preset_is_refused() -> None:
    with pytest.raises(HilsimError):
        load_preset("no-such-gpu")


def test_round_trip(tmp_path) -> None:
    cfg = load_preset("RTX2060").timing
    path = tmp_path / "timing.json"
    path.write_text(cfg.dumps())
    back = read_timing(path)
    assert back == cfg
    assert json.loads(path.read_text())["schema"] == "hilsim.timing/1"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(schema="hilsim.timing/0"), "schema"),
        (lambda d: d["core"]["sm_count"].update(value=-3), "core.sm_count"),
        (lambda d: d["core"]["sm_count"].update(unit="cores"), "unit"),
        (lambda d: d["l1"].update(bogus={}), "bogus"),
        (lambda d: d["core"]["sm_count"]["source"].update(kind="guess"), "source kind"),
    ],
)
def test_validation_errors_are_one_line(tmp_path, mutate, message) -> None:
    data = load_preset("QV100").timing.to_json()
    mutate(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(HilsimError) as err:
        read_timing(path)
    text = str(err.value)
    assert "\n" not in text and str(path) in text and message in text


def test_set_and_get() -> None:
    cfg = TimingConfig("x")
    cfg = cfg.set("units.fp32.latency_cycles",
                  Sourced(4.0, "cycles", Source("measured", "test")))
    assert cfg.get("units.fp32.latency_cycles").value == 4.0
    assert cfg.get("l1.hit_latency_cycles") is None

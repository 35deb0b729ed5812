"""The tuner: measurements + device facts -> TimingConfig -> Accel-Sim config files.

Reproduces the mapping of Accel-Sim's tuner (Accel-Sim paper, Section II-C; the
``GPU_Microbenchmark`` programs print ``//Accel_Sim config:`` lines that
``util/tuner/tuner.py`` copies into a config template). The formulas are re-implemented
here as a table of option rules and documented option by option in ``docs/tuner.md``
(generated from the table).

Modules, in the order the tuner uses them:

* :mod:`~hilsim.simmodel.tuner.inputs`: ``microbench.json`` and device-facts files;
* :mod:`~hilsim.simmodel.tuner.overlay`: preset timing overlaid by facts and measurements;
* :mod:`~hilsim.simmodel.tuner.checks`: measurements noted, not used;
* :mod:`~hilsim.simmodel.tuner.rule`, :mod:`~hilsim.simmodel.tuner.rules`: the option
  rules (one per option) and :mod:`~hilsim.simmodel.tuner.engine`, which evaluates them;
* :mod:`~hilsim.simmodel.tuner.conventions`: the latency conventions (Section IV);
* :mod:`~hilsim.simmodel.tuner.dram`, :mod:`~hilsim.simmodel.tuner.geometry`: Accel-Sim's
  DRAM models and cache sizing arithmetic;
* :mod:`~hilsim.simmodel.tuner.emission`: printed > derived > preset, per option;
* :mod:`~hilsim.simmodel.tuner.result`: the emitted files and ``tune-report.json``;
* :mod:`~hilsim.simmodel.tuner.flow`: :func:`tune` / :func:`tune_files`, the whole job;
* :mod:`~hilsim.simmodel.tuner.docs`: ``docs/tuner.md``'s option table from the rules;
* :mod:`~hilsim.simmodel.tuner.basecard`: the preset (or base card) closest to the device.

The on-simulator tuner (``hilsim tune --on-simulator``, GPGPU-Sim in the loop) reads the
same rules: :mod:`~hilsim.simmodel.tuner.knobs` (each rule's knobs, in search order),
:mod:`~hilsim.simmodel.tuner.evaluators` (the suite's kernels on a candidate),
:mod:`~hilsim.simmodel.tuner.candidate`, :mod:`~hilsim.simmodel.tuner.intsolve`,
:mod:`~hilsim.simmodel.tuner.pairs`, :mod:`~hilsim.simmodel.tuner.search` (prepare / one
round / finish), :mod:`~hilsim.simmodel.tuner.card` and
:mod:`~hilsim.simmodel.tuner.report` (the tuned card folder), and
:mod:`~hilsim.simmodel.tuner.heldout` (evidence on cards no calibration used). The
``gpgpusim`` convention's measured maps: :mod:`~hilsim.simmodel.tuner.calibration`,
:mod:`~hilsim.simmodel.tuner.calibrate`, :mod:`~hilsim.simmodel.tuner.closedloop`.
"""

from hilsim.simmodel.tuner.conventions import CONVENTIONS
from hilsim.simmodel.tuner.flow import L2_GEOMETRY_NOTE, tune, tune_files
from hilsim.simmodel.tuner.inputs import read_device_facts, read_microbench
from hilsim.simmodel.tuner.result import EmittedOption, TuneResult

__all__ = [
    "CONVENTIONS",
    "L2_GEOMETRY_NOTE",
    "EmittedOption",
    "TuneResult",
    "read_device_facts",
    "read_microbench",
    "tune",
    "tune_files",
]

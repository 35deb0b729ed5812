"""hilsim analyzer: importers, sampling methods, evaluation (runs without a GPU)."""

from hilsim.analyzer.bundle import Bundle, read_bundle, write_bundle
from hilsim.analyzer.errors import HilsimError
from hilsim.analyzer.plan import Plan, load_plan

__all__ = ["Bundle", "HilsimError", "Plan", "load_plan", "read_bundle", "write_bundle"]

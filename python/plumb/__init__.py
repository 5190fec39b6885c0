"""plumb's correctness oracle from Python (docs/fixtures.md "From Python"): read a fixture suite, call the
reference ops on numpy arrays, and judge an engine's results as `plumb fixtures verify` does. Everything
runs plumb's C++ (the extension plumb._plumb), so the numbers are bit for bit the suite's."""
from . import ops
from ._plumb import PlumbError
from .suite import Case, Suite
from .verify import Row, format_rows, verify

__all__ = ["Case", "PlumbError", "Row", "Suite", "format_rows", "ops", "verify"]

"""`harness import reference PATH`: the reference system's test suites as our recipes,
thresholds and suites, and a report of what did not map (docs/import.md)."""

from harness.importer.build import Import, import_reference
from harness.importer.reference_yaml import ReferenceError_

__all__ = ["Import", "ReferenceError_", "import_reference"]

"""`harness import reference PATH`: the reference system's test suites as our recipes,
thresholds and suites, and a report of what did not map (docs/import.md)."""

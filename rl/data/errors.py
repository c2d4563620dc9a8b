"""The error a data guard raises, so that the guard survives `python -O`.

`assert` vanishes under -O: 3 rows over DP 2 then got past the even-split guard and failed in
zip() with a message about zip, and a row-order check would not run at all. Guards that
protect rows, keys, shapes and rank results raise `DataIntegrityError` instead (STYLE.md:
"guards that protect data raise; assert is for impossibilities only").
"""

from __future__ import annotations

__all__ = ["DataIntegrityError"]


class DataIntegrityError(RuntimeError):
    """Rows, keys, shapes or per-rank results that break an invariant of the data path."""

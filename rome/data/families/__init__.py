"""The task families `rome data generate` knows, by name."""

from __future__ import annotations

from rome.data.families.auth_audit import AuthAudit
from rome.data.families.base import Family, Instance, KnobError, Mistake, Step, UnknownFamily
from rome.data.families.csv_rollup import CsvRollup
from rome.data.families.file_ops import FileOps
from rome.data.families.fix_bug import FixBug
from rome.data.families.hazard import Hazard
from rome.data.families.line_filter import LineFilter
from rome.data.families.numeric import Numeric
from rome.data.families.text_search import TextSearch

FAMILIES: dict[str, Family] = {
    family.name: family
    for family in (
        TextSearch(),
        CsvRollup(),
        FileOps(),
        FixBug(),
        AuthAudit(),
        Numeric(),
        Hazard(),
        LineFilter(),
    )
}

__all__ = ["FAMILIES", "Family", "Instance", "KnobError", "Mistake", "Step", "UnknownFamily", "get_family"]


def get_family(name: str) -> Family:
    try:
        return FAMILIES[name]
    except KeyError:
        raise UnknownFamily(
            f"unknown family {name!r}; `rome data families` lists them: {', '.join(FAMILIES)}"
        ) from None

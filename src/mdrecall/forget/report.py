"""What one forget did, store by store, and what the byte scan afterwards found (nothing, ideally)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mdrecall.errors import MdrecallError
from mdrecall.forget.plan import ForgetPlan


@dataclass(slots=True)
class StoreReport:
    """One store a forget went through: what it removed there (counts by kind) and anything to know."""

    store: str  # markdown, transcript, index, recall store, review queue, lancedb, postgres
    location: str
    removed: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def add(self, what: str, count: int) -> None:
        if count:
            self.removed[what] = self.removed.get(what, 0) + count

    def to_dict(self) -> dict[str, Any]:
        return {"store": self.store, "location": self.location, "removed": dict(self.removed), "notes": list(self.notes)}

    def describe(self) -> str:
        parts = [f"{what}: {n}" for what, n in self.removed.items()]
        return "; ".join([", ".join(parts) or "nothing", *self.notes])


@dataclass(slots=True)
class Remaining:
    """A copy the byte scan still found: which file, and of what."""

    file: str
    needle: str

    def to_dict(self) -> dict[str, str]:
        return {"file": self.file, "text": self.needle}


@dataclass(slots=True)
class ForgetReport:
    plan: ForgetPlan
    dry_run: bool = False
    applied: bool = False
    stores: list[StoreReport] = field(default_factory=list)
    #: Files read byte by byte afterwards, and their total size.
    checked_files: int = 0
    checked_bytes: int = 0
    remaining: list[Remaining] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: Steps that did not happen (a store that could not be reached): the forget is incomplete.
    failures: list[str] = field(default_factory=list)

    @property
    def verified(self) -> bool:
        """Applied everywhere, and the scan found no copy of the forgotten text in any file it read."""
        return self.applied and not self.remaining and not self.failures

    def store(self, store: str, location: str) -> StoreReport:
        found = StoreReport(store, location)
        self.stores.append(found)
        return found

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.plan.to_dict(),
            "dryRun": self.dry_run,
            "applied": self.applied,
            "stores": [s.to_dict() for s in self.stores],
            "verification": {
                "verified": self.verified,
                "checkedFiles": self.checked_files,
                "checkedBytes": self.checked_bytes,
                "remaining": [r.to_dict() for r in self.remaining],
            },
            "warnings": [*self.plan.warnings, *self.warnings],
            "failures": list(self.failures),
        }


class ConfirmationRequired(MdrecallError):
    """Forgetting deletes for good: it needs ``yes=True`` or the plan's token (``confirm=``).

    ``plan`` is what would be removed; ``changed`` is True when a token was given but names other
    lines than the target selects now (the memory changed since it was shown)."""

    def __init__(self, plan: ForgetPlan, *, changed: bool = False) -> None:
        what = f"{plan.line_count} line(s) in {len(plan.selections)} file(s)"
        if changed:
            message = f"the lines {plan.target!r} selects changed since they were shown; review them again ({what}, token {plan.token})"
        else:
            message = f"forgetting {what} needs confirmation: yes=True, or confirm={plan.token!r}"
        super().__init__(message)
        self.plan = plan
        self.changed = changed


class NothingToForget(MdrecallError):
    """The target is valid but selects nothing (a text found nowhere)."""

    def __init__(self, plan: ForgetPlan) -> None:
        super().__init__(f"nothing in memory matches {plan.target!r}")
        self.plan = plan

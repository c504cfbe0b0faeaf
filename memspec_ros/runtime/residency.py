"""Residency states of a draft and the immutable snapshots the pool hands out.

Snapshots are plain frozen data so that a listener in another thread (the ROS node's
publisher, a monitor, a test) can keep and read them without touching the pool's lock.
Their fields mirror the ``DraftState``/``DraftResidency`` messages one to one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import IntEnum


class DraftState(IntEnum):
    """Where a draft's weights are. Values equal the constants of ``DraftState.msg``."""

    ON_STORAGE = 0
    """Only on storage: using it needs a load."""
    LOADING = 1
    """A background load is reading the weights; the bytes are already reserved."""
    RESIDENT = 2
    """In memory and usable by the decoder now."""
    EVICTING = 3
    """Being released: still in memory until the round that uses it ends, then gone."""


OCCUPYING_STATES = frozenset({DraftState.LOADING, DraftState.RESIDENT, DraftState.EVICTING})
"""States whose bytes count against the budget. EVICTING counts too: its memory is not free
until the last user lets go, so a load may not start on the strength of it."""


@dataclass(frozen=True)
class DraftStatus:
    """One draft's residency at an instant."""

    name: str
    domain: str
    size_bytes: int
    state: DraftState
    load_progress: float
    predicted_need: float
    active: bool
    last_error: str | None = None


@dataclass(frozen=True)
class ResidencySnapshot:
    """The whole working set at an instant (what ``DraftResidency`` publishes)."""

    seq: int
    time: float
    budget_bytes: int
    used_bytes: int
    active: str | None
    drafts: tuple[DraftStatus, ...]

    def state(self, name: str) -> DraftState:
        """State of the draft called ``name``."""
        return self.status(name).state

    def status(self, name: str) -> DraftStatus:
        """Status of the draft called ``name``."""
        for d in self.drafts:
            if d.name == name:
                return d
        raise KeyError(name)

    def names_in(self, *states: DraftState) -> list[str]:
        """Names of drafts in any of ``states``, in catalogue order."""
        return [d.name for d in self.drafts if d.state in states]

    @property
    def resident(self) -> list[str]:
        """Drafts usable right now."""
        return self.names_in(DraftState.RESIDENT)

    def with_member(self, name: str, domain: str, *, active: bool) -> ResidencySnapshot:
        """This snapshot plus an always-resident member of 0 bytes (the n-gram proposer): what the
        residency topic and diagnostics show. Policies see the pool's own snapshot, which the
        working set is planned over."""
        member = DraftStatus(name=name, domain=domain, size_bytes=0, state=DraftState.RESIDENT, load_progress=1.0,
                             predicted_need=0.0, active=active)
        drafts = tuple(replace(d, active=False) for d in self.drafts) if active else self.drafts
        return replace(self, active=name if active else self.active, drafts=(*drafts, member))


@dataclass(frozen=True)
class ResidencyEvent:
    """A change of one draft's state (or of the active draft, or of load progress)."""

    draft: str | None
    previous: DraftState | None
    current: DraftState | None
    reason: str
    snapshot: ResidencySnapshot

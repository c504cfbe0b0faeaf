"""Memory-aware draft runtime (no ROS): the MemSpec system itself.

Layers, bottom up: a :class:`Catalogue` of drafts and a :class:`Budget`; the thread-safe
:class:`DraftPool` (residency states, budget invariant, listeners); the :class:`BackgroundLoader`
(real reads, emulated storage bandwidth, cancel, timeout); the policies (one interface, see
:mod:`.policies`); the :class:`Scheduler` that carries out plans; the :class:`DraftRuntime` that
ties them to the core engine; and the trace-driven :class:`Simulator` that runs the same policy
code on a virtual clock. See ``docs/runtime.md``.
"""

from memspec_ros.core.finish_reason import FinishReason

from .acceptance import AcceptanceSummary, AcceptanceTracker, DraftAcceptance, RoundRecord
from .catalogue import (
    Budget,
    Catalogue,
    CatalogueError,
    DraftSpec,
    zoo_fingerprint,
)
from .catalogue_file import CatalogueFile, CatalogueFileError, load_catalogue_file
from .chat import ChatMessage, ChatTurn
from .context import ContextFeatures, ContextTracker
from .conversation import Conversation
from .cost_model import CostModel, calibrate_overheads, measure_cost_model
from .loader import BackgroundLoader, LoadRecord, LoadTicket
from .policies import ADAPTIVE_BASELINES, POLICY_NAMES, Policy, make_policy
from .pool import BudgetExceeded, DraftPool, InvalidTransition, PoolError, PoolInvariantError
from .predictor import DraftPredictor
from .residency import DraftState, DraftStatus, ResidencyEvent, ResidencySnapshot
from .runtime import (
    DraftRuntime,
    GenerationReport,
    RoundEvent,
    RuntimeConfig,
    RuntimeStats,
    make_materializer,
)
from .scheduler import Scheduler
from .simulator import SimulationResult, Simulator
from .stop_strings import StopStrings
from .storage import StorageModel
from .traces import DialogueTrace, Turn, TurnTrace, record_dialogue
from .turn_progress import TurnProgress
from .turns import Admission, TurnRequest
from .virtual_time import VirtualClock, VirtualLoader

__all__ = [
    "ADAPTIVE_BASELINES",
    "POLICY_NAMES",
    "AcceptanceSummary",
    "AcceptanceTracker",
    "Admission",
    "BackgroundLoader",
    "Budget",
    "BudgetExceeded",
    "Catalogue",
    "CatalogueError",
    "CatalogueFile",
    "CatalogueFileError",
    "ChatMessage",
    "ChatTurn",
    "ContextFeatures",
    "ContextTracker",
    "Conversation",
    "CostModel",
    "DialogueTrace",
    "DraftAcceptance",
    "DraftPool",
    "DraftPredictor",
    "DraftRuntime",
    "DraftSpec",
    "DraftState",
    "DraftStatus",
    "FinishReason",
    "GenerationReport",
    "InvalidTransition",
    "LoadRecord",
    "LoadTicket",
    "Policy",
    "PoolError",
    "PoolInvariantError",
    "ResidencyEvent",
    "ResidencySnapshot",
    "RoundEvent",
    "RoundRecord",
    "RuntimeConfig",
    "RuntimeStats",
    "Scheduler",
    "SimulationResult",
    "Simulator",
    "StopStrings",
    "StorageModel",
    "Turn",
    "TurnProgress",
    "TurnRequest",
    "TurnTrace",
    "VirtualClock",
    "VirtualLoader",
    "calibrate_overheads",
    "load_catalogue_file",
    "make_materializer",
    "make_policy",
    "measure_cost_model",
    "record_dialogue",
    "zoo_fingerprint",
]

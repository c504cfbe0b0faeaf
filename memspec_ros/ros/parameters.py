"""Declaration and validation of the node's ROS parameters.

Every parameter is declared once from the table below, with a descriptor (description,
range, read-only flag) so that ``ros2 param describe`` documents it on a robot and
docs/parameters.md is generated from it (``python -m memspec_ros.ros.parameter_docs``).
Only the parameters in ``RUNTIME_CHANGEABLE`` may be set after start-up; every other one
shapes what configure loads and is ``read_only``: it comes from the params file or the
command line, and changing it means restarting the node. A value that violates its range
or type in the params file must not crash the node at start-up (rclpy raises from
``declare_parameter``): we remember the problem, declare the default, and let
``configure`` fail with a message that names the parameter, so the node stays alive in
``unconfigured`` and says what to fix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    ParameterType,
)
from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
from rclpy.node import Node

from memspec_ros import knobs
from memspec_ros.bundled_models import default_model_set_root
from memspec_ros.core.ngram_proposer import NGRAM_NAME
from memspec_ros.knobs import KnobBound
from memspec_ros.runtime.catalogue_file import CatalogueFile, CatalogueFileError, load_catalogue_file
from memspec_ros.runtime.policies import POLICY_NAMES, policy_class

#: Policies a node can serve with: every runtime policy except the oracle, which needs a
#: hindsight trace of the very session it serves (a benchmark-only reference).
POLICIES = tuple(p for p in POLICY_NAMES if p != "oracle")
DTYPES = ("float32", "bfloat16", "float16")  # names of torch dtypes
DTYPE_CHOICES = ("auto", *DTYPES)
BUSY_POLICIES = ("reject", "queue")

#: Parameters that may change while the node runs; every other one shapes what configure
#: loads and is read-only (set at start-up; changing it means restarting the node).
RUNTIME_CHANGEABLE = frozenset({"policy", "check_interval", "num_speculative_tokens"})

@dataclass(frozen=True)
class ParamSpec:
    """One parameter: default, documentation and the constraint checked at configure."""

    name: str
    default: Any
    description: str
    int_range: tuple[int, int] | KnobBound | None = None
    float_range: tuple[float, float] | KnobBound | None = None
    """A range of the node's own, or a :class:`~memspec_ros.knobs.KnobBound` it shares with
    the runtime and the bench (stored as its ``(low, high)``)."""

    def __post_init__(self) -> None:
        for attr in ("int_range", "float_range"):
            bound = getattr(self, attr)
            if isinstance(bound, KnobBound):
                kind = int if attr == "int_range" else float
                object.__setattr__(self, attr, (kind(bound.low), kind(bound.high)))
    choices: tuple[str, ...] | None = None

    @property
    def read_only(self) -> bool:
        """Fixed after start-up: everything that shapes what configure loads."""
        return self.name not in RUNTIME_CHANGEABLE

    def descriptor(self) -> ParameterDescriptor:
        """Build the ROS descriptor; ranges are enforced by rclpy on later sets too."""
        desc = self.description
        if self.choices:
            desc += " One of: " + ", ".join(self.choices) + "."
        d = ParameterDescriptor(
            name=self.name,
            description=desc,
            read_only=self.read_only,
            dynamic_typing=False,
        )
        if self.int_range:
            d.integer_range = [IntegerRange(from_value=self.int_range[0], to_value=self.int_range[1], step=1)]
        if self.float_range:
            d.floating_point_range = [
                FloatingPointRange(from_value=self.float_range[0], to_value=self.float_range[1], step=0.0)
            ]
        if isinstance(self.default, list) and not self.default:
            d.type = ParameterType.PARAMETER_STRING_ARRAY
        return d


PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec("autostart", False, "Configure and activate right after start-up (what a launch file's auto-transitions do)."),
    ParamSpec("catalogue", "", "Catalogue file (or a folder holding catalogue.yaml) naming the target, the drafts and the predictor; every model lies beside it (docs/catalogue.md). Empty = the bundled default model set, SmolLM2-135M-Instruct with its drafts (models/smollm2; its target is fetched by make setup or memspec_fetch_target)."),
    ParamSpec("tolerate_bad_drafts", False, "If true, a draft that fails validation at configure is marked unusable and the node serves without it; if false, configure fails."),
    ParamSpec("policy", "memspec", "Draft scheduling policy (changeable at run time).", choices=POLICIES),
    ParamSpec("static_draft", "", "Draft used by the 'static' policy; empty = the catalogue's draft of domain 'general' (else its first draft); 'ngram' = the n-gram member alone (prompt lookup, no model draft)."),
    ParamSpec("budget_drafts", 2, "Memory budget as a number of the largest drafts; 0 = use budget_bytes.", int_range=knobs.BUDGET_DRAFTS),
    ParamSpec("budget_bytes", 0, "Memory budget for resident drafts in bytes (used when budget_drafts is 0).", int_range=knobs.BUDGET_BYTES),
    ParamSpec("ngram", True, "The n-gram member of the draft pool: prompt lookup, proposing what followed the dialogue's last few tokens where they occurred before (names, commands, pasted code, earlier answers). Always resident at 0 bytes, never loaded; memspec runs it instead of a draftless round, or of a weaker draft, when its measured acceptance pays. false = model drafts only."),
    ParamSpec("ngram_min_n", 2, "Shortest run of the dialogue's latest tokens the n-gram member looks up (longer runs are tried first).", int_range=knobs.NGRAM_N),
    ParamSpec("ngram_max_n", 4, "Longest run of the dialogue's latest tokens the n-gram member looks up; at least ngram_min_n.", int_range=knobs.NGRAM_N),
    ParamSpec("online_learning", True, "Keep training the draft-need predictor from served turns: after each turn, in idle time on the torch thread, the resident drafts run teacher-forced over it and the predictor takes a step guarded against its shipped weights (it falls back to them, with a log line, when it forecasts worse). A goal cancels a running step. The learned state is saved beside the session files (session_dir) and continued after a restart; ~/reset_learning restores the shipped predictor. Policies without a predictor ignore it."),
    ParamSpec("check_interval", 0, "Speculative rounds between scheduling decisions (prediction, prefetch, eviction); 0 = auto: at configure, time the policy's decisions and keep the smallest of 4, 8, 16 whose decisions cost at most 1% of the rounds between them (logged). Changeable at run time to 1-64.", int_range=knobs.CHECK_INTERVAL_SETTING),
    ParamSpec("num_speculative_tokens", 0, "The most draft tokens a round proposes (k; memspec picks each round's length up to it); 0 = auto: at configure, price the model set's acceptance runs at k = 1-8 (memspec_build evaluate's report) at this machine's measured draft step and verification times, and keep the largest of the domain drafts' fastest fixed k (memspec shortens rounds itself; logged; 4 without that report). Changeable at run time to 1-16.", int_range=knobs.K_SETTING),
    ParamSpec("storage_bandwidth_mbps", 0.0, "Emulated storage read bandwidth for draft loads in MB/s (an edge device's flash); 0 = read at native speed.", float_range=knobs.STORAGE_BANDWIDTH_MBPS),
    ParamSpec("load_timeout_s", 30.0, "A draft load that takes longer is abandoned and reported.", float_range=knobs.LOAD_TIMEOUT_S),
    ParamSpec("device", "cpu", "torch device for all models (e.g. cpu, cuda:0)."),
    ParamSpec("dtype", "auto", "Compute dtype of the models. auto = at configure, time the target in float32 and bfloat16 and keep the faster (bfloat16 where the CPU has native bf16; logged). bfloat16 and float16 halve memory; output stays the target's own at that dtype and device (greedy: token for token, except at exact logit ties, which low precision makes common).", choices=DTYPE_CHOICES),
    ParamSpec("num_threads", 0, "torch intra-op threads; 0 = auto: at configure, time speculative rounds through the runtime (one draft within the budget, the loader running) at 1, 2, 4, ... threads up to the cores available and keep the fastest (logged).", int_range=knobs.NUM_THREADS),
    ParamSpec("max_new_tokens_limit", 512, "Largest max_new_tokens a goal may ask for.", int_range=(1, 100000)),
    ParamSpec("default_max_new_tokens", 128, "Tokens a goal may generate when it leaves max_new_tokens at 0 (its default); at most max_new_tokens_limit.", int_range=(1, 100000)),
    ParamSpec("max_prompt_chars", 8000, "Longer prompts are rejected with a reason.", int_range=(1, 10_000_000)),
    ParamSpec("busy_policy", "reject", "What to do with a goal that arrives while another generates: reject it with a reason, or queue it.", choices=BUSY_POLICIES),
    ParamSpec("max_queue", 4, "Most goals waiting when busy_policy is 'queue'.", int_range=(0, 1000)),
    ParamSpec("max_sessions", 16, "Most dialogue sessions kept; the least recently used is dropped beyond it.", int_range=(1, 10000)),
    ParamSpec("session_budget_bytes", 256 * 2**20, "Most bytes of target KV cache all idle dialogue sessions keep together; the least recently used are dropped beyond it. 0 = no byte limit.", int_range=(0, 2**62)),
    ParamSpec("session_idle_timeout_s", 900.0, "A dialogue session unused this long is dropped (its KV cache freed); 0 = never.", float_range=(0.0, 1.0e7)),
    ParamSpec("session_dir", "$ROS_HOME/memspec_sessions", "Folder where every dialogue session is written after each completed turn, so that a restarted node continues it (in a subfolder named after the node's namespace and name, one file per session, its token stored only as a digest; max_sessions bounds the files too). $ROS_HOME is the ROS home folder (~/.ros when unset). Empty = sessions live in memory only and end with the process."),
    ParamSpec("max_context", 0, "Context window in tokens (prompt + output, all turns of a session); 0 = the target's position limit (max_position_embeddings; MPT's max_seq_len), which it may not exceed (2048 for a target without one, such as BLOOM's ALiBi).", int_range=(0, 10_000_000)),
    ParamSpec("deactivate_timeout_s", 10.0, "How long deactivate, cleanup and shutdown wait for a running generation to stop; past it the goal is aborted and cleanup refuses to free models still in use.", float_range=(0.1, 3600.0)),
    ParamSpec("feedback_every_rounds", 1, "Send feedback at least every this many speculative rounds.", int_range=(1, 64)),
    ParamSpec("residency_period_s", 1.0, "Period of the draft_residency re-publication (it is also published on every change).", float_range=(0.05, 3600.0)),
    ParamSpec("stats_period_s", 0.5, "Period of acceptance_stats while generating.", float_range=(0.05, 3600.0)),
    ParamSpec("diagnostics_period_s", 1.0, "Period of the /diagnostics status (1 Hz is the diagnostic_aggregator convention).", float_range=(0.05, 3600.0)),
)
PARAMS_BY_NAME = {p.name: p for p in PARAMS}


class ConfigError(ValueError):
    """A parameter value that cannot be used; the message says which and how to fix it."""


@dataclass(frozen=True)
class NodeConfig:
    """Validated parameter values, the input of everything configure builds."""

    values: dict[str, Any]
    catalogue: CatalogueFile
    """The parsed catalogue file: target, drafts and predictor, every path resolved."""

    def __getitem__(self, name: str) -> Any:
        return self.values[name]


def declare_all(node: Node) -> dict[str, str]:
    """Declare every parameter; return {name: problem} for overrides rclpy refused."""
    problems: dict[str, str] = {}
    for spec in PARAMS:
        try:
            node.declare_parameter(spec.name, spec.default, spec.descriptor())
        except (InvalidParameterValueException, InvalidParameterTypeException) as exc:
            problems[spec.name] = _first_line(str(exc))
            node.declare_parameter(spec.name, spec.default, spec.descriptor(), ignore_override=True)
    return problems


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def validate(values: dict[str, Any], problems: dict[str, str] | None = None) -> NodeConfig:
    """Check every value against its spec and cross-parameter rules.

    Raises ConfigError naming the first offending parameter. The catalogue file is read and
    its paths checked here; whether they hold loadable, compatible models is configure's job.
    """
    for name, problem in (problems or {}).items():
        raise ConfigError(f"parameter '{name}' has an invalid value in the params file: {problem}")
    for spec in PARAMS:
        v = values[spec.name]
        if spec.choices and v not in spec.choices:
            raise ConfigError(f"parameter '{spec.name}' = '{v}' is not one of: {', '.join(spec.choices)}")
        if spec.int_range and not spec.int_range[0] <= v <= spec.int_range[1]:
            raise ConfigError(f"parameter '{spec.name}' = {v} is outside [{spec.int_range[0]}, {spec.int_range[1]}]")
        if spec.float_range and (
            not math.isfinite(v) or not spec.float_range[0] <= v <= spec.float_range[1]
        ):
            raise ConfigError(f"parameter '{spec.name}' = {v} is outside [{spec.float_range[0]}, {spec.float_range[1]}]")

    try:
        catalogue = load_catalogue_file(values["catalogue"] or default_model_set_root())
    except CatalogueFileError as exc:
        raise ConfigError(f"parameter 'catalogue': {exc}") from exc
    names = catalogue.draft_names
    if values["ngram_min_n"] > values["ngram_max_n"]:
        raise ConfigError(f"parameter 'ngram_min_n' = {values['ngram_min_n']} exceeds ngram_max_n = "
                          f"{values['ngram_max_n']}: lower it or raise ngram_max_n")
    if NGRAM_NAME in names:
        raise ConfigError(f"parameter 'catalogue': {catalogue.source} has a draft named '{NGRAM_NAME}', the name "
                          "reserved for the n-gram member: rename the draft")
    static_choices = [*names, *([NGRAM_NAME] if values["ngram"] else [])]
    if values["static_draft"] == NGRAM_NAME and not values["ngram"]:
        # Checked whatever the policy (it may become static at run time, when nothing else would catch it).
        raise ConfigError(f"parameter 'static_draft' = '{NGRAM_NAME}' names the n-gram member, which ngram:=false "
                          "turns off: set ngram:=true or choose a draft")
    if values["policy"] == "static" and values["static_draft"] and values["static_draft"] not in static_choices:
        raise ConfigError(f"parameter 'static_draft' = '{values['static_draft']}' is not a draft of "
                          f"{catalogue.source} (has {static_choices})")
    if values["default_max_new_tokens"] > values["max_new_tokens_limit"]:
        raise ConfigError(
            f"parameter 'default_max_new_tokens' = {values['default_max_new_tokens']} exceeds "
            f"max_new_tokens_limit = {values['max_new_tokens_limit']}: lower it or raise the limit"
        )
    if values["budget_drafts"] == 0 and values["budget_bytes"] == 0:
        raise ConfigError("parameters 'budget_drafts' and 'budget_bytes' are both 0: set one of them")
    if policy_class(values["policy"]).needs_predictor and catalogue.predictor is None:
        raise ConfigError(
            f"parameter 'catalogue': {catalogue.source} names no predictor; policy '{values['policy']}' needs one "
            "(train it with `memspec_build predictor` and add `predictor:` to the file), or choose a policy "
            "without a predictor"
        )
    return NodeConfig(values=dict(values), catalogue=catalogue)


def read_values(node: Node) -> dict[str, Any]:
    """Current values of every declared parameter."""
    return {spec.name: node.get_parameter(spec.name).value for spec in PARAMS}

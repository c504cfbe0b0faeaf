"""Turn validated node parameters into a running :class:`DraftRuntime` (no ROS here).

Kept out of the node so that everything configure does with models (and every way it can
fail) reads top to bottom in one place, and so that a failure half-way frees what was
already built: configure must leave nothing behind (threads, memory) when it fails.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import torch

from memspec_ros.core.cache_rollback import require_rollback
from memspec_ros.core.dtype_choice import DtypeChoice, choose_dtype
from memspec_ros.core.engine import SpeculativeEngine
from memspec_ros.core.errors import InvalidRequestError, ModelLoadError, VocabularyMismatchError
from memspec_ros.core.model_loading import configure_threads, load_causal_lm, load_tokenizer
from memspec_ros.core.thread_tuning import ThreadChoice
from memspec_ros.ros.parameters import DTYPES, ConfigError, NodeConfig
from memspec_ros.runtime.catalogue import Budget, Catalogue, CatalogueError, DraftSpec
from memspec_ros.runtime.model_set_checks import ModelSetError, check_draft, check_predictor
from memspec_ros.runtime.ngram_member import NgramSettings
from memspec_ros.runtime.policies import Policy, make_policy
from memspec_ros.runtime.runtime import DraftRuntime, RuntimeConfig, make_materializer
from memspec_ros.runtime.speculation_choice import (
    FALLBACK_INTERVAL,
    FALLBACK_K,
    SpeculationChoice,
    choose_speculation,
)
from memspec_ros.runtime.storage import StorageModel
from memspec_ros.runtime.thread_choice import choose_threads

_DTYPES = {name: getattr(torch, name) for name in DTYPES}


@dataclass
class BuiltRuntime:
    """What configure produced."""

    runtime: DraftRuntime
    unusable: dict[str, str] = field(default_factory=dict)
    """Drafts left out because they failed validation (tolerate_bad_drafts), with reasons."""
    threads: ThreadChoice | None = None
    """How ``num_threads: 0`` (auto) was resolved; None when the parameter set a count."""
    dtype: torch.dtype = torch.float32
    """The dtype every model runs in: what the output is lossless relative to."""
    dtype_choice: DtypeChoice | None = None
    """How ``dtype: auto`` was resolved; None when the parameter named one."""
    speculation: SpeculationChoice = field(default_factory=lambda: SpeculationChoice(
        FALLBACK_K, FALLBACK_INTERVAL, k_auto=False, interval_auto=False))
    """k and the check interval the runtime runs with, and how ``0`` (auto) chose them."""

    def describe_dtype(self) -> str:
        """For the configure log line."""
        if self.dtype_choice is not None:
            return f"dtype auto: {self.dtype_choice.describe()}"
        return f"dtype={str(self.dtype).removeprefix('torch.')}"


def build_policy(config: NodeConfig, draft_names: list[str]) -> Policy:
    """The policy named by the ``policy`` parameter, with the catalogue's predictor where needed."""
    try:
        return make_policy(
            config["policy"],
            predictor=config.catalogue.predictor,
            draft_names=draft_names,
            static_draft=config["static_draft"] or None,
        )
    except (ValueError, OSError) as exc:
        raise ConfigError(f"parameter 'policy' = '{config['policy']}': {exc}") from exc


def runtime_config(config: NodeConfig, speculation: SpeculationChoice) -> RuntimeConfig:
    """RuntimeConfig from parameters (k and the check interval as ``speculation`` resolved them);
    scheduling is external: the node's callbacks tick."""
    return RuntimeConfig(
        k=speculation.k,
        check_interval=speculation.check_interval,
        storage=StorageModel.mb_per_s(config["storage_bandwidth_mbps"] or None),
        load_timeout_s=config["load_timeout_s"],
        scheduling="external",
        ngram=NgramSettings(config["ngram_min_n"], config["ngram_max_n"]) if config["ngram"] else None,
    )


def build_runtime(config: NodeConfig, log: logging.Logger | None = None) -> BuiltRuntime:
    """Load tokenizer, target and the draft catalogue; build policy and runtime.

    Raises ConfigError with a message that names the parameter or draft to fix.
    """
    log = log or logging.getLogger(__name__)
    if config["device"] != "cpu" and not config["device"].startswith("cuda"):
        raise ConfigError(f"parameter 'device' = '{config['device']}': use 'cpu' or 'cuda[:N]'")
    if config["device"].startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"parameter 'device' = '{config['device']}': no CUDA device is available here")
    configure_threads(config["num_threads"] or None)
    models = config.catalogue
    roots = [models.root]
    auto = config["dtype"] == "auto"
    t0 = time.monotonic()
    try:
        tokenizer = load_tokenizer(models.target, allowed_roots=roots)
        target = load_causal_lm(
            models.target, dtype=torch.float32 if auto else _DTYPES[config["dtype"]], device=config["device"],
            allowed_roots=roots
        )
        require_rollback(target, models.target)
    except ModelLoadError as exc:
        raise ConfigError(f"parameter 'catalogue': target of {models.source}: {exc}") from exc
    # Each phase's time is logged: on a busy robot computer configure can take minutes, and the
    # operator (or a launch file's timeout) should see where they went.
    log.info("configure: target loaded in %.1f s", time.monotonic() - t0)
    dtype_choice = None
    if auto and config["device"] == "cpu":
        t0 = time.monotonic()
        target, dtype_choice = choose_dtype(target, config["num_speculative_tokens"])
        log.info("configure: dtype auto timed in %.1f s", time.monotonic() - t0)
    elif auto:  # a GPU: bf16 where it has it (timing would need device syncs; the answer is known)
        target = target.to(torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32)
    dtype = next(target.parameters()).dtype if auto else _DTYPES[config["dtype"]]
    if models.predictor is not None:  # checked whatever the policy: a run-time switch may need it
        try:
            check_predictor(models.predictor, target.config, models.draft_names)
        except ModelSetError as exc:
            raise ConfigError(f"parameter 'catalogue': {exc}") from exc

    specs: list[DraftSpec] = []
    unusable: dict[str, str] = {}
    for entry in models.drafts:
        try:
            check_draft(tokenizer, target.config, entry)
            specs.append(DraftSpec.from_dir(entry.name, entry.path, entry.domain, dtype=dtype))
        except (ModelLoadError, VocabularyMismatchError, ModelSetError, CatalogueError, OSError) as exc:
            unusable[entry.name] = f"({entry.path}) {exc}"
    if unusable and not config["tolerate_bad_drafts"]:
        # Every bad draft at once: an operator fixes them all before configuring again.
        raise ConfigError(
            "unusable draft(s): " + "; ".join(f"'{name}' {why}" for name, why in unusable.items())
            + " (fix or remove them, or set tolerate_bad_drafts to serve without them)"
        )
    for name, why in unusable.items():
        log.warning("draft '%s' is unusable and will not be served: %s", name, why)
    if config["policy"] == "static" and config["static_draft"] and config["static_draft"] in unusable:
        raise ConfigError(f"parameter 'static_draft' = '{config['static_draft']}' names an unusable draft")
    catalogue = Catalogue(specs)
    budget = Budget.drafts(config["budget_drafts"]) if config["budget_drafts"] else Budget.bytes(config["budget_bytes"])
    policy = build_policy(config, catalogue.names)
    try:
        engine = SpeculativeEngine(target, tokenizer, max_context=config["max_context"] or None)
    except InvalidRequestError as exc:
        raise ConfigError(f"parameter 'max_context' = {config['max_context']}: {exc}") from exc
    materialize = make_materializer(catalogue, dtype=dtype, device=config["device"])
    threads = None
    if not config["num_threads"]:
        t0 = time.monotonic()
        threads = choose_threads(engine, catalogue, budget, materialize, config["num_speculative_tokens"] or FALLBACK_K)
        log.info("configure: threads auto timed in %.1f s", time.monotonic() - t0)
    t0 = time.monotonic()  # after dtype and threads: it times what the node will run (set values: no timing)
    speculation = choose_speculation(engine, catalogue, budget, materialize,
                                     lambda: build_policy(config, catalogue.names), models.root,
                                     k=config["num_speculative_tokens"], check_interval=config["check_interval"])
    if speculation.k_auto or speculation.interval_auto:
        log.info("configure: speculation auto timed in %.1f s", time.monotonic() - t0)
    runtime = DraftRuntime(engine, catalogue, budget, policy, runtime_config(config, speculation),
                           materialize=materialize)
    return BuiltRuntime(runtime=runtime, unusable=unusable, threads=threads, dtype=dtype, dtype_choice=dtype_choice,
                        speculation=speculation)


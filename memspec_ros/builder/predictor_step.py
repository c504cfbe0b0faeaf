"""``memspec_build predictor``: the draft-need predictor for a built catalogue.

The predictor forecasts, from the target's hidden states and the recent tokens, the acceptance
each draft would get over the next segment (:mod:`memspec_ros.runtime.predictor`). It learns
from exact traces (:func:`memspec_ros.runtime.traces.record_dialogue`): the target runs
greedily over multi-domain dialogues, and one teacher-forced pass per draft gives every draft's
acceptance at every position. Training dialogues are cut from documents the drafts did not train
on (the drafts' validation split, :func:`memspec_ros.builder.corpora.split_validation`; the
training split for a build made before there was one): a draft that memorised its training text
looks better there than on the new text it meets at run time, and the predictor would learn to
trust it. The predictor's own validation dialogues are cut from the held-out documents, so the printed
validation top-1 and regret measure forecasting on text no model saw. Traces are saved as
they are recorded, so an interrupted run resumes where it stopped; recording stops at the time
budget (with at least two training dialogues and one validation dialogue).
"""
from __future__ import annotations

import hashlib
import json
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from memspec_ros.builder.corpora import read_jsonl_rows
from memspec_ros.builder.disk_space import require_free_space
from memspec_ros.builder.errors import BuildError
from memspec_ros.builder.layout import OutputLayout
from memspec_ros.builder.progress import count_bar
from memspec_ros.builder.prompts import domain_prompts
from memspec_ros.builder.steps import StepLedger
from memspec_ros.runtime.catalogue_file import CatalogueFile, PredictorValidation
from memspec_ros.runtime.workload import RAW, ChatStyle, chat_row_parts


@dataclass(frozen=True)
class PredictorSettings:
    """Workload and fitting settings (all part of the step's input key)."""

    time_budget_s: float = 600.0
    """Seconds for recording traces (fitting takes seconds more)."""
    sessions: int = 28
    validation_sessions: int = 4
    turns: int = 5
    max_new_tokens: int = 48
    docs_per_domain: int = 80
    prompts_per_domain: int = 48
    k: int = 4
    seed: int = 1234


@dataclass(frozen=True)
class BuildInputs:
    """The catalogue and split a previous ``memspec_build drafts`` left in the output folder."""

    catalogue: CatalogueFile
    domains: list[str]
    """The corpora's domains, in the order they were given (drafts add ``general``)."""


def read_build(layout: OutputLayout) -> BuildInputs:
    """The catalogue and the domains of the split; :class:`BuildError` if ``drafts`` has not run."""
    from memspec_ros.runtime.catalogue_file import CatalogueFileError, load_catalogue_file

    if not layout.catalogue.exists() or not layout.split_manifest.exists():
        raise BuildError(f"{layout.root} has no finished draft build (catalogue.yaml and work/corpora): run "
                         f"`memspec_build drafts --out {layout.root} ...` first")
    try:
        catalogue = load_catalogue_file(layout.catalogue, predictor_must_exist=False)  # the step (re)writes it
    except CatalogueFileError as exc:
        raise BuildError(str(exc)) from None
    manifest = json.loads(layout.split_manifest.read_text())
    return BuildInputs(catalogue=catalogue, domains=[d["domain"] for d in manifest["domains"]])


def _file_digest(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def run_predictor(out: Path, settings: PredictorSettings, *, force: bool = False) -> dict[str, object]:
    """Record traces, fit the predictor, save it and add it to the catalogue; return the metrics."""
    from memspec_ros.core.model_loading import load_config
    from memspec_ros.runtime.catalogue import zoo_fingerprint
    from memspec_ros.runtime.model_set_checks import hidden_width

    layout = OutputLayout(out)
    built = read_build(layout)
    catalogue = built.catalogue
    if len(built.domains) < 2:
        raise BuildError("the predictor forecasts which domain's draft a dialogue needs: it needs corpora of at "
                         f"least two domains, this build has {built.domains}")
    splits = list(_training_sources(layout, built.domains).values()) + [layout.heldout(d) for d in built.domains]
    models = zoo_fingerprint([catalogue.target, *(d.path for d in catalogue.drafts)])
    inputs = {"models": models, "drafts": catalogue.draft_names, "splits": _file_digest(splits),
              "settings": asdict(settings)}
    ledger = StepLedger(layout.stamps, force=force)
    # the target's hidden state of every generated token (float16) dominates a trace
    hidden = hidden_width(load_config(catalogue.target))
    sessions = settings.sessions + settings.validation_sessions
    require_free_space(out, sessions * settings.turns * settings.max_new_tokens * hidden * 2 * 2,
                       "the predictor's traces")

    def work() -> dict[str, object]:
        return _train(layout, built, settings, models, inputs["splits"])

    outcome = ledger.run("predictor", inputs, work, outputs=[layout.predictor])
    result = outcome.result
    val = result.get("validation", {})
    validation = _validation_figures(val)
    _add_to_catalogue(layout, validation)
    print(f"[predictor] validation (held-out dialogues): top-1 {val.get('top1', float('nan')):.3f}, regret "
          f"{val.get('regret', float('nan')):.3f} (always running {val.get('best_single_draft') or 'the best draft'}: "
          f"regret {val.get('best_single_regret', float('nan')):.3f}) over {val.get('examples', 0)} positions",
          flush=True)
    if validation is not None and validation.loses_to_fixed:
        print(weak_predictor_advice(validation, layout.root), flush=True)
    return result


def weak_predictor_advice(validation, root: Path) -> str:
    """What to do when the predictor forecast worse than always running one draft."""
    return (f"[predictor] warning: the predictor lost more acceptance on its held-out dialogues than always running "
            f"{validation.best_fixed_draft} (regret {validation.regret:.3f} against "
            f"{validation.best_fixed_regret:.3f}): "
            "its forecasts are worse than none. In order: (1) record more dialogues, rerun with a larger "
            "--time-budget-s (and --sessions); (2) check `memspec_build evaluate`: if the domain drafts lead "
            f"{validation.best_fixed_draft} by little on their own domains, there is little for a predictor to choose "
            "between (rebuild the drafts: docs/build.md, 'Which recipe'); (3) until then the node warns at configure "
            "and its memspec policy leans on the acceptance it observes, or serve "
            f"`policy: static` with `static_draft: {validation.best_fixed_draft}` ({root / 'catalogue.yaml'})")


def _validation_figures(val: dict) -> PredictorValidation | None:
    if not val or not val.get("examples") or not val.get("best_single_draft"):
        return None
    return PredictorValidation(top1=val["top1"], regret=val["regret"], best_fixed_draft=val["best_single_draft"],
                               best_fixed_regret=val["best_single_regret"])


def _training_sources(layout: OutputLayout, domains: list[str]) -> dict[str, Path]:
    """Per domain, the documents training dialogues are cut from: its validation split where it has one."""
    sources = {}
    for domain in domains:
        val = layout.validation_split(domain)
        sources[domain] = val if val.exists() and val.stat().st_size > 0 else layout.train_split(domain)
    return sources


def _prompts(paths: dict[str, Path], settings: PredictorSettings, rng: random.Random, render_prompt
             ) -> tuple[dict[str, list[str]], ChatStyle]:
    """Per domain, prompts cut from its documents, and their style: chat documents give user messages
    (with their conversation's system prompt), as the node receives them in chat goals."""
    out: dict[str, list[str]] = {}
    systems: set[str] = set()
    for domain, path in paths.items():
        docs = read_jsonl_rows(path)
        rng.shuffle(docs)
        rows = domain_prompts(docs[: settings.docs_per_domain], settings.prompts_per_domain, render_prompt)
        prompts = []
        for text, messages in rows:
            if messages is None:
                prompts.append(text)
            else:
                system, user = chat_row_parts(messages)
                systems.add(system)
                prompts.append(user)
        if prompts:
            out[domain] = prompts
    if len(systems) > 1:
        raise BuildError(f"the chat corpora open with {len(systems)} different system prompts; the predictor's "
                         "dialogues send one: give every conversation the system prompt the robot will use")
    return out, (ChatStyle(True, systems.pop()) if systems else RAW)


def _train(layout: OutputLayout, built: BuildInputs, settings: PredictorSettings, models: str,
           splits: str) -> dict[str, object]:
    import torch

    from memspec_ros.builder.chat_rendering import chat_renderers
    from memspec_ros.runtime.predictor_training import train_predictor
    from memspec_ros.runtime.recording_models import load_recording_models
    from memspec_ros.runtime.traces import DialogueTrace, record_dialogue
    from memspec_ros.runtime.workload import multi_domain_dialogues

    catalogue_file = built.catalogue
    torch.manual_seed(settings.seed)
    loaded = load_recording_models(catalogue_file)
    engine, catalogue, drafts, target = loaded.engine, loaded.catalogue, loaded.proposers, loaded.engine.target

    rng = random.Random(settings.seed)
    sources = _training_sources(layout, built.domains)
    print("[predictor] training dialogues from " + ", ".join(f"{d}: {p.name}" for d, p in sources.items()),
          flush=True)
    renderers = chat_renderers(engine.tokenizer)
    render_prompt = renderers[1] if renderers else None
    train_prompts, style = _prompts(sources, settings, rng, render_prompt)
    # its own generator: the validation dialogues stay the same whichever documents the training ones come from
    val_prompts, _ = _prompts({d: layout.heldout(d) for d in built.domains}, settings,
                              random.Random(settings.seed + 1), render_prompt)
    if len(train_prompts) < 2 or len(val_prompts) < 2:
        raise BuildError("too little text to cut dialogue prompts from at least two domains' documents; "
                         "add documents to the corpora")
    train_sessions = multi_domain_dialogues(train_prompts, sessions=settings.sessions, turns=settings.turns,
                                            max_new_tokens=settings.max_new_tokens, seed=settings.seed, style=style)
    val_sessions = multi_domain_dialogues(val_prompts, sessions=settings.validation_sessions, turns=settings.turns,
                                          max_new_tokens=settings.max_new_tokens, seed=settings.seed + 1, style=style)

    layout.traces.mkdir(parents=True, exist_ok=True)
    # traces depend on the models, the documents and the workload, not on the budget: a rerun with more
    # time reuses them
    workload = {k: v for k, v in asdict(settings).items() if k != "time_budget_s"}
    if style.chat:  # traces of chat dialogues differ from those of the same documents' text slices
        workload["chat"] = [style.system_prompt, engine.tokenizer.chat_template]
    tag = hashlib.sha256(json.dumps([models, splits, workload], sort_keys=True).encode()).hexdigest()[:12]
    t0 = time.monotonic()

    def record(sessions: list, kind: str, minimum: int) -> list[DialogueTrace]:
        traces: list[DialogueTrace] = []
        bar = count_bar(len(sessions), f"{kind} dialogues", "dialogue")
        for i, turns in enumerate(sessions):
            if i >= minimum and time.monotonic() - t0 > settings.time_budget_s:
                print(f"[predictor] time budget spent: {len(traces)} {kind} dialogues recorded", flush=True)
                break
            path = layout.traces / f"{tag}-{kind}-{i:03d}.npz"
            if path.exists():
                trace = DialogueTrace.load(path)
            else:
                trace = record_dialogue(engine, drafts, turns, name=f"{kind}-{i:03d}", helper=loaded.helper,
                                        k=settings.k)
                trace.save(path)
            traces.append(trace)
            bar.update()
        bar.close()
        return traces

    val = record(val_sessions, "validation", 1)
    train = record(train_sessions, "training", 2)
    trace_seconds = time.monotonic() - t0
    t1 = time.monotonic()
    predictor, metrics = train_predictor(
        train, catalogue.names, int(target.config.get_text_config().hidden_size), validation=val, k=settings.k,
        seed=settings.seed,
        meta={"data": "prompts cut from each domain's validation documents (which the drafts did not train on); "
                      "validation from held-out documents",
              "seed": settings.seed, "sessions": len(train), "validation_sessions": len(val),
              "turns": settings.turns, "max_new_tokens": settings.max_new_tokens, "models": models})
    predictor.save(layout.predictor)
    report: dict[str, object] = {name: asdict(m) for name, m in metrics.items()}
    report.update({"training_dialogues": len(train), "validation_dialogues": len(val),
                   "training_documents": {d: str(path.relative_to(layout.root)) for d, path in sources.items()},
                   "trace_seconds": round(trace_seconds, 1), "fit_seconds": round(time.monotonic() - t1, 2),
                   "file_bytes": layout.predictor.stat().st_size,
                   # names the predictor file these training prompts belong to (bench/split.py checks it)
                   "predictor_sha1": hashlib.sha1(layout.predictor.read_bytes()).hexdigest(),
                   # lets an evaluation drop held-out prompts textually identical to a training prompt
                   # (different documents can share boilerplate lines; `python -m bench` does this)
                   "train_prompt_sha1": sorted({hashlib.sha1(t.prompt.encode()).hexdigest()
                                                for tr in train for t in tr.turns})})
    layout.reports.mkdir(parents=True, exist_ok=True)
    (layout.reports / "predictor.json").write_text(json.dumps(report, indent=1) + "\n")
    return report


def _add_to_catalogue(layout: OutputLayout, validation: PredictorValidation | None) -> None:
    """Name the predictor in the catalogue, with its validation figures (the node warns when they are weak)."""
    from memspec_ros.runtime.catalogue_file import load_catalogue_file, write_catalogue_file

    current = load_catalogue_file(layout.catalogue)
    if current.predictor is None or current.predictor_validation != validation:
        write_catalogue_file(layout.catalogue, target=current.target, drafts=list(current.drafts),
                             predictor=layout.predictor, predictor_validation=validation,
                             header="Written by memspec_build; format: docs/catalogue.md.")
        if current.predictor is None:
            print(f"[predictor] added {layout.predictor.name} to {layout.catalogue}", flush=True)

"""The ``memspec_build`` command line: ``drafts``, ``predictor``, ``evaluate``.

    memspec_build drafts --target my_target --corpus robot=robot.jsonl --corpus code=src/ --out my_models
    memspec_build predictor --out my_models
    memspec_build evaluate --out my_models

Then serve it: ``ros2 launch memspec_ros memspec.launch.py`` with ``catalogue: my_models/catalogue.yaml``.
Exit codes: 0 done, 2 a problem with the input (the message says what to fix), 130 interrupted
(rerun to resume), 1 a bug.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from memspec_ros.builder.errors import BuildError

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def _positive(kind: type) -> object:
    def parse(text: str) -> object:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value
    return parse


def _common(parser: argparse.ArgumentParser, budget: float, budget_help: str) -> None:
    parser.add_argument("--out", type=Path, required=True,
                        help="output folder: catalogue.yaml, target/, draft-<domain>/, predictor.safetensors, "
                             "heldout/, reports/, work/ (docs/build.md)")
    parser.add_argument("--time-budget-s", type=_positive(float), default=budget, help=budget_help)
    parser.add_argument("--k", type=_positive(int), default=4, help="draft tokens per speculative round (default 4)")
    parser.add_argument("--threads", type=_positive(int), default=None,
                        help="torch threads for training and for timing (default: torch's, one per core); step "
                             "times, hence the draft size, depend on it: to size drafts for a node with a "
                             "fixed num_threads, pass that count")
    parser.add_argument("--force", action="store_true", help="redo steps that finished before")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (also what ``--help`` prints)."""
    parser = argparse.ArgumentParser(
        prog="memspec_build", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="From your target model and one corpus per domain to a catalogue memspec_node serves.",
        epilog="Run the subcommands in order: drafts, predictor, evaluate. Each skips steps that already "
               "finished with the same inputs, so an interrupted run resumes. Format of the result: "
               "docs/catalogue.md; the whole procedure: docs/build.md.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{drafts,predictor,evaluate}")

    drafts = sub.add_parser(
        "drafts", help="distil one draft per domain (and a general one) from the target; write the catalogue",
        description="Split the corpora by document (held-out 5%, validation 10% of the rest), measure the target "
                    "and choose a draft size this machine can afford (target verification >= 8x a draft step), "
                    "train a small Llama-style 'general' draft on all corpora with the target's tokenizer (corpus, "
                    "then KL toward the target on the corpus, then on the target's own continuations), then one "
                    "draft per domain from it (the two KL phases on its domain); with --validation-checks, each KL "
                    "phase keeps the weights that do best on validation text. Writes <out>/catalogue.yaml.")
    drafts.add_argument("--target", type=Path, required=True,
                        help="Hugging Face causal LM folder: config.json, *.safetensors, its tokenizer "
                             "(no trust_remote_code models)")
    drafts.add_argument("--corpus", action="append", default=[], metavar="DOMAIN=PATH",
                        help="a domain's corpus: a .jsonl file (one document per line, in --text-field, or a "
                             "conversation in field messages, rendered with the target's chat template), a .txt "
                             "file (documents separated by blank lines) or a folder of them; repeat per domain")
    drafts.add_argument("--corpora", type=Path, default=None, metavar="DIR",
                        help="a folder whose <domain>.txt, <domain>.jsonl and <domain>/ entries are the corpora")
    drafts.add_argument("--general-corpus", type=Path, default=None, metavar="PATH",
                        help="the general draft's own text, in a corpus's formats: what users ask outside "
                             "every domain (the general draft is the fallback for the turns no specialist "
                             "covers). Default: the general draft trains on all the domains' corpora, which "
                             "makes it a multi-domain draft that takes part of each specialist's lead")
    drafts.add_argument("--text-field", default="text", help="the text field of .jsonl corpora (default text)")
    _common(drafts, 1800.0, "training seconds for all drafts together (default 1800): the general draft gets two "
                            "shares, each domain draft one (equal shares with --specialists-from scratch; with "
                            "base, the base draft two and the general draft one); each "
                            "phase stops at its share and saves")
    drafts.add_argument("--draft-shape", action="append", default=[], metavar="[DOMAIN=]HIDDENxLAYERS",
                        help="use this draft size (e.g. 192x2) instead of choosing one; still measured. "
                             "DOMAIN=HIDDENxLAYERS (repeatable, 'general' included) sizes one domain's draft "
                             "apart, with --specialists-from scratch (general= alone with base)")
    drafts.add_argument("--specialists-from", choices=("general", "scratch", "base"), default="general",
                        help="where each domain draft starts: the general draft, trained first (default; the "
                             "domain draft then spends its whole share on its domain), random weights (the "
                             "earlier recipe, every draft trained alike), or a base draft of all domains at the "
                             "specialists' size, given two shares and not shipped (the general draft is then a "
                             "fallback trained from scratch, sized with --draft-shape general=HxL)")
    drafts.add_argument("--general-share", type=_positive(float), default=None, metavar="UNITS",
                        help="the general draft's training time in domain-draft shares (default 2, or 1 with "
                             "--specialists-from scratch or base)")
    drafts.add_argument("--seq-len", type=_positive(int), default=128, help="training window in tokens")
    drafts.add_argument("--batch", type=_positive(int), default=16, help="windows per training step")
    drafts.add_argument("--distill-batch", type=_positive(int), default=8,
                        help="windows per distillation step (the target's logits for each: lower it for a "
                             "large vocabulary)")
    drafts.add_argument("--continuation-tokens", type=_positive(int), default=96,
                        help="tokens the target continues each training prefix with (third phase)")
    drafts.add_argument("--validation-checks", type=int, default=0, metavar="N",
                        help="score each draft N times per KL phase (and before it) on the target's continuations "
                             "of validation text (10%% of the training documents, never trained on) and keep the "
                             "best weights; 0 (default) keeps the last weights. Meant for small corpora (under ~1 M "
                             "characters), where drafts memorise; docs/build.md has what it measured")
    drafts.add_argument("--draft-max-positions", type=_positive(int), default=2048,
                        help="the drafts' context (capped at the target's); beyond it the node decodes "
                             "target-only. The node's memory budget counts a draft's KV cache at this length")
    drafts.add_argument("--draft-vocab", type=int, default=0, metavar="N",
                        help="drafts predict only the N target tokens most frequent in the corpora (plus one "
                             "'other' class): cheaper steps and faster training for a large-vocabulary target "
                             "(Llama 3, Qwen2.5, Gemma 3). Still lossless: the target writes every token. "
                             "0 (default): the target's whole vocabulary")
    drafts.add_argument("--seed", type=int, default=0)
    drafts.add_argument("--draft-from-target", type=int, default=0, metavar="LAYERS",
                        help="start every draft as the target's embedding, its first LAYERS layers and its final "
                             "norm, then train it as usual (Llama targets; the drafts get the target's width). "
                             "0 (default): from random weights")
    drafts.add_argument("--save-dtype", choices=("bfloat16", "float16", "float32"), default=None,
                        help="the dtype the draft files are written in (default: the target's when it is stored "
                             "in 16 bits, else float32); bfloat16 halves them, the node computes in its own dtype")
    drafts.add_argument("--resize", action="store_true",
                        help="measure the draft sizes again (after a sizing warned that the machine was busy); "
                             "the other finished steps are kept, drafts are retrained only if their size changes")

    predictor = sub.add_parser(
        "predictor", help="train the draft-need predictor for the catalogue in --out",
        description="Record exact traces of multi-domain dialogues cut from documents the drafts did not "
                    "train on (validation: from held-out documents), fit the predictor, save "
                    "<out>/predictor.safetensors and add it to the catalogue. Prints validation top-1 and regret.")
    _common(predictor, 600.0, "seconds for recording dialogue traces (default 600); fitting comes on top")
    predictor.add_argument("--sessions", type=_positive(int), default=28, help="training dialogues")
    predictor.add_argument("--validation-sessions", type=_positive(int), default=4, help="validation dialogues")
    predictor.add_argument("--turns", type=_positive(int), default=5, help="turns per dialogue")
    predictor.add_argument("--max-new-tokens", type=_positive(int), default=48, help="tokens per turn")
    predictor.add_argument("--seed", type=int, default=1234)

    evaluate = sub.add_parser(
        "evaluate", help="acceptance matrix, step times and a verdict per draft",
        description="Every draft on every domain's held-out text (exact greedy acceptance), draft and target "
                    "step times, own-domain margins, and a verdict per draft: useful / no better than the "
                    "general draft / slower than target-only. Writes <out>/reports/evaluation.{json,md}.")
    _common(evaluate, 600.0, "seconds for the target's held-out continuations (default 600)")
    evaluate.add_argument("--prompts-per-domain", type=_positive(int), default=24)
    evaluate.add_argument("--max-new-tokens", type=_positive(int), default=64)
    evaluate.add_argument("--prompts", type=Path, default=None, metavar="FILE",
                          help="your own held-out prompts instead of <out>/heldout/prompts.jsonl: JSON lines "
                               "{\"domain\": ..., \"prompt\": text} or {\"domain\": ..., \"messages\": [...]} "
                               "(a conversation ending with the user's message, rendered with the target's chat "
                               "template); every domain must be one of the build's")
    return parser


def _drafts(args: argparse.Namespace) -> None:
    from memspec_ros.builder.chat_rendering import target_chat_renderers
    from memspec_ros.builder.corpora import parse_corpus_arguments, read_corpus
    from memspec_ros.builder.draft_architecture import parse_shape
    from memspec_ros.builder.drafts_step import DraftSettings, run_drafts
    from memspec_ros.builder.layout import GENERAL
    from memspec_ros.builder.target_folder import check_target_folder

    shape, per_domain = _draft_shapes(args.draft_shape)  # per-domain sizes are checked by run_drafts
    if shape:
        try:
            parse_shape(shape)
        except ValueError as exc:
            raise BuildError(f"--draft-shape: {exc}") from None
    target = check_target_folder(args.target)
    sources = parse_corpus_arguments(args.corpus, args.corpora)
    renderers = target_chat_renderers(target.path)
    render_chat = renderers[0] if renderers else None
    corpora = [read_corpus(domain, path, args.text_field, render_chat) for domain, path in sources.items()]
    general_corpus = None
    if args.general_corpus is not None:
        general_corpus = read_corpus(GENERAL, args.general_corpus.expanduser(), args.text_field, render_chat)
        if any(c.digest == general_corpus.digest for c in corpora):
            raise BuildError(f"--general-corpus {args.general_corpus} is also a domain's corpus: give the general "
                             "draft text outside the domains, or leave --general-corpus out (then the general "
                             "draft trains on all the domains' corpora)")
    if args.validation_checks < 0:
        raise BuildError(f"--validation-checks must be 0 (keep the last weights) or more, got {args.validation_checks}")
    if args.draft_from_target < 0:
        raise BuildError(f"--draft-from-target must be 0 (random weights) or a layer count, got "
                         f"{args.draft_from_target}")
    if args.draft_vocab < 0:
        raise BuildError(f"--draft-vocab must be 0 (the whole vocabulary) or a token count, got {args.draft_vocab}")
    if target.path == args.out.expanduser().resolve():
        raise BuildError(f"--out {args.out} is the target folder itself; choose an output folder beside it")
    settings = DraftSettings(time_budget_s=args.time_budget_s, k=args.k, seq_len=args.seq_len, batch=args.batch,
                             distill_batch=args.distill_batch, continuation_new_tokens=args.continuation_tokens,
                             max_positions=args.draft_max_positions, shape=shape, domain_shapes=per_domain,
                             specialists_from=args.specialists_from, general_units=args.general_share or 0.0,
                             validation_checks=args.validation_checks, draft_vocab=args.draft_vocab,
                             seed=args.seed, save_dtype=args.save_dtype or "", init_layers=args.draft_from_target)
    build = run_drafts(target, corpora, args.out.expanduser().resolve(), settings, force=args.force,
                       resize=args.resize, general_corpus=general_corpus)
    print(f"[drafts] done: {len(build.drafts)} drafts in {args.out}; next: memspec_build predictor --out {args.out}",
          flush=True)


def _draft_shapes(values: list[str]) -> tuple[str, tuple[tuple[str, str], ...]]:
    """``--draft-shape`` values -> (the shape of every draft, or ""; per-domain ``(domain, shape)`` pairs)."""
    default, per_domain = "", {}
    for value in values:
        domain, sep, shape = value.rpartition("=")
        if not sep:
            if default:
                raise BuildError(f"--draft-shape {default} and {value}: give one size for all drafts, and "
                                 "DOMAIN=HIDDENxLAYERS for the others")
            default = value
        elif not domain or domain in per_domain:
            raise BuildError(f"--draft-shape {value!r}: name each domain once, as DOMAIN=HIDDENxLAYERS")
        else:
            per_domain[domain] = shape
    return default, tuple(sorted(per_domain.items()))


def _predictor(args: argparse.Namespace) -> None:
    from memspec_ros.builder.predictor_step import PredictorSettings, run_predictor

    settings = PredictorSettings(time_budget_s=args.time_budget_s, sessions=args.sessions,
                                 validation_sessions=args.validation_sessions, turns=args.turns,
                                 max_new_tokens=args.max_new_tokens, k=args.k, seed=args.seed)
    run_predictor(args.out.expanduser().resolve(), settings, force=args.force)
    print(f"[predictor] done; next: memspec_build evaluate --out {args.out}", flush=True)


def _evaluate(args: argparse.Namespace) -> None:
    from memspec_ros.builder.evaluation import EvaluationSettings, run_evaluate

    settings = EvaluationSettings(time_budget_s=args.time_budget_s, prompts_per_domain=args.prompts_per_domain,
                                  max_new_tokens=args.max_new_tokens, k=args.k,
                                  prompts_file=str(args.prompts.expanduser().resolve()) if args.prompts else None)
    run_evaluate(args.out.expanduser().resolve(), settings, force=args.force)


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; 2 and one message on a problem the user must fix."""
    args = build_parser().parse_args(argv)
    try:
        from transformers.utils import logging as hf_logging

        from memspec_ros.core.model_loading import configure_threads

        hf_logging.disable_progress_bar()  # ours are enough; theirs would interleave with them
        configure_threads(args.threads)
        {"drafts": _drafts, "predictor": _predictor, "evaluate": _evaluate}[args.command](args)
    except BuildError as exc:
        print(f"memspec_build {args.command}: error: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"memspec_build {args.command}: interrupted; run the same command again to resume (finished steps "
              "are kept)", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

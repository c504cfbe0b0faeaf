"""The models under test, loaded once and shared by every experiment of a run.

One target, one tokenizer and one materialised copy of every draft: traces, the cost model and
the transformers peer use these copies; the policy runs load their own drafts through the
runtime's loader (that is the thing being measured), with the same materialiser code.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

import torch

from memspec_ros.core.engine import SpeculativeEngine
from memspec_ros.core.model_loading import configure_threads, load_causal_lm, load_tokenizer, weight_files
from memspec_ros.core.proposer import DraftProposer
from memspec_ros.core.token_map import TokenMap
from memspec_ros.runtime import Catalogue, load_catalogue_file, make_materializer, zoo_fingerprint
from memspec_ros.runtime.catalogue_file import CatalogueFileError
from memspec_ros.runtime.loader import Materializer
from memspec_ros.runtime.traces import Turn


@dataclass
class Testbed:
    """Target engine, draft catalogue and reference copies of the drafts."""

    catalogue_file: Path
    """The catalogue file the models were read from (what the results name as measured)."""
    target_path: Path
    engine: SpeculativeEngine
    catalogue: Catalogue
    proposers: dict[str, DraftProposer]
    materialize: Materializer
    predictor_path: Path
    fingerprint: str
    """Hash of the target's and drafts' weights and the compute dtype: cached traces are only valid for it."""
    threads: int
    """torch intra-op threads the headline decodes with."""
    dtype_name: str = "float32"
    """The compute dtype of every model (output is lossless relative to the target in it)."""
    dtype_note: str = "--dtype"
    """How it was chosen (``auto``: the node's measurement, with its figures)."""
    _assistants: dict[str, torch.nn.Module] = field(default_factory=dict, repr=False)

    def assistant(self, name: str) -> torch.nn.Module:
        """Draft ``name`` as transformers' assisted generation takes it: over the target's whole
        vocabulary. A subset draft (:mod:`memspec_ros.core.token_map`) is expanded once: every
        target token outside its subset reads its 'other' embedding and gets a logit 1e4 below
        the rest, so the expanded model's greedy proposals are exactly the subset draft's."""
        if name not in self._assistants:
            proposer = self.proposers[name]
            self._assistants[name] = (proposer.model if proposer.token_map is None
                                      else _full_vocabulary(proposer.model, proposer.token_map))
        return self._assistants[name]

    def domain_proposer(self, turn: Turn) -> DraftProposer | None:
        """The turn's own domain draft (speeds up recording a trace; the output is the target's)."""
        spec = self.catalogue.by_domain(turn.domain) if turn.domain else None
        return self.proposers[spec.name] if spec else None

    def target_nbytes(self) -> int:
        """Bytes of the target's weight files on disk."""
        return sum(p.stat().st_size for p in weight_files(self.target_path))


def load_testbed(catalogue: Path, threads: int | None, dtype: str = "float32") -> Testbed:
    """Load a catalogue's target and drafts (a file or its folder), with ``threads`` torch threads for decoding.

    ``None`` leaves torch's count (the caller may then choose one by measurement and set ``threads``).
    ``dtype`` ``auto`` chooses as the node's ``dtype: auto`` does."""
    from memspec_ros.core.dtype_choice import choose_dtype

    configure_threads(threads)
    try:
        models = load_catalogue_file(catalogue)
    except CatalogueFileError as exc:  # a user's path or file: say what to fix, no traceback
        raise SystemExit(str(exc)) from None
    if models.predictor is None:
        raise SystemExit(f"{models.source} names no predictor; the benchmark runs the memspec policies, which need one")
    tokenizer = load_tokenizer(models.target)
    target = load_causal_lm(models.target, dtype=torch.float32 if dtype == "auto" else getattr(torch, dtype))
    note = f"--dtype {dtype}"
    if dtype == "auto":
        target, choice = choose_dtype(target)
        dtype, note = choice.name, f"auto (the node's default): {choice.describe()}"
    engine = SpeculativeEngine(target, tokenizer)
    catalogue = Catalogue.from_file(models, dtype=getattr(torch, dtype))  # footprints in the compute dtype
    materialize = make_materializer(catalogue, dtype=getattr(torch, dtype))
    proposers = {s.name: materialize(s, [p.read_bytes() for p in s.weight_files]) for s in catalogue}
    # a bf16 target is another model than the fp32 one: its traces are its own (fp32 keys stay as they were)
    fingerprint = zoo_fingerprint([models.target, *(s.path for s in catalogue)]) + (
        "" if dtype == "float32" else f"-{dtype}")
    return Testbed(catalogue_file=models.source, target_path=models.target, engine=engine, catalogue=catalogue,
                   proposers=proposers, materialize=materialize, predictor_path=models.predictor,
                   fingerprint=fingerprint, threads=threads or torch.get_num_threads(), dtype_name=dtype,
                   dtype_note=note)


def _full_vocabulary(model: torch.nn.Module, token_map: TokenMap) -> torch.nn.Module:
    """A copy of subset draft ``model`` whose embedding and head cover the target's vocabulary."""
    full = copy.deepcopy(model)
    inside = torch.zeros(token_map.target_vocab_size, dtype=torch.bool)
    inside[token_map.draft_to_target] = True
    rows = token_map.target_to_draft  # each target id's draft row ('other' outside the subset)
    with torch.no_grad():
        embedding = full.get_input_embeddings().weight[rows].clone()
        full.set_input_embeddings(torch.nn.Embedding.from_pretrained(embedding, freeze=True))
        weight = full.get_output_embeddings().weight[rows].clone()
        head = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=True, dtype=weight.dtype, device=weight.device)
        head.weight.copy_(weight)
        head.bias.copy_(torch.where(inside, 0.0, -1e4).to(weight.dtype))
        full.set_output_embeddings(head)
    full.config.vocab_size = token_map.target_vocab_size
    full.config.tie_word_embeddings = False
    return full.eval()

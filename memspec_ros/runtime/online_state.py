"""The online learner's state on disk: what a restarted node continues from.

One small safetensors file (the learned weights, the guard's window and two counters; about
30 KB for the default model set), written atomically (a temporary file in the same folder, then
a rename) so a crash mid-write leaves the previous state or none, never half of one. Its
metadata carries a format version and the digest of the *shipped* predictor it was learned from:
a file learned from another predictor (a rebuilt model set, another catalogue) is not applied.
Anything wrong with it is a reason returned to the caller, which logs it and starts from the
shipped predictor: a damaged or foreign file never stops a node.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from .online_learning import OnlineLearner
from .predictor import DraftPredictor

FORMAT = "memspec-online-predictor-1"
FILE_NAME = "online_predictor.safetensors"


def shipped_digest(predictor: DraftPredictor, weight: np.ndarray | None = None,
                   bias: np.ndarray | None = None) -> str:
    """sha256 over a predictor's shipped parameters and draft names (what learned state is tied to)."""
    h = hashlib.sha256(json.dumps(predictor.draft_names).encode())
    for a in (predictor.weight if weight is None else weight, predictor.bias if bias is None else bias,
              predictor.mean, predictor.std):
        h.update(np.ascontiguousarray(a, dtype=np.float32).tobytes())
    return h.hexdigest()


def save_state(path: Path, learner: OnlineLearner) -> None:
    """Write the learner's state to ``path`` atomically."""
    from safetensors.numpy import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    pred = learner.predictor
    meta = {"format": FORMAT, "shipped": shipped_digest(pred, learner.shipped_weight, learner.shipped_bias),
            "draft_names": json.dumps(pred.draft_names)}
    # ".tmp-" like the session files' temporaries: a node starting up removes a leftover one
    fd, tmp = tempfile.mkstemp(prefix=".tmp-online_predictor.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        save_file(learner.state(), tmp, metadata=meta)
        with open(tmp, "rb+") as fh:  # on disk before the rename, or a power cut could leave an empty file
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)  # the rename itself
        finally:
            os.close(dir_fd)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_state(path: Path, learner: OnlineLearner) -> str | None:
    """Continue ``learner`` from ``path``. Returns None when applied (or when there is no file yet),
    else why the file was skipped (the learner then keeps the shipped weights)."""
    if not path.exists():
        return None
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="numpy") as fh:
            meta = fh.metadata() or {}
            state = {k: fh.get_tensor(k) for k in ("weight", "bias", "regrets", "counters")}
    except Exception as exc:  # any damage is a reason to skip, never a crash
        return f"{path} is not readable learned state ({type(exc).__name__}: {str(exc)[:120]}); starting from the " \
               "shipped predictor"
    pred = learner.predictor
    if meta.get("format") != FORMAT:
        return f"{path} has format {meta.get('format')!r}, not {FORMAT!r}; starting from the shipped predictor"
    if meta.get("shipped") != shipped_digest(pred, learner.shipped_weight, learner.shipped_bias):
        return f"{path} was learned from another predictor (the model set changed); starting from the shipped one"
    regrets, counters = state["regrets"], state["counters"]
    if state["weight"].shape != pred.weight.shape or state["bias"].shape != pred.bias.shape \
            or regrets.ndim != 2 or (regrets.size and regrets.shape[1] != 2) or counters.ndim != 1 \
            or counters.shape[0] < 2 or not all(np.isfinite(state[k]).all() for k in ("weight", "bias", "regrets")):
        return f"{path} has damaged learned state; starting from the shipped predictor"
    learner.restore(state)
    return None

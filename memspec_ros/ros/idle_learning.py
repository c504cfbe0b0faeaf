"""Online learning in the node's idle time: after each turn, never in a goal's way.

After a goal's turn completes, one learning step (:meth:`DraftRuntime.learn_from_last_turn`) is
queued on the node's torch thread, where every generation runs too. A goal that is accepted
meanwhile sets the step's cancel event: the step stops before its next draft pass (a pass over a
turn is a few to a few tens of milliseconds) and the goal's turn, queued behind it on the same
thread, starts (a goal that waited in the queue cancels the step queued after the goal before it,
as it starts). So learning never runs beside decoding, and a goal waits at most for the pass in
progress; ``bench.learning_cost`` measures what that costs a goal's tokens/s.

The learned state is written after every step, atomically, beside the node's session files
(:mod:`memspec_ros.runtime.online_state`), so a restarted node continues from it; without a
session folder it lives in memory only. ``~/reset_learning`` puts the shipped predictor back and
removes the file.
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path

from rclpy.impl.rcutils_logger import RcutilsLogger

from memspec_ros.runtime.online_learning import LearnReport, OnlineLearner
from memspec_ros.runtime.online_state import FILE_NAME, load_state, save_state
from memspec_ros.runtime.runtime import DraftRuntime

from .torch_thread import TorchThread


class IdleLearning:
    """The node's online learning: queue a step after each turn, cancel it for a goal, keep its state."""

    def __init__(self, runtime: DraftRuntime, torch_thread: TorchThread, logger: RcutilsLogger,
                 state_dir: Path | None) -> None:
        self._runtime = runtime
        self._torch = torch_thread
        self._log = logger
        self.path = state_dir / FILE_NAME if state_dir is not None else None
        self._lock = threading.Lock()
        self._cancel = threading.Event()
        self.last: LearnReport | None = None
        self.steps = 0
        self.cancelled = 0
        self.learner = self._attach()

    def _attach(self) -> OnlineLearner:
        """Learn for the runtime's current policy, continuing from the file if there is one."""
        learner = self._runtime.enable_learning()
        if self.path is not None:
            reason = load_state(self.path, learner)
            if reason is not None:
                self._log.warning(f"online learning: {reason}")
            elif self.path.exists():
                self._log.info(f"online learning: continuing from {self.path} ({learner.examples_seen} examples)")
        return learner

    def policy_changed(self) -> None:
        """The runtime's policy was replaced; it carried the learned state over to the new predictor."""
        learner = self._runtime.learner
        if learner is not None:
            with self._lock:
                self.learner = learner

    def after_turn(self) -> None:
        """A turn completed: queue a learning step on the torch thread (returns at once)."""
        with self._lock:
            self._cancel = cancel = threading.Event()
        with contextlib.suppress(RuntimeError):  # the torch thread is closing with the node
            self._torch.submit(self._step, cancel)

    def goal_arrived(self) -> None:
        """A goal was accepted: stop a running step before its next pass."""
        with self._lock:
            self._cancel.set()

    def reset(self) -> str:
        """Back to the shipped predictor (the service); the learned state file goes too."""
        self.goal_arrived()
        with self._lock:
            learner = self.learner
        learner.reset(forget_counters=True)  # under the learner's step lock: a running step cannot undo it
        if self.path is not None:
            self.path.unlink(missing_ok=True)
        self._log.info("online learning: reset to the shipped predictor")
        return "the predictor is back to its shipped weights" + (f"; {self.path} removed" if self.path else "")

    def describe(self) -> str:
        """For /diagnostics."""
        learner = self.learner
        serving = "learned" if learner.serving_learned else "shipped"
        text = (f"on: {learner.examples_seen} examples, serving the {serving} weights, {learner.fallbacks} "
                "fallback(s) to the shipped predictor")
        last = self.last
        if last is not None and last.window_learned_regret is not None and last.window_shipped_regret is not None:
            text += (f", recent regret learned {last.window_learned_regret:.3f} vs shipped "
                     f"{last.window_shipped_regret:.3f}")
        return text

    def _step(self, cancel: threading.Event) -> None:
        if cancel.is_set():
            self.cancelled += 1
            return
        try:
            report = self._runtime.learn_from_last_turn(cancel)
        except Exception as exc:  # learning must never take the node down: log and go on serving
            self._log.warning(f"online learning step failed: {type(exc).__name__}: {exc}")
            return
        if report is None:
            return
        if report.cancelled:
            self.cancelled += 1
            return
        self.steps += 1
        self.last = report
        if report.fell_back:
            self._log.warning(report.describe())
        else:
            self._log.debug(report.describe())
        if self.path is not None and report.examples:
            try:
                save_state(self.path, self.learner)
            except OSError as exc:
                self._log.warning(f"online learning: could not save {self.path}: {exc}")

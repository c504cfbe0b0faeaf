"""The memspec lifecycle node: a thin ROS layer over :class:`DraftRuntime`.

A managed (lifecycle) node because loading a target model and a working set of drafts is
slow and memory-hungry: a robot's bringup configures it (load), activates it (serve) and
cleans it up (free) deliberately, and sees a failed configure as a transition result with
a reason instead of a crashed process.

Threads and callback groups (all on one MultiThreadedExecutor):

* ``_action_group`` (reentrant): goal, cancel and execute callbacks. A generation runs in
  its execute callback, one round at a time.
* ``_scheduler_group``: prediction and prefetch/eviction (``DraftRuntime.tick``). The
  decoding loop only *triggers a guard condition* every ``check_interval`` rounds; the
  tick runs here, in another thread, so it never runs inside the generation loop and a
  slow tick never delays a round.
* ``_publish_group``: residency, acceptance statistics and diagnostics publishers.
* The default group: lifecycle and parameter services, the context-hint subscription.
"""

from __future__ import annotations

import dataclasses
import gc
import threading
import time
from collections import deque
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from memspec_interfaces.action import Generate
from memspec_interfaces.msg import AcceptanceStats, DraftResidency
from rcl_interfaces.msg import SetParametersResult
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.parameter import Parameter
from std_msgs.msg import String

from memspec_ros.core.errors import InvalidRequestError
from memspec_ros.core.sampling import SamplingParams
from memspec_ros.ros.goal_validation import GoalLimits, goal_problem
from memspec_ros.ros.messages import acceptance_msg, diagnostics_msg, residency_msg
from memspec_ros.ros.parameters import (
    POLICIES,
    RUNTIME_CHANGEABLE,
    ConfigError,
    NodeConfig,
    declare_all,
    read_values,
    validate,
)
from memspec_ros.ros.qos import FEEDBACK_QOS, GOAL_SERVICE_QOS, REJECTIONS_QOS, RESIDENCY_QOS
from memspec_ros.ros.runtime_builder import build_policy, build_runtime
from memspec_ros.ros.sessions import SessionStore
from memspec_ros.runtime.runtime import Conversation, DraftRuntime, GenerationReport

NODE_NAME = "memspec"
DEACTIVATE_WAIT_S = 30.0


class MemSpecNode(LifecycleNode):
    """Lifecycle node serving speculative generation over a memory-budgeted draft pool."""

    def __init__(self, node_name: str = NODE_NAME, **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self._param_problems = declare_all(self)
        self.config: NodeConfig | None = None
        self.runtime: DraftRuntime | None = None
        self.unusable_drafts: dict[str, str] = {}
        self._active = False
        self._lock = threading.Lock()
        self._inflight = 0  # accepted goals not finished (running + queued)
        self._queue: deque[ServerGoalHandle] = deque()
        self._running: ServerGoalHandle | None = None
        self._idle = threading.Event()
        self._idle.set()
        self._stop_reason: str | None = None
        self._topic_hint: str | None = None
        self._pending_changes: dict[str, Any] = {}
        self._counters = {"goals": 0, "rejected": 0, "failed": 0}
        self._entities: list[Any] = []
        self.sessions = SessionStore(16)
        self._action_group = ReentrantCallbackGroup()
        self._scheduler_group = MutuallyExclusiveCallbackGroup()
        self._publish_group = MutuallyExclusiveCallbackGroup()
        self.add_on_set_parameters_callback(self._on_set_parameters)
        if self.get_parameter("autostart").value:
            # Transitions must run once the executor spins, not inside the constructor.
            self._autostart_timer = self.create_timer(0.0, self._autostart)

    # ------------------------------------------------------------------ lifecycle
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Validate parameters, load the models and the initial working set.

        On any failure: log what to fix, free what was built, return FAILURE (the node stays
        in 'unconfigured' and can be configured again).
        """
        t0 = time.monotonic()
        try:
            config = validate(read_values(self), self._param_problems)
            built = build_runtime(config)
        except ConfigError as exc:
            self.get_logger().error(f"configure failed: {exc}")
            return TransitionCallbackReturn.FAILURE
        except Exception as exc:
            self.get_logger().error(f"configure failed while loading models: {type(exc).__name__}: {exc}")
            gc.collect()
            return TransitionCallbackReturn.FAILURE
        self.config, self.runtime, self.unusable_drafts = config, built.runtime, built.unusable
        self.sessions = SessionStore(config["max_sessions"])
        try:
            self._create_ros_entities(config)
            self.runtime.add_residency_listener(lambda _event: self._residency_gc.trigger())
            self.runtime.on_check_due = self._check_gc.trigger
            resident = self.runtime.warm_up(timeout=config["load_timeout_s"])
            self._publish_residency()
        except Exception as exc:
            self.get_logger().error(f"configure failed while starting the runtime: {type(exc).__name__}: {exc}")
            self._release()
            return TransitionCallbackReturn.FAILURE
        if not self.runtime.catalogue.names:
            self.get_logger().warning("no usable draft: serving target-only")
        elif not resident:
            self.get_logger().warning("no draft fits the memory budget: serving target-only")
        self.get_logger().info(
            f"configured in {time.monotonic() - t0:.1f} s: model_root={config.model_root}, "
            f"target={config.target_path.name}, "
            f"drafts={self.runtime.catalogue.names}, resident={resident}, policy={config['policy']}, "
            f"budget={self.runtime.budget.describe()}, check_interval={config['check_interval']}, "
            f"k={config['num_speculative_tokens']}, storage={config['storage_bandwidth_mbps'] or 'native'} MB/s"
        )
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_reason = None
        self._active = True
        result = super().on_activate(state)  # activates the lifecycle publishers
        self._publish_residency()  # late joiners get the serving state at once (transient-local)
        self.get_logger().info(f"activated: accepting goals on {self._action_name}")
        return result

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = False
        self._end_generations("aborted: the node was deactivated during generation")
        self.get_logger().info("deactivated: no longer accepting goals")
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._release()
        self.get_logger().info("cleaned up: models released")
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = False
        self._end_generations("aborted: the node is shutting down")
        self._release()
        self.get_logger().info(f"shut down from state '{state.label}'")
        return TransitionCallbackReturn.SUCCESS

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = False
        self._end_generations("aborted: the node hit an error")
        self._release()
        return TransitionCallbackReturn.SUCCESS

    # ------------------------------------------------------------------ ROS entities
    def _create_ros_entities(self, config: NodeConfig) -> None:
        """Publishers, action server, subscription, timers and guard conditions of a configured node."""
        self._action_name = self.resolve_topic_name("~/generate")
        # Lifecycle publishers: they publish only while the node is active (the lifecycle
        # base class activates them). /diagnostics stays a plain publisher: an operator needs
        # to see an inactive node's state too.
        self._residency_pub = self.create_lifecycle_publisher(DraftResidency, "~/draft_residency", RESIDENCY_QOS)
        self._stats_pub = self.create_lifecycle_publisher(AcceptanceStats, "~/acceptance_stats", 10)
        self._reject_pub = self.create_lifecycle_publisher(String, "~/goal_rejections", REJECTIONS_QOS)
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self._hint_sub = self.create_subscription(String, "~/context_hint", self._on_context_hint, 10)
        self._residency_gc = self.create_guard_condition(self._publish_residency, self._publish_group)
        self._check_gc = self.create_guard_condition(self._on_check_due, self._scheduler_group)
        self._timers = [
            self.create_timer(config["residency_period_s"], self._publish_residency, self._publish_group),
            self.create_timer(config["stats_period_s"], self._publish_stats, self._publish_group),
            self.create_timer(1.0, self._publish_diagnostics, self._publish_group),
        ]
        self._action_server = ActionServer(
            self,
            Generate,
            "~/generate",
            execute_callback=self._execute,
            goal_callback=self._on_goal,
            cancel_callback=lambda _goal: CancelResponse.ACCEPT,
            handle_accepted_callback=self._on_accepted,
            callback_group=self._action_group,
            feedback_pub_qos_profile=FEEDBACK_QOS,
            goal_service_qos_profile=GOAL_SERVICE_QOS,
            result_timeout=60,
        )

    def _destroy_ros_entities(self) -> None:
        if getattr(self, "_action_server", None) is None:
            return
        self._action_server.destroy()
        self._action_server = None
        for timer in self._timers:
            self.destroy_timer(timer)
        self._timers = []
        self.destroy_guard_condition(self._residency_gc)
        self.destroy_guard_condition(self._check_gc)
        self.destroy_subscription(self._hint_sub)
        for pub in (self._residency_pub, self._stats_pub, self._reject_pub):
            self.destroy_lifecycle_publisher(pub)
        self.destroy_publisher(self._diag_pub)

    def _release(self) -> None:
        """Free models and threads; safe to call in any state, more than once."""
        self._destroy_ros_entities()
        if self.runtime is not None:
            self.runtime.on_check_due = None
            self.runtime.close()
        self.runtime = None
        self.config = None
        self.unusable_drafts = {}
        self.sessions.clear()
        gc.collect()

    # ------------------------------------------------------------------ goals
    def _reject(self, reason: str) -> GoalResponse:
        self._counters["rejected"] += 1
        self.get_logger().warning(f"goal rejected: {reason}")
        self._reject_pub.publish(String(data=reason))
        return GoalResponse.REJECT

    def _on_goal(self, goal: Generate.Goal) -> GoalResponse:
        """Validate a goal before accepting it; every rejection carries a reason."""
        if not self._active or self.runtime is None or self.config is None:
            return self._reject("the node is not active: activate it (lifecycle) before sending goals")
        limits = GoalLimits(
            max_new_tokens=self.config["max_new_tokens_limit"],
            max_prompt_chars=self.config["max_prompt_chars"],
            domains=set(self.runtime.catalogue.domains) | set(self.runtime.catalogue.names),
        )
        problem = goal_problem(goal.prompt, goal.max_new_tokens, goal.temperature, goal.top_p,
                               goal.domain_hint, goal.session_id, limits)
        if problem:
            return self._reject(problem)
        engine = self.runtime.engine
        try:
            # A session that would overflow is compacted at execution (oldest turns dropped),
            # so only the new turn itself has to fit the context window.
            engine.check_budget(0, len(engine.encode(goal.prompt)), goal.max_new_tokens)
        except InvalidRequestError as exc:
            return self._reject(str(exc))
        with self._lock:
            if self._inflight and self.config["busy_policy"] == "reject":
                return self._reject("busy: another generation is running (busy_policy=reject); retry when it ends")
            if self._inflight > self.config["max_queue"]:
                return self._reject(f"busy: {self._inflight - 1} goals already queued (max_queue)")
            self._inflight += 1
            self._idle.clear()
        return GoalResponse.ACCEPT

    def _on_accepted(self, goal_handle: ServerGoalHandle) -> None:
        """Run the goal now, or queue it behind the running one (busy_policy=queue)."""
        with self._lock:
            if self._running is None:
                self._running = goal_handle
                start = True
            else:
                self._queue.append(goal_handle)
                start = False
        if start:
            goal_handle.execute()

    def _finish_goal(self) -> None:
        """Bookkeeping after a goal ends; start the next queued goal, if any."""
        with self._lock:
            self._inflight -= 1
            self._running = self._queue.popleft() if self._queue else None
            nxt = self._running
            if self._inflight == 0:
                self._idle.set()
        if nxt is not None:
            nxt.execute()

    def _end_generations(self, reason: str) -> None:
        """Make a running generation stop after its current round and wait for it."""
        self._stop_reason = reason
        if not self._idle.wait(DEACTIVATE_WAIT_S):
            self.get_logger().error(f"a generation did not stop within {DEACTIVATE_WAIT_S:.0f} s")

    def _execute(self, goal_handle: ServerGoalHandle) -> Generate.Result:
        """Generate for one goal: stream feedback, honour cancel, report statistics."""
        try:
            return self._generate(goal_handle)
        except Exception as exc:
            self._counters["failed"] += 1
            self.get_logger().error(f"generation failed: {type(exc).__name__}: {exc}")
            goal_handle.abort()
            return Generate.Result(message=f"failed: {type(exc).__name__}: {exc}")
        finally:
            self._finish_goal()

    def _generate(self, goal_handle: ServerGoalHandle) -> Generate.Result:
        goal: Generate.Goal = goal_handle.request
        runtime = self.runtime
        if self._stop_reason or runtime is None or self.config is None:
            goal_handle.abort()
            return Generate.Result(message=self._stop_reason or "aborted: the node is not configured")
        if goal_handle.is_cancel_requested:
            goal_handle.canceled()
            return Generate.Result(message="cancelled before it started")
        self._apply_pending_changes()
        self._counters["goals"] += 1
        runtime.set_hint(goal.domain_hint or self._topic_hint)
        params = SamplingParams(temperature=float(goal.temperature), top_p=float(goal.top_p), seed=int(goal.seed))
        conversation = self.sessions.open(goal.session_id, runtime)
        prompt = self._fit_session(goal, conversation)
        every = self.config["feedback_every_rounds"]
        progress = {"rounds": 0, "proposed": 0, "accepted": 0}

        def on_round(stats, session) -> None:
            progress["rounds"] += 1
            progress["proposed"] += stats.proposed
            progress["accepted"] += stats.accepted
            if progress["rounds"] % every == 0 or session.done:
                self._send_feedback(goal_handle, session.new_text(), len(session.output_ids),
                                    stats.draft_name, progress)

        def should_stop() -> bool:
            return goal_handle.is_cancel_requested or self._stop_reason is not None

        try:
            report = runtime.generate(prompt, int(goal.max_new_tokens), params,
                                      conversation=conversation, on_round=on_round, should_stop=should_stop)
        finally:
            runtime.set_hint(self._topic_hint)
        if conversation.session is not None:
            tail = conversation.session.new_text()
            if tail:
                self._send_feedback(goal_handle, tail, report.tokens, None, progress)
        result = self._result(report)
        if report.finish_reason == "cancelled":
            if goal_handle.is_cancel_requested:
                result.message = f"cancelled by the client after {report.tokens} tokens"
                goal_handle.canceled()
            else:
                result.message = f"{self._stop_reason} (after {report.tokens} tokens)"
                goal_handle.abort()
            return result
        result.message = f"ok ({report.finish_reason})"
        goal_handle.succeed()
        return result

    def _fit_session(self, goal: Generate.Goal, conversation: Conversation) -> str | list[int]:
        """The prompt to run; compacts a session whose context would overflow.

        A long robot dialogue outgrows the context window; instead of refusing the next
        turn, the session restarts from its most recent tokens (at most half the window)
        followed by the new turn, the usual sliding-window behaviour of chat front ends.
        """
        session = conversation.session
        engine = self.runtime.engine
        new_ids = engine.encode(goal.prompt, add_special_tokens=False)
        needed = len(new_ids) + int(goal.max_new_tokens)
        if session is None or len(session.token_ids) + needed <= engine.max_context:
            return goal.prompt
        bos = [] if engine.tokenizer.bos_token_id is None else [int(engine.tokenizer.bos_token_id)]
        keep = max(0, min(engine.max_context // 2, engine.max_context - needed - len(bos)))
        conversation.session = None
        conversation.turns = 0
        self.get_logger().info(
            f"session '{goal.session_id}' reached the context window: continuing from its last {keep} tokens"
        )
        if not keep:
            return goal.prompt
        return [*bos, *session.token_ids[-keep:], *new_ids]

    def _send_feedback(self, goal_handle: ServerGoalHandle, delta: str, tokens: int, draft: str | None,
                       progress: dict[str, int]) -> None:
        if not delta:
            return
        fb = Generate.Feedback(
            delta=delta,
            tokens_so_far=tokens,
            active_draft=draft or "",
            acceptance_rate=progress["accepted"] / progress["proposed"] if progress["proposed"] else 0.0,
        )
        goal_handle.publish_feedback(fb)

    @staticmethod
    def _result(report: GenerationReport) -> Generate.Result:
        return Generate.Result(
            text=report.text,
            num_tokens=report.tokens,
            tokens_per_second=float(report.tokens_per_s),
            acceptance_rate=float(report.acceptance_rate),
            mean_accepted_length=float(report.mean_accepted_length),
            draft_switches=report.switches,
            stall_seconds=float(report.stall_s),
            drafts_used=list(report.drafts_used),
        )

    # ------------------------------------------------------------------ scheduling
    def _on_check_due(self) -> None:
        """Prediction + prefetch/eviction, in the scheduler's own callback group."""
        runtime = self.runtime
        if runtime is None:
            return
        try:
            runtime.tick()
        except Exception as exc:
            self.get_logger().error(f"scheduling tick failed: {type(exc).__name__}: {exc}")

    def _on_context_hint(self, msg: String) -> None:
        """A planner's hint about the coming domain: bias the predictor and re-plan now."""
        runtime = self.runtime
        if runtime is None:
            return
        domain = msg.data.strip() or None
        try:
            runtime.set_hint(domain)
        except ValueError as exc:
            self.get_logger().warning(f"context_hint ignored: {exc}")
            return
        self._topic_hint = domain
        self.get_logger().info(f"context hint: {domain or '(cleared)'}")
        self._check_gc.trigger()

    # ------------------------------------------------------------------ publishing
    def _publish_residency(self) -> None:
        runtime = self.runtime
        if runtime is None or getattr(self, "_residency_pub", None) is None:
            return
        self._residency_pub.publish(residency_msg(runtime.pool.snapshot(), self.get_clock().now().to_msg()))

    def _publish_stats(self) -> None:
        runtime = self.runtime
        if runtime is None or self._idle.is_set():
            return
        self._stats_pub.publish(acceptance_msg(self.get_clock().now().to_msg(), runtime.window_stats()))

    def _publish_diagnostics(self) -> None:
        runtime, config = self.runtime, self.config
        if runtime is None or config is None:
            return
        st = runtime.statistics()
        snap = runtime.pool.snapshot()
        level, summary = DiagnosticStatus.OK, "serving" if self._active else "inactive"
        if not runtime.catalogue.names:
            level, summary = DiagnosticStatus.WARN, "no usable draft: serving target-only"
        elif not any(runtime.pool.fits_alone(n) for n in runtime.catalogue.names):
            level, summary = DiagnosticStatus.WARN, "memory budget is below every draft: serving target-only"
        elif st.load_failures:
            level, summary = DiagnosticStatus.WARN, f"{st.load_failures} draft load(s) failed"
        ratio = st.load_round_ratio
        values = {
            "policy": config["policy"],
            "budget_bytes": snap.budget_bytes,
            "used_bytes": snap.used_bytes,
            "resident_drafts": ",".join(snap.resident),
            "unusable_drafts": ",".join(self.unusable_drafts),
            "loads": st.loads,
            "load_failures": st.load_failures,
            "stall_seconds": f"{st.stall_s:.3f}",
            "draft_switches": st.switches,
            "generations": st.generations,
            "tokens": st.tokens,
            "goals_rejected": self._counters["rejected"],
            "load_to_round_ratio": f"{ratio:.2f}" if ratio is not None else "n/a",
            "predictor_fraction_of_decode": f"{st.predictor_fraction:.4f}",
        }
        self._diag_pub.publish(diagnostics_msg(self.get_clock().now().to_msg(), self.get_name(), level, summary,
                                               values))

    # ------------------------------------------------------------------ parameters
    def _on_set_parameters(self, params: list[Parameter]) -> SetParametersResult:
        """Refuse changes that would silently not apply to what configure already built."""
        if self.config is None:
            return SetParametersResult(successful=True)
        fixed = [p.name for p in params if p.name not in RUNTIME_CHANGEABLE]
        if fixed:
            return SetParametersResult(
                successful=False,
                reason=(
                    f"{', '.join(fixed)} cannot change while configured (only "
                    f"{', '.join(sorted(RUNTIME_CHANGEABLE))} can): deactivate, clean up, set, configure again"
                ),
            )
        for p in params:
            if p.name == "policy" and p.value not in POLICIES:
                return SetParametersResult(successful=False, reason=f"policy must be one of {', '.join(POLICIES)}")
        with self._lock:
            self._pending_changes.update({p.name: p.value for p in params})
        if self._idle.is_set():
            self._apply_pending_changes()
        return SetParametersResult(successful=True)

    def _apply_pending_changes(self) -> None:
        """Apply run-time parameter changes between generations (never mid-generation)."""
        with self._lock:
            changes, self._pending_changes = self._pending_changes, {}
        runtime, config = self.runtime, self.config
        if not changes or runtime is None or config is None:
            return
        values = {**config.values, **changes}
        self.config = dataclasses.replace(config, values=values)
        runtime.reconfigure(k=values["num_speculative_tokens"], check_interval=values["check_interval"])
        if "policy" in changes and changes["policy"] != config["policy"]:
            runtime.set_policy(build_policy(self.config, runtime.catalogue.names))
        self.get_logger().info(f"run-time parameters applied: {changes}")

    def _autostart(self) -> None:
        self._autostart_timer.cancel()
        self.destroy_timer(self._autostart_timer)
        if self.trigger_configure() != TransitionCallbackReturn.SUCCESS:
            self.get_logger().error("autostart: configure failed; the node stays unconfigured")
            return
        self.trigger_activate()


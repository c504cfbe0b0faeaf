"""The memspec lifecycle node: a thin ROS layer over :class:`DraftRuntime`.

A managed (lifecycle) node because loading a target model and a working set of drafts is
slow and memory-hungry: a robot's bringup configures it (load), activates it (serve) and
cleans it up (free) deliberately, and sees a failed configure as a transition result with
a reason instead of a crashed process.

The node translates between ROS and :class:`DraftRuntime` and does nothing else: admission
(tokenising a prompt once or rendering chat messages, checking the context window), sliding a
long dialogue, reusing a chat session's cache, stop strings, hint scoping, text deltas, the
drawn seed and why a turn ended (:class:`FinishReason`, the result's ``finish_reason``) all
come from the runtime.

Threads and callback groups (all on one MultiThreadedExecutor):

* ``_action_group`` (reentrant): goal, cancel and execute callbacks. An execute callback
  hands its generation to the node's torch thread (:class:`TorchThread`, which also loads the
  models at configure) and waits for it; the generation runs one round at a time and checks
  for a cancel between rounds.
* ``_prediction_group``: prediction (``DraftRuntime.plan``: the forecast and the wanted working
  set). The decoding loop only *triggers a guard condition* every ``check_interval`` rounds
  (a context hint triggers it too); the forecast runs here, in another thread, so a slow one
  never delays a round.
* ``_prefetch_group``: prefetch (``DraftRuntime.apply``: loads, evictions, cancellations). Runs
  after every new plan, and whenever a load finishes or fails or an eviction frees memory, so a
  finished load starts the next one without waiting for the next forecast.
* ``_publish_group``: residency, acceptance statistics and diagnostics publishers.
* The default group: lifecycle and parameter services, the context-hint subscription.

/diagnostics reports the prediction and prefetch callbacks' time per call and calls per second.

Every callback handed to rclpy is wrapped by :func:`survive`: an exception in one is logged
and answered with a safe fallback instead of escaping ``spin()`` and ending the process.
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
from memspec_interfaces.msg import AcceptanceStats, DraftResidency, SessionInfo
from memspec_interfaces.srv import CloseSession, ListSessions, ResetLearning, ResetSession
from rcl_interfaces.msg import SetParametersResult
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.parameter import Parameter
from rclpy.time import Time
from std_msgs.msg import String

from memspec_ros.core.finish_reason import FinishReason
from memspec_ros.ros.callback_guard import survive
from memspec_ros.ros.callback_meter import CallbackMeter
from memspec_ros.ros.dialogue_store import DialogueStore
from memspec_ros.ros.echo import echo
from memspec_ros.ros.goal_validation import GoalLimits, goal_problem, max_new_tokens, sampling_params, turn_input
from memspec_ros.ros.idle_learning import IdleLearning
from memspec_ros.ros.messages import acceptance_msg, diagnostics_msg, residency_msg
from memspec_ros.ros.parameters import (
    POLICIES,
    ConfigError,
    NodeConfig,
    declare_all,
    read_values,
    validate,
)
from memspec_ros.ros.qos import FEEDBACK_QOS, GOAL_SERVICE_QOS, REJECTIONS_QOS, RESIDENCY_QOS
from memspec_ros.ros.runtime_builder import build_policy, build_runtime
from memspec_ros.ros.session_files import (
    SessionDirLock,
    SessionFileStore,
    model_fingerprint,
    node_session_dir,
    prepare_session_dir,
    session_dir_path,
)
from memspec_ros.ros.torch_thread import TorchThread
from memspec_ros.runtime.catalogue_file import sizing_threads
from memspec_ros.runtime.policies import Policy
from memspec_ros.runtime.residency import DraftState, ResidencyEvent
from memspec_ros.runtime.runtime import DraftRuntime, GenerationReport
from memspec_ros.runtime.throughput_guard import GuardMode
from memspec_ros.runtime.turn_progress import TurnProgress
from memspec_ros.runtime.turns import TurnRequest

NODE_NAME = "memspec"
RESULT_DELIVERY_WAIT_S = 5.0
"""After the last generation ends, how long teardown waits for its result to be handed to
rclpy before the action server is destroyed (a result set after that would be lost)."""


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
        self._admitted: dict[int, TurnRequest] = {}
        """Admitted turns by ``id()`` of their goal message, from the goal check to execution
        (messages are unhashable; the goal handle keeps the message alive meanwhile)."""
        self._pending_changes: dict[str, Any] = {}
        self._pending_policy: Policy | None = None
        self._turn_lock = threading.Lock()
        """Held by a generation from applying pending changes to the end of its turn, so a
        run-time parameter change is applied either before a turn or after it, never inside."""
        self._counters = {"goals": 0, "rejected": 0, "failed": 0}
        self._dtype_name = ""
        self._session_lock: SessionDirLock | None = None
        self._learning: IdleLearning | None = None
        self._entities: list[Any] = []
        self.dialogues = DialogueStore(16)
        self._torch = TorchThread()
        """Model loading, thread tuning and every generation run here, not on the executor's threads
        (torch_thread.py says why)."""
        self._action_group = ReentrantCallbackGroup()
        self._prediction_group = MutuallyExclusiveCallbackGroup()
        self._prefetch_group = MutuallyExclusiveCallbackGroup()
        self._publish_group = MutuallyExclusiveCallbackGroup()
        self._meters = {"prediction": CallbackMeter(), "prefetch": CallbackMeter()}
        self.add_on_set_parameters_callback(self._guard(
            self._on_set_parameters, "parameter change",
            lambda exc: SetParametersResult(successful=False, reason=f"refused: {type(exc).__name__}: {exc}")))
        if self.get_parameter("autostart").value:
            # Transitions must run once the executor spins, not inside the constructor.
            self._autostart_timer = self.create_timer(0.0, self._guard(self._autostart, "autostart"))

    def _guard(self, callback: Any, what: str, fallback: Any = None) -> Any:
        """``callback`` made unable to end the process (see :mod:`callback_guard`)."""
        return survive(callback, self.get_logger(), what, fallback)

    # ------------------------------------------------------------------ lifecycle
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Validate parameters, load the models and the initial working set.

        On any failure: log what to fix, free what was built, return FAILURE (the node stays
        in 'unconfigured' and can be configured again).
        """
        t0 = time.monotonic()
        try:
            config = validate(read_values(self), self._param_problems)
            built = self._torch.run(build_runtime, config)
        except ConfigError as exc:
            self.get_logger().error(f"configure failed: {exc}")
            return TransitionCallbackReturn.FAILURE
        except Exception as exc:
            self.get_logger().error(f"configure failed while loading models: {type(exc).__name__}: {exc}")
            gc.collect()
            return TransitionCallbackReturn.FAILURE
        # 0 (auto) resolved: run-time changes of one knob keep the other's configured value
        config = dataclasses.replace(config, values={**config.values, "num_speculative_tokens": built.speculation.k,
                                                     "check_interval": built.speculation.check_interval})
        self.config, self.runtime, self.unusable_drafts = config, built.runtime, built.unusable
        self._dtype_name = str(built.dtype).removeprefix("torch.")
        try:
            self.dialogues = self._open_dialogues(config)
        except (OSError, ValueError) as exc:
            self.get_logger().error(f"configure failed: parameter 'session_dir' = '{config['session_dir']}': {exc} "
                                    "(choose a writable folder, or \"\" to keep sessions in memory only)")
            self._release()
            return TransitionCallbackReturn.FAILURE
        try:
            self._start_learning(config)
            self._create_ros_entities(config)
            self.runtime.add_residency_listener(self._on_residency_change)
            self.runtime.on_check_due = self._prediction_gc.trigger
            resident = self.runtime.warm_up(timeout=config["load_timeout_s"])
            self._publish_residency()
        except Exception as exc:
            self.get_logger().error(f"configure failed while starting the runtime: {type(exc).__name__}: {exc}")
            self._release()
            return TransitionCallbackReturn.FAILURE
        sized_at = sizing_threads(config.catalogue.root)
        running = built.threads.threads if built.threads else config["num_threads"]
        if sized_at and running and sized_at != running:
            self.get_logger().warning(
                f"the catalogue's drafts were sized at {sized_at} torch thread(s) (its reports/sizing.json) and this "
                f"node decodes at {running}: draft and verification costs scale differently with threads, so the "
                f"drafts may be larger or smaller than this machine affords; set num_threads: {sized_at}, or "
                f"rebuild with memspec_build drafts --threads {running}")
        validation = config.catalogue.predictor_validation
        if validation is not None and validation.loses_to_fixed and built.runtime.policy.needs_predictor:
            self.get_logger().warning(
                f"the catalogue's predictor forecast worse than always running {validation.best_fixed_draft} on "
                f"its validation dialogues ({validation.describe()}): policy {config['policy']} leans on the "
                "acceptance it observes; retrain it (memspec_build predictor, more --time-budget-s) or serve "
                f"policy static with static_draft {validation.best_fixed_draft}")
        fallback = self._draftless_service()
        if not self.runtime.catalogue.names:
            self.get_logger().warning(f"no usable draft: serving {fallback}")
        elif not resident:
            self.get_logger().warning(f"no draft fits the memory budget: serving {fallback}")
        self.get_logger().info(
            f"configured in {time.monotonic() - t0:.1f} s: catalogue={config.catalogue.source}, "
            f"target={config.catalogue.target.name}, "
            f"drafts={self.runtime.catalogue.names}, resident={resident}, policy={config['policy']}, "
            f"ngram={'on' if config['ngram'] else 'off'}, "
            f"budget={self.runtime.budget.describe()}, {built.speculation.describe()}, "
            f"storage={config['storage_bandwidth_mbps'] or 'native'} MB/s, "
            f"sessions={self._describe_sessions()}, {built.describe_dtype()} (greedy output is this dtype's "
            "target's own), "
            + (f"num_threads auto: {built.threads.describe()}" if built.threads
               else f"num_threads={config['num_threads']}")
        )
        return TransitionCallbackReturn.SUCCESS

    def _open_dialogues(self, config: NodeConfig) -> DialogueStore:
        """The session store of this configuration; with ``session_dir``, the sessions written by
        an earlier run of the node are loaded (their KV caches are rebuilt on first use).

        A file that cannot be used is logged by name and skipped, never a configure failure: one
        bad file must not take the robot's dialogue service down. Raises OSError only when the
        folder itself cannot be created or written. The folder is ``session_dir`` / the node's
        fully qualified name, so two nodes (two robots' namespaces) never share files.
        """
        log = self.get_logger()
        base = session_dir_path(config["session_dir"])
        files = None
        if base is not None:
            directory = node_session_dir(base, self.get_fully_qualified_name(), self.context.get_domain_id())
            prepare_session_dir(directory)
            self._session_lock = SessionDirLock(directory)
            files = SessionFileStore(directory, model_fingerprint(config.catalogue.target),
                                     vocab_size=self.runtime.engine.vocab_size if self.runtime.engine else None)
        store = DialogueStore(
            config["max_sessions"], budget_bytes=config["session_budget_bytes"],
            idle_timeout_s=config["session_idle_timeout_s"],
            on_drop=lambda sid, why: log.info(f"session {echo(sid)} dropped: {why}"),
            files=files,
            on_file_error=lambda what, exc: log.warning(f"{what} failed: {type(exc).__name__}: {exc}"))
        if files is not None:
            saved, skipped = files.load_all()
            for bad in skipped:
                log.warning(f"session file {bad.path} skipped: {bad.reason}")
            store.restore(saved)
        return store

    def _start_learning(self, config: NodeConfig) -> None:
        """Online learning of the predictor (parameter online_learning), its state beside the session files."""
        self._learning = None
        if not config["online_learning"] or getattr(self.runtime.policy, "predictor", None) is None:
            return
        files = self.dialogues.files
        self._learning = IdleLearning(self.runtime, self._torch, self.get_logger(),
                                      files.directory if files is not None else None)

    def _refresh_learning(self, policy_name: str) -> None:
        """After a run-time policy change: keep learning into the new predictor, start learning for a
        predictor policy that follows one without, or stop for a policy without a predictor."""
        if self.runtime.learner is not None and self._learning is not None:
            self._learning.policy_changed()
        elif self.runtime.learner is None and self._learning is not None:
            self._learning.goal_arrived()
            self._learning = None
            self.get_logger().info(f"online learning off: policy {policy_name} has no predictor")
        elif self._learning is None and self.config is not None:
            self._start_learning(self.config)

    def _describe_sessions(self) -> str:
        files = self.dialogues.files
        if files is None:
            return "in memory only"
        return f"{len(self.dialogues)} restored from {files.directory}"

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_reason = None
        self._active = True
        result = super().on_activate(state)  # activates the lifecycle publishers
        self._publish_residency()  # late joiners get the serving state at once (transient-local)
        self.get_logger().info(f"activated: accepting goals on {self._action_name}")
        return result

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Stop serving. A generation that outlives ``deactivate_timeout_s`` has its goal aborted
        (the client is told now); its thread leaves the runtime at the end of its round and
        cleanup refuses to free the models until it has."""
        self._active = False
        self._end_generations("aborted: the node was deactivated during generation")
        self.get_logger().info("deactivated: no longer accepting goals")
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        if not self._end_generations("aborted: the node is cleaning up"):
            self.get_logger().error(
                "cleanup refused: a generation is still inside its round and uses the models; retry cleanup")
            return TransitionCallbackReturn.FAILURE
        self._release()
        self.get_logger().info("cleaned up: models released")
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Also what SIGINT/SIGTERM run (node_main): every goal ends with a result first."""
        self._active = False
        if self._end_generations("aborted: the node is shutting down"):
            self._release()
        else:
            self.get_logger().error("shutdown: a generation did not stop; leaving its models to process exit")
        self.get_logger().info(f"shut down from state '{state.label}'")
        return TransitionCallbackReturn.SUCCESS

    @property
    def generation_running(self) -> bool:
        """Whether a goal is still generating (one that did not stop when asked to)."""
        return not self._idle.is_set()

    def destroy_node(self) -> None:
        """Also ends the torch thread (after whatever it is running, waiting a few seconds)."""
        if not self._torch.close():
            self.get_logger().warning("the torch thread is still running a job: it ends with the process")
        super().destroy_node()

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = False
        if self._end_generations("aborted: the node hit an error"):
            self._release()
        return TransitionCallbackReturn.SUCCESS

    # ------------------------------------------------------------------ ROS entities
    def _create_ros_entities(self, config: NodeConfig) -> None:
        """Publishers, action server, subscription, timers and guard conditions of a configured node."""
        self._action_name = self.resolve_topic_name("~/generate")
        self._meters = {"prediction": CallbackMeter(), "prefetch": CallbackMeter()}  # per configuration
        # Lifecycle publishers: the serving state (residency, acceptance) is published only
        # while the node is active (the lifecycle base class activates them). /diagnostics and
        # goal_rejections stay plain publishers: they are for operators and clients, who need
        # an inactive node's state and the reason it refused their goal ("not active") too.
        self._residency_pub = self.create_lifecycle_publisher(DraftResidency, "~/draft_residency", RESIDENCY_QOS)
        self._stats_pub = self.create_lifecycle_publisher(AcceptanceStats, "~/acceptance_stats", 10)
        self._reject_pub = self.create_publisher(String, "~/goal_rejections", REJECTIONS_QOS)
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        g = self._guard
        self._hint_sub = self.create_subscription(String, "~/context_hint", g(self._on_context_hint, "context hint"),
                                                  10)
        self._residency_gc = self.create_guard_condition(g(self._publish_residency, "residency publish"),
                                                         self._publish_group)
        self._prediction_gc = self.create_guard_condition(
            g(self._meters["prediction"].timed(self._on_prediction_due), "prediction"), self._prediction_group)
        self._prefetch_gc = self.create_guard_condition(
            g(self._meters["prefetch"].timed(self._on_prefetch_due), "prefetch"), self._prefetch_group)
        self._timers = [
            self.create_timer(config["residency_period_s"], g(self._publish_residency, "residency publish"),
                              self._publish_group),
            self.create_timer(config["stats_period_s"], g(self._publish_stats, "stats publish"), self._publish_group),
            self.create_timer(config["diagnostics_period_s"], g(self._publish_diagnostics, "diagnostics publish"),
                              self._publish_group),
        ]
        self._action_server = ActionServer(
            self,
            Generate,
            "~/generate",
            execute_callback=g(self._execute, "generation", lambda exc: Generate.Result(
                finish_reason=FinishReason.ERROR.value, message=f"failed: {type(exc).__name__}: {exc}")),
            goal_callback=g(self._on_goal, "goal check", lambda _exc: GoalResponse.REJECT),
            cancel_callback=g(lambda _goal: CancelResponse.ACCEPT, "cancel", lambda _exc: CancelResponse.ACCEPT),
            handle_accepted_callback=g(self._on_accepted, "goal start"),
            callback_group=self._action_group,
            feedback_pub_qos_profile=FEEDBACK_QOS,
            goal_service_qos_profile=GOAL_SERVICE_QOS,
            result_timeout=60,
        )
        self._session_services = [
            self.create_service(ResetSession, "~/reset_session", g(self._on_reset_session, "reset_session",
                                lambda exc: ResetSession.Response(success=False, message=f"failed: {exc}"))),
            self.create_service(CloseSession, "~/close_session", g(self._on_close_session, "close_session",
                                lambda exc: CloseSession.Response(success=False, message=f"failed: {exc}"))),
            self.create_service(ListSessions, "~/list_sessions", g(self._on_list_sessions, "list_sessions",
                                lambda exc: ListSessions.Response())),
            self.create_service(ResetLearning, "~/reset_learning", g(self._on_reset_learning, "reset_learning",
                                lambda exc: ResetLearning.Response(success=False, message=f"failed: {exc}"))),
        ]

    def _destroy_ros_entities(self) -> None:
        if getattr(self, "_action_server", None) is None:
            return
        self._wait_results_delivered()
        self._action_server.destroy()
        self._action_server = None
        for service in self._session_services:
            self.destroy_service(service)
        self._session_services = []
        for timer in self._timers:
            self.destroy_timer(timer)
        self._timers = []
        self.destroy_guard_condition(self._residency_gc)
        self.destroy_guard_condition(self._prediction_gc)
        self.destroy_guard_condition(self._prefetch_gc)
        self.destroy_subscription(self._hint_sub)
        for pub in (self._residency_pub, self._stats_pub):
            self.destroy_lifecycle_publisher(pub)
        for pub in (self._reject_pub, self._diag_pub):
            self.destroy_publisher(pub)

    def _wait_results_delivered(self) -> None:
        """Let rclpy send the result of goals that just ended before the action server goes.

        A goal's result is handed to rclpy only after its execute callback has returned, a
        moment after the node saw the goal finish; setting it schedules the reply to the
        client as a task on the executor. Destroying the server (or ending the process)
        before that task ran lost an answer the client was waiting for (seen under load, in
        the Ctrl-C test). So: wait until every result is set, then until a task created now
        has run: the executor starts tasks in the order they were created, and a reply is
        one non-blocking send. rclpy offers no public signal for either step; the result
        futures are read from the server's private ``_result_futures``.
        """
        futures = getattr(self._action_server, "_result_futures", {})
        deadline = time.monotonic() + RESULT_DELIVERY_WAIT_S
        while any(not f.done() for f in list(futures.values())) and time.monotonic() < deadline:
            time.sleep(0.01)  # polled: nothing to wait on
        executor = self.executor
        if executor is None:
            return
        # Two barriers in a row: a future reads as done a moment before its reply task is
        # created, so the second barrier is surely created after every reply task.
        for _ in range(2):
            barrier = executor.create_task(lambda: None)
            while not barrier.done() and time.monotonic() < deadline:
                time.sleep(0.01)  # polled: the barrier runs on an executor thread

    def _release(self) -> None:
        """Free models and threads; safe to call in any state, more than once."""
        # Detached first: closing evicts drafts and cancels loads, and the residency events
        # that follow must not start a prefetch on the closing runtime.
        runtime, self.runtime = self.runtime, None
        if self._learning is not None:
            self._learning.goal_arrived()  # a queued step must not outlive the runtime's models
            self._learning = None
        if runtime is not None:
            runtime.on_check_due = None
            runtime.close()
        self._destroy_ros_entities()
        self.config = None
        with self._lock:
            self._pending_changes, self._pending_policy = {}, None
        self.unusable_drafts = {}
        self.dialogues.clear()
        if self._session_lock is not None:
            self._session_lock.release()
            self._session_lock = None
        with self._lock:
            self._admitted.clear()
        gc.collect()

    # ------------------------------------------------------------------ goals
    def _reject(self, reason: str) -> GoalResponse:
        """Refuse a goal, saying why (reasons only echo request text through :func:`echo`)."""
        self._counters["rejected"] += 1
        self.get_logger().warning(f"goal rejected: {reason}", throttle_duration_sec=1.0)
        self._reject_pub.publish(String(data=reason))
        return GoalResponse.REJECT

    def _on_goal(self, goal: Generate.Goal) -> GoalResponse:
        """Validate a goal before accepting it; every rejection carries a reason.

        Order matters under a flood: cheap field checks, then the busy check (a slot is
        reserved), and only then admission (the one tokenisation of the prompt), so a burst of
        maximal prompts costs one tokenisation per free slot, not one per goal. Session
        ownership is checked last, because claiming a session is what an accepted goal keeps.
        """
        runtime, config = self.runtime, self.config
        if not self._active or runtime is None or config is None:
            return self._reject("the node is not active: activate it (lifecycle) before sending goals")
        limits = GoalLimits(
            max_new_tokens=config["max_new_tokens_limit"],
            max_prompt_chars=config["max_prompt_chars"],
            domains=set(runtime.catalogue.domains) | set(runtime.catalogue.names),
            default_max_new_tokens=config["default_max_new_tokens"],
        )
        problem = goal_problem(goal, limits)
        if problem:
            return self._reject(problem)
        with self._lock:
            if self._inflight and config["busy_policy"] == "reject":
                return self._reject("busy: another generation is running (busy_policy=reject); retry when it ends")
            if self._inflight > config["max_queue"]:
                return self._reject(f"busy: {self._inflight - 1} goals already queued (max_queue)")
            self._inflight += 1
            self._idle.clear()
        try:
            admission = runtime.admit(turn_input(goal), max_new_tokens(goal, limits), list(goal.stop))
            problem = admission.problem
            if problem is None and goal.session_id:
                problem = self.dialogues.claim(goal.session_id, goal.session_token, chat=bool(goal.messages)).problem
        except Exception:
            self._unreserve()
            raise
        if problem:
            self._unreserve()
            return self._reject(problem)
        with self._lock:
            self._admitted[id(goal)] = admission.request
        return GoalResponse.ACCEPT

    def _unreserve(self) -> None:
        """Give back the slot ``_on_goal`` reserved for a goal it then rejected."""
        with self._lock:
            self._inflight -= 1
            if self._inflight == 0:
                self._idle.set()

    def _on_accepted(self, goal_handle: ServerGoalHandle) -> None:
        """Run the goal now, or queue it behind the running one (busy_policy=queue)."""
        learning = self._learning
        if learning is not None:
            learning.goal_arrived()  # idle-time learning yields to the goal at once
        with self._lock:
            if self._running is None:
                self._running = goal_handle
                start = True
            else:
                self._queue.append(goal_handle)
                start = False
        if start:
            goal_handle.execute()

    def _finish_goal(self, goal_handle: ServerGoalHandle) -> None:
        """Bookkeeping after a goal ends; start the next queued goal, if any."""
        if goal_handle.request.session_id:
            self.dialogues.release(goal_handle.request.session_id)
        with self._lock:
            self._admitted.pop(id(goal_handle.request), None)
            self._inflight -= 1
            self._running = self._queue.popleft() if self._queue else None
            nxt = self._running
            if self._inflight == 0:
                self._idle.set()
        if nxt is not None:
            nxt.execute()
        else:
            self._apply_between_turns()  # changes set during the generation apply now

    def _end_generations(self, reason: str) -> bool:
        """Make running and queued goals stop (within a round) and wait for them.

        The wait is bounded by ``deactivate_timeout_s``. Past it, the running goal is aborted
        now, so its client is not left waiting on a node that has moved on (nav2's action
        servers do the same); False tells the caller that a generation is still inside its
        round and its models must not be freed yet.
        """
        self._stop_reason = reason
        timeout = self.config["deactivate_timeout_s"] if self.config is not None else 1.0
        if self._idle.wait(timeout):
            return True
        with self._lock:
            running = self._running
        self.get_logger().error(f"a generation did not stop within deactivate_timeout_s={timeout:g} s: "
                                "its goal is aborted")
        if running is not None:
            self._terminate(running, "abort")
        return self._idle.is_set()

    @staticmethod
    def _terminate(goal_handle: ServerGoalHandle, how: str) -> None:
        """Move a goal to a terminal state unless that already happened (deactivate timeout)."""
        try:
            if goal_handle.is_active:
                getattr(goal_handle, how)()
        except Exception:  # a concurrent terminal transition won the race
            pass

    def _execute(self, goal_handle: ServerGoalHandle) -> Generate.Result:
        """Generate for one goal: stream feedback, honour cancel, report statistics."""
        try:
            return self._generate(goal_handle)
        except Exception as exc:
            self._counters["failed"] += 1
            self.get_logger().error(f"generation failed: {type(exc).__name__}: {exc}")
            self._terminate(goal_handle, "abort")
            return self._session_result(goal_handle, Generate.Result(
                finish_reason=FinishReason.ERROR.value,
                message=f"failed: {type(exc).__name__}: {exc}; the session continues from its last completed turn"))
        finally:
            self._finish_goal(goal_handle)

    def _session_result(self, goal_handle: ServerGoalHandle, result: Generate.Result) -> Generate.Result:
        """``result`` with the goal's session token (the client needs it for its next turn)."""
        sid = goal_handle.request.session_id
        kept = self.dialogues.get(sid) if sid else None
        if kept is not None:
            result.session_token = kept.token
        return result

    def _generate(self, goal_handle: ServerGoalHandle) -> Generate.Result:
        goal: Generate.Goal = goal_handle.request
        runtime = self.runtime
        if self._stop_reason or runtime is None or self.config is None:
            self._terminate(goal_handle, "abort")
            return self._session_result(goal_handle, Generate.Result(
                finish_reason=FinishReason.DEACTIVATED.value,
                message=self._stop_reason or "aborted: the node is not configured"))
        if goal_handle.is_cancel_requested:
            self._terminate(goal_handle, "canceled")
            return self._session_result(goal_handle, Generate.Result(
                finish_reason=FinishReason.CANCELLED.value, message="cancelled before it started"))
        with self._lock:
            request = self._admitted.pop(id(goal), None)
        if request is None:  # accepted by an earlier configuration of the node (cleaned up since)
            self._terminate(goal_handle, "abort")
            return self._session_result(goal_handle, Generate.Result(
                finish_reason=FinishReason.DEACTIVATED.value,
                message="aborted: the node was reconfigured after this goal was accepted; send it again"))
        with self._turn_lock:
            return self._run_turn(goal_handle, request)

    def _run_turn(self, goal_handle: ServerGoalHandle, request: TurnRequest) -> Generate.Result:
        goal: Generate.Goal = goal_handle.request
        runtime = self.runtime
        self._apply_pending_changes()
        self._counters["goals"] += 1
        kept = self.dialogues.get(goal.session_id) if goal.session_id else None
        if goal.session_id and kept is None:
            self._terminate(goal_handle, "abort")
            return Generate.Result(finish_reason=FinishReason.DEACTIVATED.value,
                                   message=f"aborted: session {echo(goal.session_id)} was dropped (node cleaned up)")
        conversation = kept.conversation if kept is not None else runtime.new_conversation()
        started = kept is not None and conversation.turns == 0
        restart_reason = kept.restart_reason if started else ""

        def publish(progress: TurnProgress) -> None:
            if goal_handle.is_active:  # not aborted by a deactivate timeout
                goal_handle.publish_feedback(Generate.Feedback(
                    delta=progress.delta, tokens_so_far=progress.tokens, active_draft=progress.draft or "",
                    acceptance_rate=progress.acceptance_rate))

        def stop() -> FinishReason | None:
            if goal_handle.is_cancel_requested:
                return FinishReason.CANCELLED
            return FinishReason.DEACTIVATED if self._stop_reason is not None else None

        if self._learning is not None:
            self._learning.goal_arrived()  # a step queued after the previous goal (this one waited in the queue)
        with runtime.hint_scope(goal.domain_hint or None):
            report = self._torch.run(runtime.run_turn, request, sampling_params(goal), conversation=conversation,
                                     on_progress=publish, progress_every=self.config["feedback_every_rounds"],
                                     should_stop=stop)
        if report.kept_tokens is not None:
            self.get_logger().info(f"session {echo(goal.session_id)} reached the context window: "
                                   f"continuing from its last {report.kept_tokens} tokens")
        if kept is not None:  # a completed turn (a cancelled one too: its text is the session's)
            kept.restart_reason = ""
            self.dialogues.persist(goal.session_id)
        if self._learning is not None and report.finish_reason in (FinishReason.EOS, FinishReason.LENGTH,
                                                                   FinishReason.STOP):
            self._learning.after_turn()
        result = self._session_result(goal_handle, self._result(report))
        result.session_started, result.session_restart_reason = started, restart_reason
        if report.finish_reason == FinishReason.CANCELLED:
            result.message = f"cancelled by the client after {report.tokens} tokens"
            self._terminate(goal_handle, "canceled")
        elif report.finish_reason == FinishReason.DEACTIVATED:
            result.message = f"{self._stop_reason} (after {report.tokens} tokens)"
            self._terminate(goal_handle, "abort")
        else:
            result.message = f"ok ({report.finish_reason})"
            self._terminate(goal_handle, "succeed")
        return result

    # ------------------------------------------------------------------ session services
    def _on_reset_learning(self, request: ResetLearning.Request, response: ResetLearning.Response
                           ) -> ResetLearning.Response:
        """Back to the shipped predictor (online learning's state forgotten, its file removed)."""
        learning = self._learning
        if learning is None:
            response.success = False
            response.message = ("online learning is off (parameter online_learning, or a policy without a "
                                 "predictor): nothing to reset")
            return response
        response.success, response.message = True, learning.reset()
        return response

    def _on_reset_session(self, request: ResetSession.Request, response: ResetSession.Response
                          ) -> ResetSession.Response:
        """Forget a session's context, keep its id and token (owner only; not while a goal holds it)."""
        problem = self.dialogues.reset(request.session_id, request.session_token)
        return self._owner_reply(response, request.session_id, problem, "reset",
                                 ": its next goal starts a fresh context")

    def _on_close_session(self, request: CloseSession.Request, response: CloseSession.Response
                          ) -> CloseSession.Response:
        """Drop a session and its file (owner only; not while a goal holds it)."""
        problem = self.dialogues.close(request.session_id, request.session_token)
        return self._owner_reply(response, request.session_id, problem, "closed")

    def _owner_reply(self, response: ResetSession.Response | CloseSession.Response, session_id: str,
                     problem: str | None, done: str, detail: str = "") -> ResetSession.Response | CloseSession.Response:
        """Answer an owner's session request: the refusal's reason, or what was done (also logged)."""
        response.success = problem is None
        response.message = problem or f"session {echo(session_id)} {done}{detail}"
        if problem is None:
            self.get_logger().info(f"session {echo(session_id)} {done} by its owner")
        return response

    def _on_list_sessions(self, request: ListSessions.Request, response: ListSessions.Response
                          ) -> ListSessions.Response:
        """Every kept session's id, kind, turns, tokens and last use; never a token or a text."""
        durable = self.dialogues.files is not None
        response.sessions = [
            SessionInfo(session_id=s.session_id, kind="chat" if s.chat else "prompt", turns=s.turns,
                        tokens=s.tokens, last_used=Time(nanoseconds=int(s.last_used_wall * 1e9)).to_msg(),
                        busy=s.busy, durable=durable)
            for s in self.dialogues.summaries()
        ]
        return response

    @staticmethod
    def _result(report: GenerationReport) -> Generate.Result:
        return Generate.Result(
            text=report.text,
            finish_reason=FinishReason(report.finish_reason).value,
            seed=report.seed or 0,
            num_tokens=report.tokens,
            tokens_per_second=float(report.tokens_per_s),
            acceptance_rate=float(report.acceptance_rate),
            mean_accepted_length=float(report.mean_accepted_length),
            draft_switches=report.switches,
            stall_seconds=float(report.stall_s),
            drafts_used=list(report.drafts_used),
        )

    # ------------------------------------------------------------------ scheduling
    def _on_prediction_due(self) -> None:
        """Prediction (its own callback group): a new forecast and plan, then prefetch applies it."""
        runtime = self.runtime
        if runtime is None:
            return
        runtime.plan()
        self._prefetch_gc.trigger()

    def _on_prefetch_due(self) -> None:
        """Prefetch (its own callback group): carry out the latest plan."""
        runtime = self.runtime
        if runtime is not None:
            runtime.apply()

    def _on_residency_change(self, event: ResidencyEvent) -> None:
        """Pool listener (runs under the pool's lock: only triggers guard conditions).

        A load that ended (done, failed or cancelled) or an eviction that freed memory may let
        the next wanted load start: prefetch runs again, with no new forecast needed.
        """
        self._residency_gc.trigger()
        ended_load = event.previous == DraftState.LOADING and event.current != DraftState.LOADING
        freed = event.previous == DraftState.EVICTING and event.current == DraftState.ON_STORAGE
        if ended_load or freed:
            self._prefetch_gc.trigger()

    def _on_context_hint(self, msg: String) -> None:
        """A planner's hint about the coming domain: bias the predictor and re-plan now.

        Any process may publish here, so an unknown hint is echoed bounded and escaped, at
        most once a second, and a repeated hint costs nothing (no log line, no re-plan).
        """
        runtime = self.runtime
        if runtime is None:
            return
        domain = msg.data.strip() or None
        if domain == runtime.hint:
            return
        problem = runtime.hint_problem(domain)
        if problem is not None:
            self.get_logger().warning(f"context_hint {echo(domain)} ignored: {problem}", throttle_duration_sec=1.0)
            return
        runtime.set_hint(domain)
        self.get_logger().info(f"context hint: {domain or '(cleared)'}")
        self._prediction_gc.trigger()

    # ------------------------------------------------------------------ publishing
    @staticmethod
    def _describe_ngram(runtime: DraftRuntime) -> str:
        """The n-gram member for /diagnostics: its settings and, under memspec, what it measured."""
        if runtime.ngram is None:
            return "off"
        text = f"on (n {runtime.ngram.min_n}-{runtime.ngram.max_n})"
        value = getattr(runtime.policy, "ngram_value", None)
        if value is not None and value.rounds:
            text += (f", {value.rounds} round(s) chosen, {value.hit:.0%} matched recently, acceptance on a match "
                     f"{value.acceptance:.2f}")
        return text

    def _draftless_service(self) -> str:
        """How the node serves without a model draft: with the n-gram member if it is on."""
        runtime = self.runtime
        on = runtime is not None and runtime.ngram is not None
        return "target-only with the n-gram member (no model draft)" if on else "target-only"

    def _publish_residency(self) -> None:
        runtime = self.runtime
        if runtime is None or getattr(self, "_residency_pub", None) is None:
            return
        self._residency_pub.publish(residency_msg(runtime.residency(), self.get_clock().now().to_msg()))

    def _publish_stats(self) -> None:
        runtime = self.runtime
        if runtime is None or self._idle.is_set():
            return
        self._stats_pub.publish(acceptance_msg(self.get_clock().now().to_msg(), runtime.window_stats()))

    def _publish_diagnostics(self) -> None:
        runtime, config = self.runtime, self.config
        if runtime is None or config is None:
            return
        self.dialogues.expire()  # idle sessions go even when no goal arrives
        st = runtime.statistics()
        snap = runtime.residency()
        level, summary = DiagnosticStatus.OK, "serving" if self._active else "inactive"
        if not runtime.catalogue.names:
            level, summary = DiagnosticStatus.WARN, f"no usable draft: serving {self._draftless_service()}"
        elif not any(runtime.pool.fits_alone(n) for n in runtime.catalogue.names):
            level, summary = (DiagnosticStatus.WARN,
                              f"memory budget is below every draft: serving {self._draftless_service()}")
        elif st.load_failures:
            level, summary = DiagnosticStatus.WARN, f"{st.load_failures} draft load(s) failed"
        guard = runtime.policy.guard_status()
        if guard is not None and guard.mode == GuardMode.FALLBACK and level == DiagnosticStatus.OK:
            level, summary = DiagnosticStatus.WARN, guard.describe()
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
            "goals_failed": self._counters["failed"],
            "sessions": len(self.dialogues),
            "session_kv_bytes": self.dialogues.kv_bytes(),
            "load_to_round_ratio": f"{ratio:.2f}" if ratio is not None else "n/a",
            "predictor_fraction_of_decode": f"{st.predictor_fraction:.4f}",
            "dtype": self._dtype_name,
            "ngram": self._describe_ngram(runtime),
            "online_learning": self._learning.describe() if self._learning is not None else "off",
        }
        if guard is not None:
            values.update({"guard_mode": guard.mode.value, "guard_fallbacks": guard.fallbacks,
                           "guard_fallback_rounds": guard.fallback_rounds,
                           "guard_drafting_vs_target_only": f"{guard.ratio:.3f}" if guard.ratio else "n/a"})
        validation = config.catalogue.predictor_validation
        if validation is not None:
            values["predictor_validation"] = validation.describe()
        for name, meter in self._meters.items():
            reading = meter.reading()
            values[f"{name}_calls"] = reading.calls
            values[f"{name}_ms_per_call"] = f"{reading.mean_s * 1e3:.3f}"
            values[f"{name}_calls_per_s"] = f"{reading.calls_per_s:.2f}"
        self._diag_pub.publish(diagnostics_msg(self.get_clock().now().to_msg(), self.get_name(), level, summary,
                                               values))

    # ------------------------------------------------------------------ parameters
    def _on_set_parameters(self, params: list[Parameter]) -> SetParametersResult:
        """Accept a change only if it will apply: validated in full, now, against what is loaded.

        Only RUNTIME_CHANGEABLE parameters get here (every other one is read-only, refused
        by rclpy before this callback). Unconfigured, configure will validate them. Configured,
        a new policy is built and bound to the loaded catalogue right here, so a change it
        cannot serve (e.g. ``static`` with a ``static_draft`` that is not loaded) is a refused
        change with the reason, never an exception later. The built policy is what gets
        applied between generations.
        """
        runtime, config = self.runtime, self.config
        if config is None or runtime is None:
            return SetParametersResult(successful=True)
        changes = {p.name: p.value for p in params}
        for name in ("num_speculative_tokens", "check_interval"):
            if changes.get(name) == 0:
                return SetParametersResult(successful=False, reason=(
                    f"{name} 0 (auto) is resolved at configure only (now {config[name]}); give a value "
                    "from 1, or set 0 and configure the node again"))
        policy = None
        if "policy" in changes:
            if changes["policy"] not in POLICIES:
                return SetParametersResult(successful=False, reason=f"policy must be one of {', '.join(POLICIES)}")
            with self._lock:
                values = {**config.values, **self._pending_changes, **changes}
            candidate = dataclasses.replace(config, values=values)
            try:
                policy = build_policy(candidate, runtime.catalogue.names)
                policy.bind(runtime.catalogue, runtime.budget, values["num_speculative_tokens"])
            except Exception as exc:  # any reason the policy cannot serve is a refusal
                return SetParametersResult(successful=False, reason=(
                    f"policy '{changes['policy']}' cannot serve the loaded drafts {runtime.catalogue.names}: "
                    f"{type(exc).__name__}: {exc} (check static_draft and the catalogue's predictor, "
                    "or keep the current policy)"))
        with self._lock:
            self._pending_changes.update(changes)
            if policy is not None:
                self._pending_policy = policy
        self._apply_between_turns()
        return SetParametersResult(successful=True)

    def _apply_between_turns(self) -> None:
        """Apply pending changes now unless a turn holds the runtime (it applies them itself:
        the next goal does so before its turn)."""
        if self._turn_lock.acquire(blocking=False):
            try:
                self._apply_pending_changes()
            finally:
                self._turn_lock.release()

    def _apply_pending_changes(self) -> None:
        """Apply run-time parameter changes between generations (never mid-generation)."""
        with self._lock:
            changes, self._pending_changes = self._pending_changes, {}
            policy, self._pending_policy = self._pending_policy, None
        runtime, config = self.runtime, self.config
        if not changes or runtime is None or config is None:
            return
        values = {**config.values, **changes}
        self.config = dataclasses.replace(config, values=values)
        runtime.reconfigure(k=values["num_speculative_tokens"], check_interval=values["check_interval"])
        if policy is not None and changes["policy"] != config["policy"]:
            runtime.set_policy(policy)  # carries a learner's state over to the new predictor, or drops it
            self._refresh_learning(changes["policy"])
        self.get_logger().info(f"run-time parameters applied: {changes}")

    def _autostart(self) -> None:
        self._autostart_timer.cancel()
        self.destroy_timer(self._autostart_timer)
        if self.trigger_configure() != TransitionCallbackReturn.SUCCESS:
            self.get_logger().error("autostart: configure failed; the node stays unconfigured")
            return
        self.trigger_activate()


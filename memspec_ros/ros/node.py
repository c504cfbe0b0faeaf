"""The memspec lifecycle node.

A managed (lifecycle) node because loading a target model and a working set of drafts is
slow and memory-hungry: a robot's bringup wants to configure it (load), activate it
(serve) and clean it up (free) deliberately, and to see a failed configure as a clear
transition result instead of a crashed process.
"""

from __future__ import annotations

from typing import Any

from rcl_interfaces.msg import SetParametersResult
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.parameter import Parameter

from memspec_ros.ros.parameters import (
    RUNTIME_CHANGEABLE,
    ConfigError,
    NodeConfig,
    declare_all,
    read_values,
    validate,
)

NODE_NAME = "memspec"


class MemSpecNode(LifecycleNode):
    """Lifecycle node serving speculative generation over a memory-budgeted draft pool."""

    def __init__(self, node_name: str = NODE_NAME, **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self._param_problems = declare_all(self)
        self.config: NodeConfig | None = None
        self.unusable_drafts: dict[str, str] = {}
        self._active = False
        self.add_on_set_parameters_callback(self._on_set_parameters)
        if self.get_parameter("autostart").value:
            # Transitions must run once the executor spins, not inside the constructor.
            self._autostart_timer = self.create_timer(0.0, self._autostart)

    # ------------------------------------------------------------------ lifecycle
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Validate every parameter and check the model folders; FAILURE names what to fix."""
        try:
            config = validate(read_values(self), self._param_problems)
            self.unusable_drafts = self._check_drafts(config)
        except ConfigError as exc:
            self.get_logger().error(f"configure failed: {exc}")
            return TransitionCallbackReturn.FAILURE
        self.config = config
        usable = [d.name for d in config.drafts if d.name not in self.unusable_drafts]
        self.get_logger().info(
            f"configured: target={config.target_path}, drafts={usable}, policy={config['policy']}, "
            f"budget_drafts={config['budget_drafts']}, check_interval={config['check_interval']}, "
            f"k={config['num_speculative_tokens']}"
        )
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = True
        self.get_logger().info("activated: accepting goals")
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = False
        self.get_logger().info("deactivated: no longer accepting goals")
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.config = None
        self.unusable_drafts = {}
        self.get_logger().info("cleaned up: models released")
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = False
        self.config = None
        self.get_logger().info(f"shut down from state '{state.label}'")
        return TransitionCallbackReturn.SUCCESS

    # ------------------------------------------------------------------ helpers
    def _check_drafts(self, config: NodeConfig) -> dict[str, str]:
        """Return {draft: reason} for drafts that cannot be used; raise unless tolerated."""
        bad = {d.name: f"model folder {d.path} does not exist" for d in config.drafts if not d.path.is_dir()}
        if bad and not config["tolerate_bad_drafts"]:
            name, reason = next(iter(bad.items()))
            raise ConfigError(
                f"draft '{name}': {reason} (fix draft_paths, or set tolerate_bad_drafts to serve without it)"
            )
        for name, reason in bad.items():
            self.get_logger().warning(f"draft '{name}' is unusable and will not be served: {reason}")
        return bad

    def _autostart(self) -> None:
        self._autostart_timer.cancel()
        self.destroy_timer(self._autostart_timer)
        if self.trigger_configure() != TransitionCallbackReturn.SUCCESS:
            self.get_logger().error("autostart: configure failed; the node stays unconfigured")
            return
        self.trigger_activate()

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
        return SetParametersResult(successful=True)

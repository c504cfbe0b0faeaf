"""QoS profiles of the node's interfaces, shared by the node and its clients.

* Residency is a *state*: transient-local with depth 1, so a monitor that joins late gets
  the current working set at once. A client that records every change (a LOADING state
  lasts a few tens of milliseconds) reads with ``RESIDENCY_LOG_QOS``: a 1-deep reader
  overwrites states its executor has not taken yet.
* Generate feedback carries text *deltas*: losing one corrupts the streamed answer, so it
  is reliable with a deep history (the default depth of 10 drops deltas when a client's
  executor falls a few rounds behind). Clients should subscribe with the same profile.
* The goal service keeps a deep request history so that a burst of goals (a misbehaving
  client sending 100 in a second) is answered one by one (most with a rejection) instead
  of requests silently falling out of a 10-deep queue and their clients waiting forever.
* Goal rejections come in bursts for the same reason: each one is a reason a client or an
  operator is waiting to read, so the history is as deep as the goal service's; a 10-deep
  reliable history overwrote reasons before a subscriber had taken them.
"""

from __future__ import annotations

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

RESIDENCY_QOS = QoSProfile(
    depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE
)
RESIDENCY_LOG_QOS = QoSProfile(
    depth=1000, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE
)
FEEDBACK_QOS = QoSProfile(depth=1000, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE)
GOAL_SERVICE_QOS = QoSProfile(depth=1000, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE)
REJECTIONS_QOS = QoSProfile(depth=1000, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE)

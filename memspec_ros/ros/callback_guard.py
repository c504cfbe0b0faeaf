"""One wrapper for every callback the node hands to rclpy, so no callback can end the process.

rclpy's executors re-raise an exception from any callback (timer, guard condition,
subscription, service, parameter callback, action callbacks) out of ``spin()``; one bad
message or one unforeseen bug would then take down a robot's whole language service. Each
callback the node registers is wrapped here once: an exception is logged with what was
running and the callback returns a safe fallback (a refused parameter change, a rejected
goal, nothing), and the executor keeps serving.
"""

from __future__ import annotations

import functools
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

R = TypeVar("R")


def survive(
    callback: Callable[..., R],
    logger: Any,
    what: str,
    fallback: Callable[[BaseException], R] | None = None,
) -> Callable[..., R | None]:
    """``callback`` that logs an exception and returns ``fallback(exc)`` (or None) instead.

    ``logger`` is an rclpy logger; ``what`` names the callback in the log line (an operator
    must be able to tell which callback failed without a traceback).
    """

    @functools.wraps(callback)
    def guarded(*args: Any, **kwargs: Any) -> R | None:
        try:
            return callback(*args, **kwargs)
        except Exception as exc:  # the whole point: nothing escapes to spin()
            where = traceback.extract_tb(exc.__traceback__)[-1]
            logger.error(
                f"{what} failed and was survived: {type(exc).__name__}: {exc} "
                f"({where.filename.rsplit('/', 1)[-1]}:{where.lineno})"
            )
            return fallback(exc) if fallback is not None else None

    return guarded

"""The lock every model build takes.

``transformers``' ``no_init_weights()`` patches ``torch.nn.init`` process-wide for the few
milliseconds a build takes; the background loader builds drafts while the catalogue or a
target load may build too, so every user of the patch is serialised on this one lock.
"""

from __future__ import annotations

import threading

BUILD_LOCK = threading.Lock()

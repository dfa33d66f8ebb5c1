"""Work of trainmedic's own on a thread of the training process, which the guard lets pass.

The save checks reload a plain state dict or a Lightning checkpoint in the training process, on
a thread that is not training (`_save_reload`): the module's class is the script's, which a separate
process cannot import from `__main__`. Those reloads call `torch.load` and `load_state_dict`,
which the guard wraps to follow the script's own loads (a resume, TOR017; a load with
`strict=False`, TOR015). A flag of the thread (`aside`) tells those wrappers to let them pass:
it is per thread, so the training thread's loads at the same moment are followed as ever.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

_local = threading.local()


def aside() -> bool:
    """Whether this thread is doing trainmedic's own work (a load the guard does not follow)."""
    return getattr(_local, "on", False)


@contextmanager
def working_aside() -> Iterator[None]:
    _local.on = True
    try:
        yield
    finally:
        _local.on = False

"""Long-lived processes (daphne, the Celery worker) keep what they loaded at start out of the
garbage collector's sight."""

import gc


def freeze_startup_heap() -> None:
    """Everything loaded by now (modules, the app registry, URL patterns, SDK schemas) lives
    as long as the process. In the collector's permanent generation it is no longer scanned:
    full collections walk only what requests and streams create, and the interpreter's exit
    skips its last collections over the whole heap, which took most of a second of each stop
    a deploy waits for."""
    gc.collect()
    gc.freeze()

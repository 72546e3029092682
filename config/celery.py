"""The Celery application; workers run every role call in the background."""

import logging
import os

from celery import Celery
from celery.signals import worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

logger = logging.getLogger(__name__)
app = Celery("parley")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def recover_replies(**kwargs) -> None:
    """Replies a previous worker left unfinished (it died, or the broker lost its tasks)."""
    from django.db import connections

    from apps.chat.services import replies_recover

    try:
        restarted = replies_recover()
    except Exception:  # never keep a worker from starting
        logger.exception("Could not recover unfinished replies")
        return
    finally:
        connections.close_all()  # this thread lives on; do not hold a connection for it
    if restarted:
        logger.warning("Restarted %d unfinished replies", len(restarted))

"""The Celery broker transport against the real Redis: a stopping worker's poll ends at once."""

from __future__ import annotations

import time
import uuid

from django.conf import settings
from kombu import Connection, Queue

from config.broker import Transport

BLOCK_SECONDS = 30  # far longer than any stop may take


def consuming_channel(connection: Connection, queue_name: str):
    channel = connection.channel()
    Queue(queue_name, channel=channel).declare()
    channel.basic_consume(queue_name, no_ack=False, callback=lambda message: None,
                          consumer_tag=uuid.uuid4().hex)  # fmt: skip
    return channel


def test_closing_a_channel_ends_its_blocked_poll_at_once_and_keeps_the_message_waiting():
    """kombu reads a BRPOP in flight to its end before a channel closes: with a 30 s block,
    a stop would wait 30 s. The channel has Redis unblock it, and the poll it ended took
    nothing: a message sent next is still there for the next worker."""
    name = f"broker-test-{uuid.uuid4().hex}"
    with Connection(settings.CELERY_BROKER_URL, transport=Transport) as connection:
        channel = consuming_channel(connection, name)
        channel.brpop_timeout = BLOCK_SECONDS
        connection.transport.cycle._register_BRPOP(channel)  # as the worker's loop does
        assert channel._in_poll
        started = time.monotonic()
        channel.close()
        took = time.monotonic() - started
        assert took < BLOCK_SECONDS / 3, f"close waited out the block ({took:.1f} s)"

        # The poll that was ended took nothing: a message sent now is read by the next one.
        other = consuming_channel(connection, name)
        connection.default_channel.basic_publish(
            other.prepare_message("still here"), exchange="", routing_key=name
        )
        got = other.basic_get(name)
        assert got is not None and got.body == b"still here"
        other.queue_delete(name)
        other.close()

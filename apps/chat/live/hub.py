"""One event loop per worker process, hosting every reply stream of the process.

Celery stays the queue and the delivery guarantee: a task hands its reply to the hub and waits
for it (so it is acknowledged only once the reply has settled). Inside the loop, the streams
share one Redis client, the provider clients and a bounded pool of database
threads, and the hub does per tick, for all of them at once, what each stream used to do on
its own timers:

- publish the text received since the last tick: one Redis round trip appends every reply's
  new text to its live tail and publishes it on its thread's topic of the live bus. A reply's
  first text goes out the moment it arrives; the tick widens with the number of live streams,
  so CPU per stream stays bounded. The publish rides on the wake-up of the chunk that finds
  the tick due, with a timer only for text that no later chunk follows: a timer of its own
  woke the process once more per tick;
- checkpoint partial text to the database (one transaction for every due reply);
- and, on a thread of its own, renew the lease of every reply the process holds (one round
  trip every 2 s): the heartbeat says the process is alive, however busy its loop is;
- listen for interrupts on one Redis subscription and cancel the streams they name;
- at most once a second, show the counts that settled replies changed (the session's strip,
  the threads' unread badges and usage lines): one read and one render per session however
  many of its replies settled, not an aggregate per reply.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import uvloop
from channels.db import database_sync_to_async
from django.conf import settings

from apps.chat import livebus, livestate
from apps.chat.council.replies import replies_hand_over
from apps.chat.display import events
from apps.chat.live.pacing import Pacer
from apps.chat.live.publisher import LiveReply
from apps.chat.records.replies import replies_checkpoint
from apps.ops import metrics
from apps.providers.adapters.clients import close_kept_clients, keep_clients_for

logger = logging.getLogger(__name__)
T = TypeVar("T")

COUNTS_INTERVAL_SECONDS = 1.0
# Housekeeping (checkpoints, counts) runs at most this often; publishing does not wait for it.
HOUSEKEEPING_SECONDS = 0.25
# A chunk arriving this close before the tick is due goes out with it (arrivals jitter).
TICK_TOLERANCE_SECONDS = 0.005
# Replies stopped by one SIGTERM reach `give_back` within a few loop turns of each other.
GIVE_BACK_GATHER_SECONDS = 0.05
RESUBSCRIBE_SECONDS = 1.0


def in_db_thread(function: Callable[..., T]) -> Callable[..., Coroutine[Any, Any, T]]:
    """Run a database function on the loop's bounded pool of database threads.

    Not asgiref's single thread-sensitive thread: hundreds of streams would queue behind each
    other there. The pool's size bounds the worker's database connections.
    """
    return database_sync_to_async(function, thread_sensitive=False)


class StreamHub:
    def __init__(self) -> None:
        self.loop = uvloop.new_event_loop()
        self.loop.set_default_executor(
            ThreadPoolExecutor(
                max_workers=settings.PARLEY_WORKER_DB_THREADS, thread_name_prefix="parley-db"
            )
        )
        self.replies: dict[str, LiveReply] = {}  # message public id -> live reply
        self.leases: dict[int, str] = {}  # message pk -> lease owner, from acquire to release
        self._stopping = threading.Event()
        self._ready = threading.Event()
        self._checkpointing = False
        self.counts_due: set[int] = set()  # threads whose settled replies changed the counts
        self._counting = False
        self._last_counts = 0.0
        self._services: list[asyncio.Task] = []
        self._errands: set[asyncio.Task] = set()  # one-off tasks, referenced until they end
        self.handing_over = False  # the worker is stopping: its replies go to other workers
        self._giving_back: list[tuple[LiveReply, asyncio.Future[None]]] = []
        self._work = asyncio.Event()  # set while there is housekeeping to tick for
        self._batching = False  # a batch publish is on its way
        self._last_batch = 0.0  # when the last batch publish started (monotonic)
        # When the next batch is due (at a chunk), and when a timer publishes it at the latest:
        # worked out when a batch starts or a reply arrives (`_retime`), not once a chunk.
        self._next_batch = self._late_batch = 0.0
        self._late_text: asyncio.TimerHandle | None = None  # see `publish_when_due`
        self.pacer = Pacer()

    # --- from any thread ----------------------------------------------------------------------

    def start(self) -> StreamHub:
        threading.Thread(target=self._run, name="parley-streams", daemon=True).start()
        threading.Thread(target=self._heartbeat, name="parley-heartbeat", daemon=True).start()
        if not self._ready.wait(10):
            raise RuntimeError("The stream hub's event loop did not start.")
        return self

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the hub's loop and wait for its result (from a task's thread)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def hand_over(self) -> None:
        """The worker was asked to stop: stop every stream at once and give its reply to the
        other workers (see `reply_hand_over`), so a deploy neither waits a long reply out nor
        leaves it to a lapsing lease. Replies that arrive from now on are sent back too."""
        self.loop.call_soon_threadsafe(self._hand_over_all)

    def _hand_over_all(self) -> None:
        self.handing_over = True
        for live in list(self.replies.values()):
            live.handed_over = True
            self._cancel([live.message_id])
        logger.info("Handing %d streaming replies over to the other workers", len(self.replies))

    async def give_back(self, live: LiveReply) -> None:
        """Give a stopped reply to the other workers, with the others stopped at the same
        time (see `_give_back_batch`)."""
        given = self.loop.create_future()
        self._giving_back.append((live, given))
        if len(self._giving_back) == 1:
            self.run_errand(self._give_back_batch(), "hand replies over to the other workers")
        await given

    async def _give_back_batch(self) -> None:
        """Everything received is published (the tail holds what the tabs were shown), the
        leases go at once, so the runs that take over start right away, and the replies wait
        again with their tasks sent: one round trip and one transaction for the whole batch,
        so a worker stopping under 50 streams is not held up by 50 of each."""
        await asyncio.sleep(GIVE_BACK_GATHER_SECONDS)
        batch, self._giving_back = self._giving_back, []
        lives = [live for live, _ in batch]
        started = time.monotonic()
        try:
            for live in lives:
                await live.publishing.acquire()
            try:
                await self._publish(lives)
            finally:
                for live in lives:
                    live.publishing.release()
            leases = {live.message_pk: live.lease for live in lives}
            for live in lives:
                self.leases.pop(live.message_pk, None)
                live.note("handed_over", "this worker stopped: another continues the reply")
            await livestate.leases_release(self.redis, leases)
            await in_db_thread(replies_hand_over)(
                replies={live.message_pk: (live.text, live.log) for live in lives}
            )
        except Exception as exc:
            for _, given in batch:
                given.set_exception(exc)
            return
        metrics.TAKEOVERS.labels("handed_over").inc(len(lives))
        logger.info("Handed %d replies over in %.2f s", len(lives), time.monotonic() - started)
        for _, given in batch:
            given.set_result(None)

    def stop(self) -> None:
        """End the hub's own work and its loop (the worker is shutting down: no task waits)."""

        self._stopping.set()
        wound_down = threading.Event()

        async def wind_down() -> None:
            for service in self._services:
                service.cancel()
            await asyncio.gather(*self._services, return_exceptions=True)
            await close_kept_clients()
            wound_down.set()
            self.loop.stop()

        asyncio.run_coroutine_threadsafe(wind_down(), self.loop)
        # Its services are gone before whatever stops next (Redis, in the tests); a loop too
        # busy to answer does not hold the process up for long.
        if not wound_down.wait(timeout=2):
            logger.debug("The hub's loop did not wind down within 2 s")

    def _heartbeat(self) -> None:
        """Renew every lease this process holds, from a thread: a death stops it within one
        renewal, a loop slowed by hundreds of streams does not."""
        client = livestate.sync_client()
        while not self._stopping.wait(livestate.LEASE_RENEW_SECONDS):
            try:
                lost = livestate.leases_renew(client, dict(self.leases))
            except Exception as exc:  # Redis is away: renew again when it is back
                logger.warning("Could not renew the stream leases (%s)", exc)
                continue
            if lost:
                self.loop.call_soon_threadsafe(self._give_up_lost, lost)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        keep_clients_for(self.loop)  # provider clients live as long as this loop
        self._services = [
            self.loop.create_task(self._tick_forever()),
            self.loop.create_task(self._listen_for_cancels()),
        ]
        self.loop.call_soon(self._ready.set)
        self.loop.run_forever()

    # --- inside the loop ----------------------------------------------------------------------

    @property
    def redis(self):
        return livestate.async_client()

    async def attach(self, live: LiveReply) -> None:
        """Start hosting a reply; an interrupt that came before it was hosted still counts."""
        self.replies[live.message_id] = live
        metrics.LIVE_STREAMS.set(len(self.replies))
        self._work.set()
        self._retime()  # the tick widens with the streams (and a changed setting applies)
        if self.handing_over:
            live.handed_over = True
            self._cancel([live.message_id])
        elif await livestate.cancel_requested(self.redis, live.message_id):
            self._cancel([live.message_id])

    def detach(self, live: LiveReply) -> None:
        self.replies.pop(live.message_id, None)
        metrics.LIVE_STREAMS.set(len(self.replies))
        self._retime()  # fewer streams: the tick narrows now, not after the next batch

    def text_arrived(self, live: LiveReply, *, first: bool) -> None:
        """The first text of a reply goes out at once; the rest waits for the tick."""
        if first:
            self.run_errand(self.flush_first(live), "publish the first text of a reply")
        else:
            self.publish_when_due()

    def publish_when_due(self) -> None:
        """Publish every reply's waiting text now if a tick has passed since the last batch,
        in this wake-up of the loop. Otherwise a timer does it a little after the tick is due,
        unless the next chunk (which wakes the loop anyway) comes first and does it."""
        if self._batching:
            return  # the batch ends by looking again
        if time.monotonic() >= self._next_batch:
            self._batching = True
            if self._late_text is not None:
                self._late_text.cancel()  # a cancelled timer never wakes the loop
                self._late_text = None
            self.run_errand(self._publish_batch(), "publish streaming replies")
        elif self._late_text is None:
            self._late_text = self.loop.call_at(self._late_batch, self._late_text_due)

    def _late_text_due(self) -> None:
        self._late_text = None
        self.publish_when_due()

    def _retime(self) -> None:
        """Work out when the next batch is due from the tick as it is now (read once here, not
        once a chunk: settings are a lazy object), and move a waiting timer to match."""
        tick = self.tick_seconds()
        self._next_batch = self._last_batch + tick - TICK_TOLERANCE_SECONDS
        self._late_batch = self._last_batch + tick * 1.5
        if self._late_text is not None:
            self._late_text.cancel()
            self._late_text = self.loop.call_at(self._late_batch, self._late_text_due)

    async def _publish_batch(self) -> None:
        self._last_batch = time.monotonic()
        self._retime()
        try:
            await self._publish_due()
        finally:
            self._batching = False
            # Text that came meanwhile, or that a flush in progress kept out of the batch.
            if any(live.unpublished for live in self.replies.values()):
                self.publish_when_due()

    def run_errand(self, coroutine: Coroutine[Any, Any, None], what: str) -> None:
        """A task the loop must not lose: the event loop keeps only weak references to tasks,
        and a failure is logged rather than left unretrieved (the next tick retries)."""
        errand = self.loop.create_task(coroutine)
        self._errands.add(errand)

        def done(task: asyncio.Task) -> None:
            self._errands.discard(task)
            if not task.cancelled() and task.exception() is not None:
                logger.error("Could not %s", what, exc_info=task.exception())

        errand.add_done_callback(done)

    async def flush(self, live: LiveReply) -> None:
        """Publish what this reply has not published yet (after any publish in progress)."""
        async with live.publishing:
            await self._publish([live])

    async def flush_first(self, live: LiveReply) -> None:
        """Publish the reply's first text unless it is out already: what arrives after it waits
        for the tick, even when this runs late on a busy loop."""
        async with live.publishing:
            if not live.published:
                live.first_out = time.monotonic()
                await self._publish([live])

    async def flush_locked(self, live: LiveReply) -> None:
        """`flush` for a caller that already holds the reply's `publishing` lock."""
        await self._publish([live])

    async def _publish(self, lives: list[LiveReply]) -> None:
        """Append each reply's new text to its tail, then send the numbered deltas. The caller
        holds each reply's `publishing` lock."""
        chunks = [(live, live.unpublished) for live in lives if live.unpublished]
        if not chunks:
            return
        seqs = await livebus.publish_deltas(
            livestate.wire(),
            [livebus.Delta(live.group, live.message_id, chunk) for live, chunk in chunks],
        )
        for (live, chunk), seq in zip(chunks, seqs, strict=True):
            live.published += len(chunk)
            if seq < 0:
                await self._reseed(live)
            else:
                live.seq = seq

    async def _reseed(self, live: LiveReply) -> int:
        """Redis lost this reply's tail (it restarted empty): put the text published so far
        back, numbered after every delta sent, and show it whole on every tab."""
        live.seq += 1
        text = live.text[: live.published]
        await livestate.live_reseed(self.redis, live.message_id, text, live.seq)
        event = await in_db_thread(events.state_event)(
            message=live.message, seq=live.seq, live_text=text
        )
        await events.publish_state(self.redis, group=live.group, event=event)
        return live.seq

    async def state_seq(self, live: LiveReply) -> int:
        """A sequence number for a full-state push of a streaming reply (the caller holds its
        `publishing` lock)."""
        seq = await livestate.live_append(self.redis, live.message_id, "")
        live.seq = seq if seq >= 0 else await self._reseed(live)
        return live.seq

    async def _publish_due(self) -> None:
        # A reply's first text went out alone; what follows it waits a whole tick too.
        since = time.monotonic() - self.tick_seconds() + TICK_TOLERANCE_SECONDS
        due = [
            live
            for live in self.replies.values()
            if live.unpublished and not live.publishing.locked() and live.first_out <= since
        ]
        for live in due:
            await live.publishing.acquire()  # free, so this does not yield
        try:
            await self._publish(due)
        finally:
            for live in due:
                live.publishing.release()

    def tick_seconds(self) -> float:
        return self.pacer.tick(len(self.replies))

    async def _tick_forever(self) -> None:
        """Housekeeping: checkpoints of streaming replies, counts of settled ones."""
        last_tick = time.monotonic()
        while True:
            if not self.replies and not self.counts_due and not self._checkpointing:
                # Nothing streams and nothing is due: an idle worker does not tick at all.
                self.pacer.forget()
                self._work.clear()
                await self._work.wait()
            wait = last_tick + HOUSEKEEPING_SECONDS - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            now, due = time.monotonic(), last_tick + HOUSEKEEPING_SECONDS
            last_tick = now
            try:
                if wait > 0:  # how late the sleep ended is the loop's lag: the tick follows it
                    self.pacer.observe_lag(now - due)
                self._checkpoint_due(now)
                self._counts_due(now)
            except Exception:  # a database blip must not end the ticks
                logger.exception("The stream hub's tick failed; retrying on the next one")

    def _checkpoint_due(self, now: float) -> None:
        if self._checkpointing:
            return  # the database is slower than the interval: skip, never pile up
        every = settings.PARLEY_CHECKPOINT_INTERVAL_MS / 1000
        due = [live for live in self.replies.values() if live.checkpoint_due(now, every)]
        if due:
            self._checkpointing = True
            self.run_errand(self._checkpoint(due, now), "checkpoint streaming replies")

    async def _checkpoint(self, lives: list[LiveReply], now: float) -> None:
        texts = {live.message_pk: live.text for live in lives}
        try:
            await in_db_thread(replies_checkpoint)(texts=texts)
            for live in lives:
                live.checkpointed, live.last_checkpoint = len(texts[live.message_pk]), now
        except Exception:
            logger.exception("Could not checkpoint %d streaming replies", len(lives))
        finally:
            self._checkpointing = False

    def counts_changed(self, thread_id: int) -> None:
        self.counts_due.add(thread_id)
        self._work.set()

    @property
    def counts_pending(self) -> bool:
        """Settled replies whose counts are not shown yet (due, or being read)."""
        return bool(self.counts_due) or self._counting

    def _counts_due(self, now: float) -> None:
        if (
            not self.counts_due
            or self._counting
            or now - self._last_counts < COUNTS_INTERVAL_SECONDS
        ):
            return
        thread_ids, self.counts_due = sorted(self.counts_due), set()
        self._counting, self._last_counts = True, now
        self.run_errand(self._publish_counts(thread_ids), "show the counts of settled replies")

    async def _publish_counts(self, thread_ids: list[int]) -> None:
        try:
            pushes = await in_db_thread(events.settled_counts_events)(thread_ids=thread_ids)
            await events.publish(self.redis, pushes)
        except Exception:
            self.counts_due.update(thread_ids)  # shown on a later tick
            self._work.set()
            raise
        finally:
            self._counting = False

    def _give_up_lost(self, message_pks: list[int]) -> None:
        """This worker stalled past its lease and another run took the reply over: stop
        streaming it here, without settling it (two runs must never write one reply)."""
        for live in list(self.replies.values()):
            if live.message_pk in message_pks:
                logger.warning("Lost the lease on reply %s; another run took it over",
                               live.message_id)  # fmt: skip
                live.lease_lost = True
                self._cancel([live.message_id])

    def _cancel(self, message_ids: list[str]) -> None:
        for message_id in message_ids:
            live = self.replies.get(message_id)
            if live is not None and live.stream_task is not None and not live.stream_task.done():
                live.stream_task.cancel(msg="interrupted")

    async def _listen_for_cancels(self) -> None:
        """One subscription for the whole worker; after a lost connection, the flags tell
        which of its replies were interrupted meanwhile."""
        while True:
            pubsub = self.redis.pubsub()
            try:
                await pubsub.subscribe(livestate.CANCEL_CHANNEL)
                self._cancel(await livestate.cancels_requested(self.redis, list(self.replies)))
                async for item in pubsub.listen():
                    if item.get("type") == "message":
                        self._cancel(str(item["data"]).split())
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning("Lost the interrupt subscription (%s); subscribing again", exc)
                await asyncio.sleep(RESUBSCRIBE_SECONDS)
            finally:
                await pubsub.aclose()


_hub: StreamHub | None = None
_hub_lock = threading.Lock()


def stream_hub_stop() -> None:
    """Stop this process's hub, if it was started (at worker shutdown)."""
    global _hub
    with _hub_lock:
        if _hub is not None:
            _hub.stop()
            _hub = None


def stream_hub_hand_over() -> None:
    """Give this process's live replies to the other workers (it is stopping)."""
    with _hub_lock:
        if _hub is not None:
            _hub.hand_over()


def stream_hub() -> StreamHub:
    """This process's hub, started on first use."""
    global _hub
    with _hub_lock:
        if _hub is None:
            _hub = StreamHub().start()
        return _hub

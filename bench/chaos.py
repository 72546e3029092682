"""Recovery figures: a worker killed mid-stream and Redis restarted empty mid-stream.

Runs Parley as deployed (separate daphne and Celery worker processes, a scratch SQLite
database, a Redis of its own) with the project's emulator as an OpenAI-compatible upstream
streaming 500 numbered words at 40 tokens a second, and a tab following the thread over a
real websocket. For each fault, a few runs, printing:

- takeover / resumed: the fault to the next new word on the tab. The faults: the streaming
  worker SIGKILLed while another runs (`worker`); a lone worker SIGKILLed, started as the
  Procfile starts it (`lone`: `python -m config.worker` forks it again) or as a bare `celery
  worker` that a process manager starts again at once (`lone-cold`); Redis back empty after
  2 s down (`redis`);
- words lost and words repeated in the stored reply (must be 0);
- text withdrawn: times the tab's bubble showed text that was not a prefix of the answer or
  shrank (must be 0); runs: replies that completed.

Run: `make bench` (everything) or `python -m bench.chaos --runs 3`; `--busy 2` keeps the
host busy with two CPU hogs meanwhile, as a shared server is.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import signal
import statistics
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

from bench.busy import busy_host
from bench.long_threads import configure

WORDS = "".join(f"w{n} " for n in range(1, 501)).rstrip()


def damage(final: str, shown: list[str]) -> tuple[int, int, int]:
    numbers = [int(n) for n in re.findall(r"w(\d+)", final)]
    lost = len(set(range(1, 501)) - set(numbers))
    repeated = sum(count - 1 for count in Counter(numbers).values() if count > 1)
    withdrawn = sum(not WORDS.startswith(text) for text in shown)
    withdrawn += sum(later < earlier for earlier, later in zip(
        map(len, shown), map(len, shown[1:]), strict=False))  # fmt: skip
    return lost, repeated, withdrawn


async def one_run(fault: str, owner, emulator) -> tuple[float, int, int, int, bool]:
    from apps.chat.models import Message, MessageStatus
    from apps.chat.records.sessions import session_create, session_set_provider
    from apps.providers.emulator import Script
    from apps.providers.services import credential_save
    from tests.chat.test_live_streaming import session_cookie
    from tests.topology import FollowedTab, Topology, post

    emulator.reset()
    emulator.script(
        Script(text=WORDS, tokens_per_second=40, provider="openai"),
        Script(text=WORDS, tokens_per_second=40, resumes=True, provider="openai"),
    )
    credential = await asyncio.to_thread(
        credential_save, owner=owner, name=f"Numbered {uuid.uuid4().hex[:8]}",
        provider="openai_compatible",
        base_url=f"{emulator.url}/v1", api_key="sk-bench-numbered-0000",
    )  # fmt: skip
    session = await asyncio.to_thread(session_create, owner=owner, name=f"Chaos {fault}")
    await asyncio.to_thread(
        session_set_provider, session=session, credential=credential, model="gpt-4.1"
    )
    thread = session.active_thread
    topology = Topology(Path(tempfile.mkdtemp(prefix="parley-chaos-")))
    try:
        workers = [topology.start_worker("worker-a", supervised=fault == "lone")]
        if fault == "worker":
            workers.append(topology.start_worker("worker-b"))
        web = topology.start_web("web")
        for worker in workers:
            await asyncio.to_thread(topology.wait_worker_ready, worker)
        cookie = (await asyncio.to_thread(session_cookie, owner)).decode()
        tab = FollowedTab(web, str(thread.public_id), cookie)
        reply_id = ""

        def words() -> int:
            bubble = tab.tab.bubbles.get(reply_id)
            return len(bubble.text.split()) if bubble else 0

        following = asyncio.ensure_future(
            tab.follow(lambda t: bool(reply_id) and t.status(reply_id) == "done")
        )
        await post(web, str(thread.public_id), cookie, "@assistant count for me")
        reply = await asyncio.to_thread(
            lambda: Message.objects.filter(thread=thread, speaker="assistant").first()
        )
        reply_id = str(reply.public_id)
        while words() < 60:
            await asyncio.sleep(0.02)
        before = words()
        if fault == "worker":
            victim = next(w for w in workers if "] received" in w.output())
            victim.process.send_signal(signal.SIGKILL)
            started = time.monotonic()
        elif fault == "lone":  # its supervisor forks it again
            os.kill(topology.forked_worker(workers[0]) or 0, signal.SIGKILL)
            started = time.monotonic()
        elif fault == "lone-cold":  # the process manager starts it again at once, cold
            workers[0].process.send_signal(signal.SIGKILL)
            started = time.monotonic()
            workers[0].process.wait()
            workers.append(topology.start_worker("worker-a"))
        else:
            topology.kill_redis()
            await asyncio.sleep(2)
            topology.start_redis_again()
            started = time.monotonic()
        while words() <= before and time.monotonic() - started < 90:  # a stall counts, not hangs
            await asyncio.sleep(0.02)
        recovered = time.monotonic() - started
        with contextlib.suppress(TimeoutError):  # a reply that never ends counts as failed
            await asyncio.wait_for(following, 90)
        final = await asyncio.to_thread(lambda: Message.objects.get(pk=reply.pk))
        lost, repeated, withdrawn = damage(final.text, tab.seen_texts.get(reply_id, []))
        return recovered, lost, repeated, withdrawn, final.status == MessageStatus.DONE
    finally:
        await asyncio.to_thread(topology.stop)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--busy", type=int, default=0, help="CPU hogs to run meanwhile")
    parser.add_argument(
        "--faults",
        default="worker,lone,lone-cold,redis",
        help="comma-separated: worker, lone, lone-cold, redis",
    )
    args = parser.parse_args()
    configure(None)
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test.utils import setup_test_environment

    from apps.providers.emulator import Emulator
    from apps.roles.services import role_pack_load

    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    emulator = Emulator().start_in_thread()
    try:
        role_pack_load("film-crew")
        owner = get_user_model().objects.create_user("chaos")
        busy = f", {args.busy} CPU hogs running" if args.busy else ""
        print(f"\nRecovery ({args.runs} runs each; 500 numbered words at 40 tokens/s{busy}):\n")
        print("| fault | to the next word p50 / max | words lost | repeated | text withdrawn "
              "| completed |")  # fmt: skip
        print("|---|---|---:|---:|---:|---:|")
        faults = {
            "worker": "worker SIGKILL (another takes over)",
            "lone": "lone worker SIGKILL, `python -m config.worker` (the Procfile's)",
            "lone-cold": "lone worker SIGKILL, `celery worker` restarted at once, cold",
            "redis": "Redis restart (empty)",
        }
        for fault in args.faults.split(","):
            label = faults[fault]
            with busy_host(args.busy):
                runs = [asyncio.run(one_run(fault, owner, emulator)) for _ in range(args.runs)]
            times = [run[0] for run in runs]
            print(
                f"| {label} | {statistics.median(times):.1f} / {max(times):.1f} s "
                f"| {sum(r[1] for r in runs)} | {sum(r[2] for r in runs)} "
                f"| {sum(r[3] for r in runs)} | {sum(r[4] for r in runs)}/{len(runs)} |",
                flush=True,
            )
    finally:
        emulator.stop()
        connection.close()
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()

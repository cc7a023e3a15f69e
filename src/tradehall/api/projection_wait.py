"""History reads wait for the projections on the event loop, not on the reader thread: one
poll of the projector's position serves every read waiting (each for the journal record that
was the head when it was asked), so reads waiting on a projector that is behind never queue
behind one another on the single reader thread (each would add its whole wait to the next)."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import Executor

from tradehall.store.journaled import POLL_S, JournaledStore, behind


class ProjectionWait:
    def __init__(self, store: JournaledStore, reader: Executor) -> None:
        self.store = store
        self.reader = reader
        self._waiting: list[tuple[int, float, asyncio.Future[None]]] = []
        self._poller: asyncio.Task[None] | None = None

    async def until(self, target: int) -> None:
        """Return once the tables hold journal record ``target``; ``ProjectionBehind`` after
        the store's ``wait_s``."""
        store = self.store
        if store.projected_cached() >= target:
            return
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._waiting.append((target, time.monotonic() + store.wait_s, future))
        if self._poller is None or self._poller.done():
            self._poller = loop.create_task(self._poll())
        await future

    async def _poll(self) -> None:
        loop = asyncio.get_running_loop()
        while self._waiting:
            failure: Exception | None = None
            try:
                projected = await loop.run_in_executor(self.reader, self.store.projected_seen)
            except Exception as exc:  # the store is down: every waiter gets why
                projected, failure = -1, exc
            now = time.monotonic()
            still: list[tuple[int, float, asyncio.Future[None]]] = []
            for target, deadline, future in self._waiting:
                if future.done():
                    continue
                if failure is not None:
                    future.set_exception(failure)
                elif projected >= target:
                    future.set_result(None)
                elif now >= deadline:
                    future.set_exception(behind(projected, target))
                else:
                    still.append((target, deadline, future))
            self._waiting = still
            if still:
                await asyncio.sleep(POLL_S)

"""A background thread that puts saved KV blocks to ctxtier in batches."""

from __future__ import annotations

import collections
import logging
import threading
from typing import Callable, Deque, List, Optional, Tuple

from .. import errors

log = logging.getLogger("ctxtier.vllm")

# One queued block: (hash, part or None, CPU uint8 buffer).
Item = Tuple[int, Optional[int], object]


class Saver:
    """Queues blocks and puts them with ``put_many`` from one daemon thread.

    get_client returns a ctxtier Client or None (ctxd unreachable: the batch
    is dropped). Nothing blocks the caller: past max_blocks queued, new
    blocks are dropped and counted. Conflict (the same key with other bytes:
    a block another engine computed with different numerics) counts as
    present, since ctxtier keeps the first copy.
    """

    def __init__(self, get_client: Callable[[], object], namespace: str, batch: int, max_blocks: int,
                 timeout: float):
        self._get_client = get_client
        self._ns = namespace
        self._batch = batch
        self._max = max_blocks
        self._timeout = timeout
        self._q: Deque[Item] = collections.deque()
        self._cv = threading.Condition()
        self._busy = 0
        self._closed = False
        self.stats = {"saved": 0, "present": 0, "failed": 0, "dropped": 0}
        self._t = threading.Thread(target=self._run, name="ctxtier-saver", daemon=True)
        self._t.start()

    def submit(self, items: List[Item]) -> None:
        """Queue blocks to save; drops (and counts) those past the queue bound."""
        with self._cv:
            if self._closed:
                self.stats["dropped"] += len(items)
                return
            room = max(0, self._max - len(self._q))
            self._q.extend(items[:room])
            if len(items) > room:
                self.stats["dropped"] += len(items) - room
                log.warning("ctxtier: save queue full, dropped %d blocks", len(items) - room)
            self._cv.notify_all()

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Wait until every queued block was put (or failed); False on timeout."""
        with self._cv:
            return self._cv.wait_for(lambda: not self._q and not self._busy, timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Finish the queue (up to timeout) and stop the thread."""
        self.flush(timeout)
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        self._t.join(timeout)

    def _run(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._q or self._closed)
                if not self._q and self._closed:
                    return
                batch = [self._q.popleft() for _ in range(min(self._batch, len(self._q)))]
                self._busy += 1
            try:
                self._put(batch)
            finally:
                with self._cv:
                    self._busy -= 1
                    self._cv.notify_all()

    def _put(self, batch: List[Item]) -> None:
        client = self._get_client()
        if client is None:
            self._count("failed", len(batch))
            return
        try:
            res = client.put_many(self._ns, [(h, buf, part) for h, part, buf in batch], timeout=self._timeout)
        except errors.CtxtierError as e:
            log.warning("ctxtier: saving %d blocks failed: %s", len(batch), e)
            self._count("failed", len(batch))
            return
        for (h, _, _), err in zip(batch, res):
            if err is None:
                self._count("saved", 1)
            elif isinstance(err, errors.Conflict):
                self._count("present", 1)
            else:
                log.warning("ctxtier: saving block %016x failed: %s", h, err)
                self._count("failed", 1)

    def _count(self, what: str, n: int) -> None:
        with self._cv:
            self.stats[what] += n

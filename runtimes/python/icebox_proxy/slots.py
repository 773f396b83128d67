"""Shared-mode bookkeeping: activation slots (threads of this interpreter) and in-flight count.

A Python activation cannot get private globals cheaply (module globals are the action's
state), so a slot is only a counted place for one concurrent activation: created on demand up
to the capacity and reused afterwards, reported as the stats' `sharing.contexts`.
"""

import _thread


class Slots:
    def __init__(self, capacity):
        self.capacity = capacity
        self._lock = _thread.allocate_lock()
        # Slots are never torn down, so every slot ever created is live, and the busy ones are
        # the activations in flight.
        self._busy = 0
        self._created = 0

    @property
    def in_flight(self):
        return self._busy

    def acquire(self):
        with self._lock:
            if self._busy == self._created:
                self._created += 1
            self._busy += 1

    def release(self):
        with self._lock:
            self._busy -= 1

    def contexts(self):
        with self._lock:
            return {"live": self._created, "busy": self._busy, "created": self._created}

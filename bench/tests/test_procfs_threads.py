"""procfs.threads_by_name: the per-thread split of a process's CPU and waits that the warm
latency benchmark prints for the daemon."""

import os
import threading
import time

from icebox_bench import procfs


def test_a_named_thread_is_counted_with_its_cpu_and_waits():
    ready = threading.Event()
    done = threading.Event()

    def probe():
        with open(f"/proc/self/task/{threading.get_native_id()}/comm", "w") as f:
            f.write("probe-thread")
        end = time.process_time() + 0.05
        while time.process_time() < end:
            pass
        for _ in range(5):
            time.sleep(0.002)
        ready.set()
        done.wait()

    t = threading.Thread(target=probe)
    t.start()
    try:
        assert ready.wait(10)
        threads = procfs.threads_by_name(os.getpid())
        cpu, waits = threads["probe-thread"]
        assert cpu > 0
        assert waits >= 5
        # The main thread is counted apart, under its own name.
        assert len(threads) >= 2
    finally:
        done.set()
        t.join()

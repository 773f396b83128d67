"""The haproxy baseline of the warm-latency benchmark forwards a real /run to a bare proxy
and back, and leaves nothing behind.

    python3 -m unittest discover -s bench/node -p 'test_*.py'
"""

from __future__ import annotations

import os
import unittest

from nodebench import haproxy
from nodebench.actions import python_hello
from nodebench.proxy import DirectProxy, run_body


class HaproxyHopTest(unittest.TestCase):
    def test_a_run_through_the_hop_reaches_the_proxy_and_returns_its_answer(self):
        self.assertIsNone(haproxy.unavailable(), "scripts/setup.sh installs haproxy")
        ex = python_hello()
        with DirectProxy("python") as proxy:
            with proxy.client() as pc:
                proxy.init(pc, "hello", ex.code)
            with haproxy.HaproxyHop(proxy.endpoint.path) as hop:
                pid, workdir = hop.proc.pid, hop.dir
                with hop.client() as c:
                    for _ in range(3):
                        reply = c.request("POST", "/run", run_body({"name": "hop"}, "hello"))
                        self.assertEqual(reply.status, 200, reply.body)
                        self.assertIn(b"Hello, hop!", reply.body)
                    self.assertEqual(c.reconnects, 0, "keep-alive through the hop")
        self.assertFalse(os.path.exists(f"/proc/{pid}"), "haproxy was stopped")
        self.assertFalse(os.path.exists(workdir), "its directory was removed")


if __name__ == "__main__":
    unittest.main()

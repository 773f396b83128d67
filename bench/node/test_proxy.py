"""The bare proxy baseline launches each runtime as iceboxd does (issue 8, defect 12: an
unexpanded `{heap_mb}` made node exit, and the warm-latency section reported nothing).

    python3 -m unittest discover -s bench/node -p 'test_*.py'
"""

from __future__ import annotations

import re
import unittest

from nodebench.actions import nodejs_hello, python_hello
from nodebench.daemon import RUNTIMES
from nodebench.proxy import DirectProxy, run_body

PLACEHOLDER = re.compile(r"\{[a-z_]+\}")


class PlaceholderTest(unittest.TestCase):
    def test_heap_is_three_fifths_of_the_limit_rounded_down_as_in_the_daemon(self):
        from nodebench.proxy import expand

        # crates/icebox-sandbox/src/manifest.rs: heap_mb = (limit >> 20) * 3 / 5
        self.assertEqual(expand("{memory_mb}/{heap_mb}", "/r", 256), "256/153")
        self.assertEqual(expand("{runtime_dir}/proxy.js", "/r", 128), "/r/proxy.js")

    def test_every_placeholder_of_every_runtime_is_substituted(self):
        manifests = sorted(RUNTIMES.glob("*/runtime.json"))
        self.assertTrue(manifests, f"no runtime.json under {RUNTIMES}")
        for path in manifests:
            lang = path.parent.name
            with self.subTest(runtime=lang):
                proxy = DirectProxy(lang)
                try:
                    left = [a for a in [*proxy.argv, *proxy.env_extra.values()] if PLACEHOLDER.search(a)]
                    self.assertEqual(left, [], f"{path}: placeholders left unexpanded")
                finally:
                    proxy.stop()


class BareProxyTest(unittest.TestCase):
    """The real proxies, started bare, answer /init and /run (what warm_latency times)."""

    def _check(self, example, name: str, greeting: bytes) -> None:
        with DirectProxy(example.lang) as proxy, proxy.client() as client:
            proxy.init(client, name, example.code)
            reply = client.request("POST", "/run", run_body({"name": "bench"}, name))
            self.assertEqual(reply.status, 200, reply.body[:300])
            self.assertIn(greeting, reply.body)

    def test_nodejs_proxy_starts_and_answers(self):
        self._check(nodejs_hello(), "hello-nodejs", b"Hello, bench!")

    def test_python_proxy_starts_and_answers(self):
        self._check(python_hello(), "hello-python", b"Hello, bench!")


if __name__ == "__main__":
    unittest.main()

"""Unit tests of the cold-start benchmark's snapshot configuration (no daemon needed).

python3 -m unittest discover -s bench/node -p 'test_*.py'
"""

from __future__ import annotations

import unittest

import cold_start
from cold_start import CONFIGS, Samples, check_restore, comparison, row_target
from nodebench.report import NOT_MEASURED
from nodebench.snapshots import unavailable_reason, view_of


def record(instance: str, restore: str | None = None, init: int = 45, wait: int = 47, duration: int = 20) -> dict:
    annotations = [
        {"key": "icebox.start", "value": "cold"},
        {"key": "icebox.instance", "value": instance},
        {"key": "initTime", "value": init},
        {"key": "waitTime", "value": wait},
    ]
    if restore:
        annotations.append({"key": "icebox.restore", "value": restore})
    return {"name": "cold-java", "annotations": annotations, "duration": duration, "response": {"success": True}}


class RestoreCheckTest(unittest.TestCase):
    def test_a_restore_in_the_expected_mode_passes(self):
        self.assertEqual(check_restore(record("cold-java-1", "faasnap"), "faasnap"), "faasnap")

    def test_a_normal_start_or_another_mode_is_an_error(self):
        with self.assertRaisesRegex(RuntimeError, "a normal start"):
            check_restore(record("cold-java-1"), "faasnap")
        with self.assertRaisesRegex(RuntimeError, "'lazy'"):
            check_restore(record("cold-java-1", "lazy"), "faasnap")


class SamplesTest(unittest.TestCase):
    def test_restores_and_stem_cells_are_counted_apart(self):
        s = Samples()
        s.add(0.070, record("cold-java-1", "faasnap"))
        s.add(0.072, record("cold-java-2", "faasnap"))
        s.add(0.300, record("java-stem-3"))
        self.assertEqual(s.restores, {"faasnap": 2})
        self.assertEqual(s.from_stem_cell, 1)
        self.assertEqual(s.init_ms, [45, 45, 45])


def measured(cold_s: list[float], bare_s: list[float], init: int = 45) -> Samples:
    s = Samples(bare=bare_s)
    for i, c in enumerate(cold_s):
        s.add(c, record(f"cold-x-{i}", "faasnap", init=init))
    return s


class TargetTest(unittest.TestCase):
    def test_only_the_java_snapshot_row_is_judged_on_twice_java_version(self):
        snapshot = next(c for c in CONFIGS if c.snapshot)
        text, limit = row_target(snapshot, "java", 45.0)
        self.assertEqual(limit, 90.0)
        self.assertIn("2 × `java -version`", text)
        self.assertIsNone(row_target(snapshot, "python", 12.0)[1])
        stem = next(c for c in CONFIGS if c.key == "stem")
        self.assertEqual(row_target(stem, "python", 12.0)[1], 38.0)
        plain = next(c for c in CONFIGS if c.key == "plain")
        self.assertIsNone(row_target(plain, "java", 45.0)[1])


class ComparisonTest(unittest.TestCase):
    def test_each_daemon_beside_its_own_bare_start(self):
        results = {
            "stem": {lang: measured([0.120, 0.130], [0.045, 0.047]) for lang in cold_start.BARE},
            "plain": {lang: measured([0.300, 0.320], [0.046, 0.046]) for lang in cold_start.BARE},
            "snapshot": {lang: measured([0.070, 0.080], [0.044, 0.046], init=44) for lang in cold_start.BARE},
        }
        results["snapshot"]["nodejs"] = Samples(bare=[0.040], unavailable="no snapshots")
        table = comparison(results)
        java = next(r for r in table.rows if r[0] == "java")
        self.assertEqual(java[2], "125 ms (2.72× bare)")
        self.assertEqual(java[4], "75.0 ms (1.67× bare)")
        self.assertEqual(java[5], "44.0 ms")
        self.assertEqual(java[6], "1.67×")  # stem cell 125 ms / snapshot 75 ms
        self.assertEqual(java[7], "4.13×")  # plain 310 ms / snapshot 75 ms
        node = next(r for r in table.rows if r[0] == "nodejs")
        self.assertEqual(node[4], NOT_MEASURED)
        self.assertEqual(node[6:], ["n/a", "n/a"])


class SnapshotApiTest(unittest.TestCase):
    def test_view_of_matches_the_name_in_any_namespace_and_the_version(self):
        views = [
            {"action": "guest/cold-java", "version": "0.0.1", "state": "ready"},
            {"action": "guest/cold-java-2", "version": "0.0.1", "state": "building"},
        ]
        self.assertIs(view_of(views, "cold-java"), views[0])
        self.assertIsNone(view_of(views, "cold-java", "0.0.2"))
        self.assertIsNone(view_of(views, "cold"))

    def test_unavailable_reason_reads_the_process_isolation(self):
        self.assertIsNone(
            unavailable_reason({"isolations": [{"isolation": "process", "backend": "crun", "snapshots": True}]})
        )
        self.assertIn(
            "CRIU",
            unavailable_reason({"isolations": [{"isolation": "process", "backend": "none", "snapshots": False}]}),
        )
        self.assertIn("no process isolation", unavailable_reason({}))


if __name__ == "__main__":
    unittest.main()

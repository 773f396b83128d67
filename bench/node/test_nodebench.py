"""Unit tests of the benchmark helpers that compute reported numbers (no daemon needed).

python3 -m unittest discover -s bench/node -p 'test_*.py'
"""

from __future__ import annotations

import math
import unittest

from freeze_thaw import paired_round_trips
from nodebench.report import NOT_MEASURED, Row, Section, render_summary
from nodebench.stats import Histogram, metric_sum, parse_metrics, percentile

SCRAPE = """\
# HELP icebox_thaw_seconds Time to thaw an instance.
# TYPE icebox_thaw_seconds histogram
icebox_thaw_seconds_sum 0.0045
icebox_thaw_seconds_count 4
icebox_thaw_seconds_bucket{le="0.001"} 1
icebox_thaw_seconds_bucket{le="0.002"} 3
icebox_thaw_seconds_bucket{le="+Inf"} 4
icebox_invocations_total{start="cold",status="success"} 3
icebox_invocations_total{status="success",start="warm"} 5
icebox_invocations_total{start="warm",status="application error"} 2
# EOF
"""


class PercentileTest(unittest.TestCase):
    def test_interpolates_between_ranks(self):
        self.assertEqual(percentile([1, 2, 3, 4], 50), 2.5)
        self.assertEqual(percentile([4, 1, 3, 2], 0), 1)
        self.assertEqual(percentile([4, 1, 3, 2], 100), 4)
        self.assertAlmostEqual(percentile(list(range(101)), 90), 90)

    def test_rejects_no_samples(self):
        with self.assertRaises(ValueError):
            percentile([], 50)


class MetricsTest(unittest.TestCase):
    def test_labels_in_any_order_and_with_spaces(self):
        samples = parse_metrics(SCRAPE)
        self.assertEqual(metric_sum(samples, "icebox_invocations_total", start="warm"), 7)
        self.assertEqual(metric_sum(samples, "icebox_invocations_total", start="cold"), 3)
        self.assertEqual(metric_sum(samples, "icebox_invocations_total"), 10)

    def test_histogram_median_is_interpolated_inside_its_bucket(self):
        h = Histogram.from_samples(parse_metrics(SCRAPE), "icebox_thaw_seconds")
        # rank 2 of 4 lies halfway through the (1 ms, 2 ms] bucket, which holds ranks 2..3.
        self.assertAlmostEqual(h.quantile(0.5), 0.0015)
        # the first bucket interpolates from 0
        self.assertAlmostEqual(h.quantile(0.125), 0.0005)
        # a rank in the +Inf bucket answers the highest finite bound
        self.assertEqual(h.quantile(0.99), 0.002)
        self.assertAlmostEqual(h.mean(), 0.0045 / 4)

    def test_histogram_difference_keeps_only_new_observations(self):
        before = Histogram([(0.001, 1), (0.002, 1), (math.inf, 1)], 1, 0.0005)
        after = Histogram.from_samples(parse_metrics(SCRAPE), "icebox_thaw_seconds")
        delta = after.minus(before)
        self.assertEqual(delta.count, 3)
        self.assertEqual(delta.buckets, [(0.001, 0), (0.002, 2), (math.inf, 3)])
        self.assertAlmostEqual(delta.quantile(0.5), 0.00175)

    def test_empty_histogram_has_no_quantile(self):
        with self.assertRaises(ValueError):
            Histogram([(0.001, 0), (math.inf, 0)], 0, 0).quantile(0.5)


class RoundTripTest(unittest.TestCase):
    def test_pairs_a_freeze_with_the_next_thaw_of_the_same_instance(self):
        events = [
            {"seq": 1, "kind": "frozen", "instance": "a", "action": "guest/x", "detail": "100 us"},
            {"seq": 2, "kind": "frozen", "instance": "b", "action": "guest/y", "detail": "300 us"},
            {"seq": 3, "kind": "thawed", "instance": "a", "action": "guest/x", "detail": "50 us"},
            {"seq": 4, "kind": "run_start", "instance": "a", "action": "guest/x"},
            {"seq": 5, "kind": "thawed", "instance": "c", "action": "guest/x", "detail": "70 us"},
        ]
        freezes, thaws, trips = paired_round_trips(events)
        self.assertEqual(freezes["x"], [0.0001])
        self.assertEqual(thaws["x"], [0.00005, 0.00007])
        self.assertEqual([round(t, 9) for t in trips["x"]], [0.00015])
        self.assertNotIn("y", trips)


class SummaryTest(unittest.TestCase):
    def test_lists_judged_and_unmeasured_targets_only(self):
        s = Section(
            "Cold start",
            "",
            rows=[
                Row("python", "50 ms", target="≤ 60 ms", met=True),
                Row("java", NOT_MEASURED, target="≤ 200 ms"),
                Row("info", "1 ms"),
            ],
        )
        text = render_summary([s])
        self.assertIn("Cold start: python | 50 ms | ≤ 60 ms | met", text)
        self.assertIn("Cold start: java | not measured | ≤ 200 ms | not measured", text)
        self.assertNotIn("info", text)


if __name__ == "__main__":
    unittest.main()

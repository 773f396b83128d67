"""The warm latency report's thaw verdict: p50s are in milliseconds, and the target is a
call to a frozen instance at most 0.4 ms slower than one to an idle unfrozen instance. The
verdict compared milliseconds with 0.4e-3 (seconds) and said "missed" for +0.094 ms."""

from __future__ import annotations

import unittest

from nodebench.stats import Summary
from warm_latency import THAW_EXTRA_MS, thaw_met


class ThawVerdictTest(unittest.TestCase):
    def test_the_difference_of_two_p50s_is_judged_in_milliseconds(self):
        frozen = Summary.of_seconds([0.00174] * 3)
        idle = Summary.of_seconds([0.00165] * 3)
        self.assertTrue(thaw_met(frozen.p50 - idle.p50))
        self.assertFalse(thaw_met(Summary.of_seconds([0.0030]).p50 - idle.p50))
        self.assertTrue(thaw_met(THAW_EXTRA_MS))
        # A frozen path faster than the idle one (noise) meets it too.
        self.assertTrue(thaw_met(-0.2))


if __name__ == "__main__":
    unittest.main()

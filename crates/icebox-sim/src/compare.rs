//! Sweep comparison: each (sharing, technique, keep-alive) series' cold starts against cluster
//! memory (the thesis' Fig. 5.3), and how much memory a series needs to match the first
//! series' cold starts, read off the curves by linear interpolation.

use serde::Serialize;

/// One point of a series: cluster memory (GiB) and cold starts there.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Point {
    pub memory_gib: f64,
    pub cold_starts: u64,
    /// More than 1 % of the invocations waited in the queue: the cluster is saturated, and
    /// its cold-start count (queued calls that never start are not cold starts) says little.
    pub saturated: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Series {
    pub label: String,
    /// Sorted by memory.
    pub points: Vec<Point>,
}

#[derive(Debug, Clone, Serialize)]
pub struct EqualColdStarts {
    pub series: String,
    pub reference: String,
    pub reference_memory_gib: f64,
    pub cold_starts: u64,
    /// The least memory at which `series` has no more cold starts than the reference there;
    /// `None` when its curve never reaches that count in the swept range.
    pub memory_gib: Option<f64>,
    /// 1 - memory / reference memory.
    pub saving: Option<f64>,
    /// The reference point is saturated: no comparison.
    pub saturated: bool,
}

/// The smallest memory where the curve comes down to `target` cold starts, interpolating
/// linearly between swept points. `None` when even its largest memory has more.
pub fn memory_for(points: &[Point], target: u64) -> Option<f64> {
    let points: Vec<Point> = points.iter().copied().filter(|p| !p.saturated).collect();
    let first = points.first()?;
    if first.cold_starts <= target {
        // Already at or below the target at the smallest swept size: no information below it.
        return (first.cold_starts == target).then_some(first.memory_gib);
    }
    points.windows(2).find_map(|w| {
        let (a, b) = (w[0], w[1]);
        if a.cold_starts > target && b.cold_starts <= target {
            let (ca, cb) = (a.cold_starts as f64, b.cold_starts as f64);
            let frac = (ca - target as f64) / (ca - cb);
            Some(a.memory_gib + frac * (b.memory_gib - a.memory_gib))
        } else {
            None
        }
    })
}

pub fn equal_cold_starts(series: &[Series]) -> Vec<EqualColdStarts> {
    let Some(reference) = series.first() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for s in &series[1..] {
        for p in &reference.points {
            let m = if p.saturated {
                None
            } else {
                memory_for(&s.points, p.cold_starts)
            };
            out.push(EqualColdStarts {
                series: s.label.clone(),
                reference: reference.label.clone(),
                reference_memory_gib: p.memory_gib,
                cold_starts: p.cold_starts,
                memory_gib: m,
                saving: m.map(|m| 1.0 - m / p.memory_gib),
                saturated: p.saturated,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pts(v: &[(f64, u64)]) -> Vec<Point> {
        v.iter()
            .map(|&(memory_gib, cold_starts)| Point {
                memory_gib,
                cold_starts,
                saturated: false,
            })
            .collect()
    }

    #[test]
    fn interpolates_the_first_crossing() {
        let p = pts(&[(10.0, 100), (20.0, 50), (30.0, 10), (40.0, 10)]);
        assert_eq!(memory_for(&p, 75), Some(15.0));
        assert_eq!(memory_for(&p, 50), Some(20.0));
        assert_eq!(memory_for(&p, 10), Some(30.0));
        assert_eq!(memory_for(&p, 5), None);
        assert_eq!(memory_for(&p, 100), Some(10.0));
        assert_eq!(memory_for(&p, 200), None, "below the swept range");
        let mut q = p.clone();
        q[0].saturated = true;
        assert_eq!(
            memory_for(&q, 75),
            None,
            "saturated points are not on the curve"
        );
        assert_eq!(memory_for(&q, 30), Some(25.0));
    }

    #[test]
    fn savings_are_relative_to_the_first_series() {
        let shared = Series {
            label: "shared".into(),
            points: pts(&[(10.0, 100), (20.0, 40)]),
        };
        let isolate = Series {
            label: "isolate".into(),
            points: pts(&[(5.0, 100), (10.0, 40), (20.0, 10)]),
        };
        let eq = equal_cold_starts(&[shared, isolate]);
        assert_eq!(eq.len(), 2);
        assert_eq!(eq[0].memory_gib, Some(5.0));
        assert_eq!(eq[0].saving, Some(0.5));
        assert_eq!(eq[1].memory_gib, Some(10.0));
    }
}

"""Squeezy (Lagkas Nikolos et al., EuroSys '26) on the `vm-shared` backend: Fig. 5/6's reclaim
latency per memory mode (squeezy-fig5) and Fig. 10's tail latency under host memory pressure
(squeezy-fig10)."""

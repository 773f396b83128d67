"""Issue 10's evaluation of sharing modes (process, shared, isolate) on Node.js, after the
isolates thesis (ETH 2021, §4.1): memory profiles fitted as base + increment, memalloc latency
per mode, isolate start and teardown, the simulator profile and its validation."""

"""Shared helpers of the icebox node benchmarks (standard library only).

Each benchmark script in bench/node/ exposes `run() -> Section`; these modules start and stop
daemons and bare proxies, speak HTTP over TCP and UNIX sockets, read /proc, compute
statistics and render the markdown report.
"""

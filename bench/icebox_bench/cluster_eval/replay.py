"""The live half of the `cluster` recipe: the events replayed open-loop on a LiveCluster, each
invocation sent to the next node in turn (a plain load balancer: placement happens inside
icebox), every node's instance memory sampled each second, and each node's /metrics read at
the end."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from ..client import IceboxClient, IceboxError
from ..isolates_eval.actions import deploy, sharing_body
from ..manifest import FunctionSpec
from ..openloop import OpenLoop
from ..promtext import metric_sum, parse_metrics
from ..recorder import JsonlWriter, read_jsonl
from ..schedule import Timeline, build
from ..traces.model import TraceInvocation
from .analysis import live_summary, memory_time
from .nodes import LiveCluster


@dataclass
class ClusterPlan:
    invocations: list[TraceInvocation]
    actions: dict[str, tuple[str, str]]  # trace function -> (action, benchmark function)
    specs: dict[str, FunctionSpec]
    origin_s: float
    speed: float
    sharing: str
    concurrency: int
    tail_s: float
    size: str = "A"
    measure: str = "uss"
    drain_timeout_s: float = 120.0
    # How long every node may take to see an action deployed through the first one.
    propagation_timeout_s: float = 30.0


class RoundRobin:
    """The calls OpenLoop and invoke_once make, each sent to the next node in turn."""

    def __init__(self, clients: list[IceboxClient]):
        self.clients = clients
        self.sent = [0] * len(clients)
        self._turn = 0

    def _next(self) -> IceboxClient:
        k = self._turn % len(self.clients)
        self._turn += 1
        self.sent[k] += 1
        return self.clients[k]

    async def invoke(self, name: str, params: dict, **kw):
        return await self._next().invoke(name, params, **kw)

    async def activation(self, activation_id: str):
        # Any node serves any activation (the cluster's index): the next one does.
        return await self.clients[self._turn % len(self.clients)].activation(activation_id)

    async def health(self) -> dict:
        return await self.clients[0].health()


async def _visible_everywhere(clients: list[IceboxClient], actions: list[str], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    for k, client in enumerate(clients):
        for action in actions:
            while True:
                reply = await client.request("GET", client.action_path(action))
                if reply.status == 200:
                    break
                if time.monotonic() > deadline:
                    raise IceboxError(
                        f"node n{k + 1} does not see action {action} {timeout_s:.0f} s after it was deployed "
                        f"through n1 (GET answered {reply.status})"
                    )
                await asyncio.sleep(0.2)


async def _sample(
    clients: list[IceboxClient], measure: str, t0_s: float, out: list[list], stop: asyncio.Event, period_s: float = 1.0
) -> None:
    while not stop.is_set():
        for k, client in enumerate(clients):
            try:
                view = await client.memory()
                out[k].append((time.time() - t0_s, float((view.get("total") or {}).get(measure) or 0)))
            except IceboxError:
                pass
        try:
            await asyncio.wait_for(stop.wait(), period_s)
        except TimeoutError:
            pass


async def _node_metrics(client: IceboxClient) -> dict:
    reply = await client.request("GET", "/metrics")
    if reply.status != 200 or not isinstance(reply.body, str):
        return {}
    samples = parse_metrics(reply.body)
    return {
        "invocations": int(metric_sum(samples, "icebox_invocations_total")),
        "cold_starts": int(metric_sum(samples, "icebox_invocations_total", start="cold")),
    }


async def namespace_of(client: IceboxClient) -> str:
    names = await client.call("GET", "/api/v1/namespaces")
    if not isinstance(names, list) or not names:
        raise IceboxError(f"GET /api/v1/namespaces gave no namespace: {names!r}")
    return str(names[0])


async def replay(cluster: LiveCluster, plan: ClusterPlan, invocations: JsonlWriter, *, log=print) -> dict:
    """{"summary": live_summary(...), "per_node": [...], "namespace", "statuses", ...}."""
    clients = [IceboxClient(host, cluster.auth) for host in cluster.apihosts]
    for c in clients:
        await c.__aenter__()
    try:
        names = sorted({a for a, _ in plan.actions.values()})
        for action, bench in sorted(set(plan.actions.values())):
            await deploy(
                clients[0], action, sharing_body(plan.specs[bench], plan.sharing, concurrency=plan.concurrency)
            )
        await _visible_everywhere(clients, names, plan.propagation_timeout_s)
        namespace = await namespace_of(clients[0])
        log(f"deployed {len(names)} actions through n1; every node sees them")
        sched = build(
            plan.invocations,
            {t: a for t, (a, _) in plan.actions.items()},
            Timeline(origin_s=plan.origin_s, scale=plan.speed),
        )
        front = RoundRobin(clients)
        driver = OpenLoop(
            front,
            sched,
            invocations,
            params={a: plan.specs[b].input(plan.size) for a, b in plan.actions.values()},
            action_timeouts_ms={
                a: plan.specs[b].timeout_ms for a, b in plan.actions.values() if plan.specs[b].timeout_ms
            },
            drain_timeout_s=plan.drain_timeout_s,
            log=log,
        )
        samples: list[list] = [[] for _ in clients]
        stop = asyncio.Event()
        t0_s = time.time() + driver.start_delay_s
        sampler = asyncio.create_task(_sample(clients, plan.measure, t0_s, samples, stop))
        try:
            log(f"replaying {len(sched.items)} invocations over {sched.length_s():.0f} s on {len(clients)} nodes")
            result = await driver.run()
            remaining = sched.length_s() + plan.tail_s - (time.time() - t0_s)
            if remaining > 0:
                await asyncio.sleep(remaining)
        finally:
            stop.set()
            await sampler
        horizon_s = sched.length_s() + plan.tail_s
        metrics = [await _node_metrics(c) for c in clients]
        per_node = [
            {
                "node": node.node_id,
                "received": front.sent[k],
                **metrics[k],
                **memory_time(samples[k], 0.0, horizon_s),
            }
            for k, node in enumerate(cluster.nodes)
        ]
    finally:
        for c in clients:
            await c.close()
    records = [r for r in read_jsonl(invocations.path) if r.get("function") in set(names)]
    return {
        "namespace": namespace,
        "summary": live_summary(records),
        "per_node": per_node,
        "statuses": result.to_json()["statuses"],
        "lag_ms": result.lag_ms,
        "horizon_s": horizon_s,
        "memory_samples": samples,
    }

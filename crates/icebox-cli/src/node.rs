//! `icebox instances`, `icebox memory`, `icebox health`: the node API (`/icebox/v1`).

use crate::client::Client;
use crate::error::{CliError, Result};
use crate::output::{emit, emit_json, emit_line};
use crate::table::{self, size, Align, Table};
use icebox_core::api::{Health, InstanceView, MemoryView};
use icebox_core::InstanceState;
use serde::de::DeserializeOwned;
use serde_json::Value;

const API: &str = "/icebox/v1";

/// With --json the daemon's answer is printed untouched, so scripts see every field even
/// when this CLI is older than the daemon; people get the typed view.
fn typed<T: DeserializeOwned>(body: Value, endpoint: &str) -> Result<T> {
    serde_json::from_value(body).map_err(|e| {
        CliError::failed(format!(
            "iceboxd's answer to {API}/{endpoint} does not match this CLI ({e}); \
             use an icebox CLI of the daemon's version, or --json for the raw answer"
        ))
    })
}

pub fn instances(client: &Client, json_out: bool) -> Result<()> {
    let body = client.get(format!("{API}/instances")).send()?;
    if json_out {
        emit_json(&body);
        return Ok(());
    }
    let list: Vec<InstanceView> = typed(body, "instances")?;
    if list.is_empty() {
        emit_line("no instances; invoking an action starts one (`icebox action invoke NAME`)");
        return Ok(());
    }
    emit(&instances_table(&list));
    Ok(())
}

pub fn instances_table(list: &[InstanceView]) -> String {
    let mut t = Table::new(&[
        ("ID", Align::Left),
        ("ACTION", Align::Left),
        ("STATE", Align::Left),
        ("PIDS", Align::Left),
        ("AGE", Align::Right),
        ("IDLE", Align::Right),
        ("INVOKES", Align::Right),
        ("SHARING", Align::Left),
        ("SANDBOX", Align::Left),
        ("USS", Align::Right),
        ("PSS", Align::Right),
        ("RSS", Align::Right),
        ("SWAP", Align::Right),
        ("LOCAL", Align::Right),
        ("CHARGED", Align::Right),
        ("TECHNIQUES", Align::Left),
    ]);
    for i in list {
        let pids = if i.pids.is_empty() {
            "-".to_string()
        } else {
            i.pids
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        t.push(vec![
            i.id.clone(),
            i.action.clone(),
            i.state.to_string(),
            pids,
            table::duration_ms(i.age_ms),
            i.idle_ms
                .map(table::duration_ms)
                .unwrap_or_else(|| "-".into()),
            invokes_cell(i),
            sharing_cell(i),
            sandbox_cell(i),
            size(i.memory.uss),
            size(i.memory.pss),
            size(i.memory.rss),
            size(i.memory.swap),
            size(i.offload.local_bytes),
            size(i.charged),
            techniques_cell(i),
        ]);
    }
    t.render()
}

/// The techniques chosen for its action ("reclaim,offload"; `none`; `-` from a daemon without
/// the choice, or a stem cell, which has no action yet). `icebox instances --json` has the
/// reasons.
fn techniques_cell(i: &InstanceView) -> String {
    match &i.techniques {
        Some(t) if t.on.is_empty() => "none".into(),
        Some(t) => t.on.join(","),
        None => "-".into(),
    }
}

/// The backend, and how the instance was restored when it came from a snapshot
/// ("crun+faasnap").
fn sandbox_cell(i: &InstanceView) -> String {
    let backend = if i.isolation.is_empty() {
        "-"
    } else {
        &i.isolation
    };
    match i.restored {
        Some(mode) => format!("{backend}+{}", mode.as_str()),
        None => backend.to_string(),
    }
}

/// Activations it finished, and with "+N" those running on it now ("17+3").
fn invokes_cell(i: &InstanceView) -> String {
    if i.in_flight > 0 {
        format!("{}+{}", i.invocations, i.in_flight)
    } else {
        i.invocations.to_string()
    }
}

/// The mode, and for runtimes that share one process the busy/live isolates or contexts
/// ("isolate 2/3"). Busy is the daemon's count of activations running now: the runtime's own
/// account is only asked for when an activation ends, so during a burst it is behind.
fn sharing_cell(i: &InstanceView) -> String {
    let mode = if i.sharing_mode.is_empty() {
        "process"
    } else {
        &i.sharing_mode
    };
    let counts = i.sharing.as_ref().and_then(|s| {
        let group = s.get("isolates").or_else(|| s.get("contexts"))?;
        let live = group.get("live").and_then(serde_json::Value::as_u64)?;
        let busy = u64::from(i.in_flight);
        Some(format!("{busy}/{}", live.max(busy)))
    });
    match counts {
        Some(c) => format!("{mode} {c}"),
        None => mode.to_string(),
    }
}

pub fn memory(client: &Client, json_out: bool) -> Result<()> {
    let body = client.get(format!("{API}/memory")).send()?;
    if json_out {
        emit_json(&body);
        return Ok(());
    }
    let view: MemoryView = typed(body, "memory")?;
    let list: Vec<InstanceView> =
        typed(client.get(format!("{API}/instances")).send()?, "instances")?;
    let mut out = memory_report(&view);
    for table in [
        reclaimable_table(&list),
        crate::offload::offload_table(&list),
    ] {
        if !table.is_empty() {
            out.push_str("\n\n");
            out.push_str(&table);
        }
    }
    emit(&out);
    Ok(())
}

/// Idle and frozen instances with what a reclaim is expected to free (Desiccant's estimate
/// from earlier reclaims of the instance, its action, or all instances).
pub fn reclaimable_table(list: &[InstanceView]) -> String {
    let idle: Vec<&InstanceView> = list.iter().filter(|i| i.state.is_kept_alive()).collect();
    if idle.is_empty() {
        return String::new();
    }
    let mut t = Table::new(&[
        ("IDLE INSTANCE", Align::Left),
        ("ACTION", Align::Left),
        ("STATE", Align::Left),
        ("MODE", Align::Left),
        ("USS", Align::Right),
        ("CHARGED", Align::Right),
        ("RECLAIMABLE", Align::Right),
    ]);
    for i in idle {
        t.push(vec![
            i.id.clone(),
            i.action.clone(),
            i.state.to_string(),
            i.reclaim_mode.clone(),
            size(i.memory.uss),
            size(i.charged),
            i.reclaimable.map(size).unwrap_or_else(|| "-".into()),
        ]);
    }
    t.render()
}

/// `icebox reclaim [INSTANCE]`: reclaim one idle instance, or every idle one.
pub fn reclaim(
    client: &Client,
    json_out: bool,
    instance: Option<String>,
    variant: Option<String>,
) -> Result<()> {
    let ids: Vec<String> = match instance {
        Some(id) => vec![id],
        None => {
            let list: Vec<InstanceView> =
                typed(client.get(format!("{API}/instances")).send()?, "instances")?;
            list.into_iter()
                .filter(|i| i.state.is_kept_alive())
                .map(|i| i.id)
                .collect()
        }
    };
    if ids.is_empty() && !json_out {
        emit_line("no idle instances to reclaim");
    }
    let mut reports = Vec::new();
    for id in ids {
        let mut call = client
            .post(format!(
                "{API}/instances/{}/reclaim",
                crate::client::segment(&id)
            ))
            .explain(
                404,
                format!("there is no instance {id} (see `icebox instances`)"),
            )
            .explain(
                409,
                format!(
                    "instance {id} is busy: it is running an activation or already being reclaimed"
                ),
            );
        if let Some(v) = &variant {
            call = call.query("variant", v);
        }
        let report = call.send()?;
        if !json_out {
            emit_line(&format!(
                "{id}: uss {} -> {} (freed {}), runtime cpu {} ms, library page-out {}, variant {}",
                size(report["uss_before"].as_u64().unwrap_or(0)),
                size(report["uss_after"].as_u64().unwrap_or(0)),
                size(report["freed"].as_u64().unwrap_or(0)),
                report["cpu_ms"]
                    .as_f64()
                    .map(|c| format!("{c:.1}"))
                    .unwrap_or_else(|| "-".into()),
                size(report["pageout_bytes"].as_u64().unwrap_or(0)),
                report["variant"].as_str().unwrap_or("?"),
            ));
        }
        reports.push(report);
    }
    if json_out {
        emit_json(&Value::Array(reports));
    }
    Ok(())
}

/// `icebox evict ID`: stop an idle instance now and give its memory back.
pub fn evict(client: &Client, json_out: bool, id: String) -> Result<()> {
    let reply = client
        .delete(format!("{API}/instances/{}", crate::client::segment(&id)))
        .explain(
            404,
            format!("there is no instance {id} (see `icebox instances`)"),
        )
        .explain(
            409,
            format!("instance {id} is running an activation; evict it once it is idle"),
        )
        .send()?;
    if json_out {
        emit_json(&reply);
    } else {
        emit_line(&format!("ok: evicted instance {id}"));
    }
    Ok(())
}

pub fn memory_report(v: &MemoryView) -> String {
    let charge = serde_json::to_value(v.charge_mode)
        .ok()
        .and_then(|c| c.as_str().map(str::to_string))
        .unwrap_or_default();
    let share = if v.budget > 0 {
        format!(
            " ({:.1}% of the budget)",
            v.charged as f64 * 100.0 / v.budget as f64
        )
    } else {
        String::new()
    };
    let max = if v.max_instances == 0 {
        "no limit".to_string()
    } else {
        v.max_instances.to_string()
    };
    let mut out = format!(
        "budget         {} (idle and frozen instances, charged by {charge})\n\
         charged        {}{share}\n\
         local          {} (USS + the offload pool's RAM for swapped pages)\n\
         offload pool   {}\n\
         max instances  {max}\n\n",
        size(v.budget),
        size(v.charged),
        size(v.local),
        crate::offload::pool_line(&v.pool)
    );
    let mut t = Table::new(&[
        ("STATE", Align::Left),
        ("INSTANCES", Align::Right),
        ("USS", Align::Right),
        ("PSS", Align::Right),
        ("RSS", Align::Right),
        ("SWAP", Align::Right),
        ("CGROUP", Align::Right),
    ]);
    // Lifecycle order reads better than the map's alphabetical one; unknown states follow.
    let known: Vec<&str> = InstanceState::ALL.iter().map(|s| s.as_str()).collect();
    let ordered = known
        .iter()
        .filter_map(|s| v.by_state.get_key_value(*s))
        .chain(
            v.by_state
                .iter()
                .filter(|(k, _)| !known.contains(&k.as_str())),
        );
    let mut total_instances = 0;
    for (state, sm) in ordered {
        total_instances += sm.instances;
        t.push(vec![
            state.clone(),
            sm.instances.to_string(),
            size(sm.memory.uss),
            size(sm.memory.pss),
            size(sm.memory.rss),
            size(sm.memory.swap),
            size(sm.memory.cgroup),
        ]);
    }
    t.push(vec![
        "total".into(),
        total_instances.to_string(),
        size(v.total.uss),
        size(v.total.pss),
        size(v.total.rss),
        size(v.total.swap),
        size(v.total.cgroup),
    ]);
    out.push_str(&t.render());
    out
}

pub fn health(client: &Client, json_out: bool) -> Result<()> {
    let body = client.get(format!("{API}/health")).without_auth().send()?;
    if json_out {
        emit_json(&body);
        return Ok(());
    }
    let h: Health = typed(body, "health")?;
    emit_line(&health_line(&h, client.apihost()));
    Ok(())
}

pub fn health_line(h: &Health, apihost: &str) -> String {
    let isolation = if h.isolation == "none" {
        "NO isolation (not root: no namespaces or cgroups)".to_string()
    } else {
        format!("isolation {} with cgroup {}", h.isolation, h.cgroup)
    };
    // A degraded node says why, first: that is what the operator must act on.
    let status = match &h.reason {
        Some(reason) => format!("{} ({reason})", h.status),
        None => h.status.clone(),
    };
    let vms: Vec<String> = h
        .isolations
        .iter()
        .filter(|i| i.isolation != "process")
        .map(|i| match &i.unavailable {
            Some(_) => format!("{}: unavailable", i.isolation),
            None => format!("{}: yes", i.isolation),
        })
        .collect();
    let default = match h.default_isolation.as_str() {
        "" | "process" => String::new(),
        other => format!(" · default isolation {other}"),
    };
    let vms = if vms.is_empty() {
        String::new()
    } else {
        format!(" ({})", vms.join(", "))
    };
    format!(
        "iceboxd {} at {apihost}: {status} · up {} · {isolation}{vms}{default} · {} instance{}",
        h.version,
        table::duration_ms(h.uptime_s * 1000),
        h.instances,
        if h.instances == 1 { "" } else { "s" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use icebox_core::api::StateMemory;
    use icebox_core::{ChargeMode, MemoryStats};
    use std::collections::BTreeMap;

    use icebox_core::units::MIB;

    fn stats(mib: u64) -> MemoryStats {
        MemoryStats {
            uss: mib * MIB,
            pss: mib * MIB + MIB / 2,
            rss: 2 * mib * MIB,
            swap: 0,
            cgroup: 3 * mib * MIB,
        }
    }

    #[test]
    fn instances_table_columns() {
        let list = vec![InstanceView {
            id: "i-7f3a".into(),
            action: "guest/hello".into(),
            kind: "python:3".into(),
            state: InstanceState::Frozen,
            pids: vec![4242, 4243],
            age_ms: 185_000,
            idle_ms: Some(2_500),
            invocations: 17,
            in_flight: 0,
            memory_limit: 256 * MIB,
            memory: stats(9),
            charged: 9 * MIB,
            measured_at_ms: 0,
            reclaimable: Some(4 * MIB),
            reclaim_mode: "desiccant".into(),
            offload: Default::default(),
            sharing_mode: "process".into(),
            sharing: None,
            isolation: "crun".into(),
            restored: None,
            restore_stats: None,
            techniques: None,
        }];
        let reclaimable = reclaimable_table(&list);
        assert!(reclaimable.contains("desiccant"), "{reclaimable}");
        assert!(reclaimable.contains("4.0 MiB"), "{reclaimable}");
        assert_eq!(
            instances_table(&list),
            "ID      ACTION       STATE   PIDS         AGE  IDLE  INVOKES  SHARING  SANDBOX      USS      PSS       RSS  SWAP  LOCAL  CHARGED  TECHNIQUES\n\
             i-7f3a  guest/hello  frozen  4242,4243  3m05s  2.5s       17  process  crun     9.0 MiB  9.5 MiB  18.0 MiB     0      0  9.0 MiB  -\n"
        );
        let mut chosen = list[0].clone();
        chosen.techniques = Some(icebox_core::api::TechniquesView {
            mode: "auto".into(),
            on: vec!["reclaim".into(), "offload".into()],
            ..Default::default()
        });
        assert_eq!(techniques_cell(&chosen), "reclaim,offload");
        chosen.techniques.as_mut().unwrap().on.clear();
        assert_eq!(techniques_cell(&chosen), "none");
    }

    #[test]
    fn sharing_cell_shows_busy_and_live_isolates_or_contexts() {
        let mut i: InstanceView = serde_json::from_value(serde_json::json!({
            "id": "i", "action": "a", "kind": "nodejs:20", "state": "running", "pids": [],
            "age_ms": 0, "idle_ms": null, "invocations": 0, "in_flight": 2,
            "memory_limit": 0, "memory": {"uss": 0, "pss": 0, "rss": 0, "swap": 0, "cgroup": 0},
            "charged": 0, "measured_at_ms": 0, "sharing_mode": "isolate",
            "sharing": {"mode": "isolate", "isolates": {"live": 3, "busy": 2, "idle": 1}}
        }))
        .unwrap();
        assert_eq!(sharing_cell(&i), "isolate 2/3");
        // The runtime's account is from the last activation's end; 8 run now.
        i.sharing =
            Some(serde_json::json!({"mode": "isolate", "isolates": {"live": 1, "busy": 0}}));
        i.in_flight = 8;
        i.invocations = 1;
        assert_eq!(sharing_cell(&i), "isolate 8/8");
        assert_eq!(invokes_cell(&i), "1+8");
        i.in_flight = 1;
        i.sharing = Some(serde_json::json!({"mode": "shared", "contexts": {"live": 4, "busy": 1}}));
        i.sharing_mode = "shared".into();
        assert_eq!(sharing_cell(&i), "shared 1/4");
        i.sharing = None;
        assert_eq!(sharing_cell(&i), "shared");
        // A daemon from before sharing modes sends neither field.
        i.sharing_mode = String::new();
        assert_eq!(sharing_cell(&i), "process");
    }

    #[test]
    fn instances_from_daemon_json() {
        // The node API's wire format, as docs/api/openapi.yaml specifies it.
        let body = serde_json::json!([{
            "id": "i-1", "action": "guest/a", "kind": "nodejs:20", "state": "running", "pids": [],
            "age_ms": 10, "idle_ms": null, "invocations": 1, "in_flight": 1, "memory_limit": 268435456,
            "memory": {"uss": 0, "pss": 0, "rss": 0, "swap": 0, "cgroup": 0}, "charged": 0, "measured_at_ms": 5
        }]);
        let list: Vec<InstanceView> = typed(body, "instances").unwrap();
        let table = instances_table(&list);
        assert!(
            table
                .lines()
                .nth(1)
                .unwrap()
                .starts_with("i-1  guest/a  running  -     10ms     -"),
            "{table}"
        );
        assert!(matches!(
            typed::<Vec<InstanceView>>(serde_json::json!([{"id": 1}]), "instances"),
            Err(CliError::Failed(_))
        ));
    }

    #[test]
    fn memory_report_in_lifecycle_order() {
        let mut by_state = BTreeMap::new();
        by_state.insert(
            "idle".to_string(),
            StateMemory {
                instances: 1,
                memory: stats(10),
            },
        );
        by_state.insert(
            "frozen".to_string(),
            StateMemory {
                instances: 2,
                memory: stats(20),
            },
        );
        let view = MemoryView {
            budget: 2048 * MIB,
            charge_mode: ChargeMode::Uss,
            charged: 30 * MIB,
            by_state,
            total: stats(30),
            max_instances: 0,
            local: 30 * MIB,
            pool: Default::default(),
        };
        assert_eq!(
            memory_report(&view),
            "budget         2.00 GiB (idle and frozen instances, charged by uss)\n\
             charged        30.0 MiB (1.5% of the budget)\n\
             local          30.0 MiB (USS + the offload pool's RAM for swapped pages)\n\
             offload pool   none (nothing is offloaded; --offload-pool zram:SIZE or swap)\n\
             max instances  no limit\n\
             \n\
             STATE   INSTANCES       USS       PSS       RSS  SWAP    CGROUP\n\
             idle            1  10.0 MiB  10.5 MiB  20.0 MiB     0  30.0 MiB\n\
             frozen          2  20.0 MiB  20.5 MiB  40.0 MiB     0  60.0 MiB\n\
             total           3  30.0 MiB  30.5 MiB  60.0 MiB     0  90.0 MiB\n"
        );
    }

    #[test]
    fn health_says_why_it_is_degraded() {
        let h = Health {
            status: "degraded".into(),
            reason: Some("3 activation records are not written yet: disk full".into()),
            version: "0.1.0".into(),
            uptime_s: 5,
            isolation: "crun".into(),
            cgroup: "v1".into(),
            instances: 1,
            default_isolation: "process".into(),
            isolations: vec![],
            registry: None,
            code: None,
        };
        let line = health_line(&h, "http://127.0.0.1:8740");
        assert!(
            line.contains(": degraded (3 activation records are not written yet: disk full) · up"),
            "{line}"
        );
    }

    #[test]
    fn health_names_the_vm_isolations_and_a_vm_default() {
        let iso = |isolation: &str, unavailable: Option<&str>| icebox_core::api::IsolationView {
            isolation: isolation.into(),
            backend: unavailable.is_none().then(|| isolation.into()),
            unavailable: unavailable.map(str::to_string),
            snapshots: false,
        };
        let h = Health {
            status: "ok".into(),
            reason: None,
            version: "0.1.0".into(),
            uptime_s: 1,
            isolation: "crun".into(),
            cgroup: "v1".into(),
            instances: 0,
            default_isolation: "vm".into(),
            isolations: vec![
                iso("process", None),
                iso("vm", None),
                iso("vm-shared", Some("no guest image")),
            ],
            registry: None,
            code: None,
        };
        let line = health_line(&h, "http://x");
        assert!(
            line.contains(
                "isolation crun with cgroup v1 (vm: yes, vm-shared: unavailable) · default isolation vm"
            ),
            "{line}"
        );
    }

    #[test]
    fn a_restored_instance_says_how() {
        let mut i: InstanceView = serde_json::from_value(serde_json::json!({
            "id": "i", "action": "guest/a", "kind": "python:3", "state": "idle", "pids": [],
            "age_ms": 0, "idle_ms": null, "invocations": 0, "in_flight": 0, "memory_limit": 0,
            "memory": {"uss": 0, "pss": 0, "rss": 0, "swap": 0, "cgroup": 0}, "charged": 0,
            "measured_at_ms": 0, "isolation": "crun", "restored": "faasnap"
        }))
        .unwrap();
        assert_eq!(sandbox_cell(&i), "crun+faasnap");
        i.restored = None;
        i.isolation = "vm".into();
        assert_eq!(sandbox_cell(&i), "vm");
    }

    #[test]
    fn health_says_when_unisolated() {
        let h = Health {
            status: "ok".into(),
            reason: None,
            version: "0.1.0".into(),
            uptime_s: 192,
            isolation: "none".into(),
            cgroup: "none".into(),
            instances: 5,
            default_isolation: "process".into(),
            isolations: vec![],
            registry: None,
            code: None,
        };
        let line = health_line(&h, "http://127.0.0.1:8740");
        assert!(
            line.starts_with(
                "iceboxd 0.1.0 at http://127.0.0.1:8740: ok · up 3m12s · NO isolation"
            ),
            "{line}"
        );
    }
}

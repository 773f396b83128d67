//! `icebox cluster`: the nodes of the cluster the daemon belongs to, as it sees them.

use crate::client::Client;
use crate::error::Result;
use crate::output::{emit, emit_json};
use crate::table::{size, Align, Table};
use serde_json::Value;

const API: &str = "/icebox/v1";

pub fn show(client: &Client, json_out: bool) -> Result<()> {
    let body: Value = client.get(format!("{API}/cluster")).send()?;
    if json_out {
        emit_json(&body);
        return Ok(());
    }
    emit(&report(&body));
    Ok(())
}

fn report(view: &Value) -> String {
    let mut out = format!(
        "cluster at prefix {} seen from node {}: {} (placement {})\n",
        view["prefix"].as_str().unwrap_or("?"),
        view["node"].as_str().unwrap_or("?"),
        view["state"].as_str().unwrap_or("?"),
        view["placement"].as_str().unwrap_or("?"),
    );
    if let Some(reason) = view["reason"].as_str() {
        out.push_str(&format!("  {reason}\n"));
    }
    let mut t = Table::new(&[
        ("NODE", Align::Left),
        ("URL", Align::Left),
        ("INSTANCES", Align::Right),
        ("WARM", Align::Right),
        ("IN FLIGHT", Align::Right),
        ("CHARGED", Align::Right),
        ("BUDGET", Align::Right),
        ("FREE", Align::Right),
        ("WARM ACTIONS", Align::Left),
    ]);
    let empty = Vec::new();
    for n in view["nodes"].as_array().unwrap_or(&empty) {
        let number = |k: &str| n[k].as_u64().unwrap_or(0);
        let actions: Vec<&str> = n["warm_actions"]
            .as_array()
            .unwrap_or(&empty)
            .iter()
            .filter_map(Value::as_str)
            .collect();
        t.push(vec![
            n["id"].as_str().unwrap_or("?").to_string(),
            n["url"].as_str().unwrap_or("?").to_string(),
            number("instances").to_string(),
            number("warm").to_string(),
            number("in_flight").to_string(),
            size(number("charged")),
            size(number("budget")),
            size(number("free")),
            actions.join(","),
        ]);
    }
    out.push_str(&t.render());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_report_lists_every_node_with_its_warm_actions() {
        let view = json!({
            "node": "n1", "prefix": "/icebox", "state": "ok", "placement": "warm-home",
            "nodes": [
                {"id": "n1", "url": "http://a:1", "instances": 2, "warm": 1, "in_flight": 1,
                 "charged": 1048576, "budget": 2147483648u64, "free": 2146435072u64,
                 "warm_actions": ["guest/hello"]},
                {"id": "n2", "url": "http://b:1", "instances": 0, "warm": 0, "in_flight": 0,
                 "charged": 0, "budget": 2147483648u64, "free": 2147483648u64, "warm_actions": []}
            ]
        });
        let text = report(&view);
        assert!(
            text.contains("seen from node n1: ok (placement warm-home)"),
            "{text}"
        );
        assert!(text.contains("guest/hello"), "{text}");
        assert_eq!(
            text.lines().filter(|l| l.contains("http://")).count(),
            2,
            "{text}"
        );
    }
}

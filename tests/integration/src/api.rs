//! The daemon's HTTP API as tests use it: requests that return every status as a value,
//! and shortcuts for deploying, invoking and reading the node views.

use crate::activation::Activation;
use crate::daemon::{Daemon, AUTH};
use crate::http::{Auth, Reply};
use crate::util::tail;
use serde_json::{json, Value};

impl Daemon {
    /// Any request; panics (with the daemon log) when no answer comes back at all.
    pub fn request(&self, method: &str, path: &str, auth: Auth<'_>, body: Option<&[u8]>) -> Reply {
        self.http
            .send(method, path, auth, body)
            .unwrap_or_else(|e| panic!("{e}\niceboxd log:\n{}", tail(&self.log_text(), 80)))
    }

    /// An authenticated GET.
    pub fn get(&self, path: &str) -> Reply {
        self.request("GET", path, Auth::Key(AUTH), None)
    }

    pub fn get_json(&self, path: &str) -> Value {
        self.get(path).expect(200).json()
    }

    /// PUT an action with any body; the answer as it is.
    pub fn put_action(&self, name: &str, body: &Value) -> Reply {
        let bytes = serde_json::to_vec(body).expect("json");
        self.request("PUT", &action_path(name), Auth::Key(AUTH), Some(&bytes))
    }

    /// Deploy source code; panics unless the daemon accepts it.
    pub fn deploy(&self, name: &str, kind: &str, code: &str, limits: Value) -> Value {
        self.put_action(
            name,
            &json!({"exec": {"kind": kind, "code": code}, "limits": limits}),
        )
        .expect(200)
        .json()
    }

    /// `echo`: a Python action that returns its parameters.
    pub fn deploy_echo(&self) -> Value {
        self.deploy(
            "echo",
            "python:3",
            "def main(args):\n    return args\n",
            json!({}),
        )
    }

    /// Invoke with raw query and body; the answer as it is.
    pub fn invoke_raw(&self, name: &str, query: &str, body: &[u8]) -> Reply {
        self.request(
            "POST",
            &format!("{}?{query}", action_path(name)),
            Auth::Key(AUTH),
            Some(body),
        )
    }

    /// A blocking invocation; panics unless it produced an activation record (200 or 502).
    pub fn invoke(&self, name: &str, params: Value) -> Activation {
        let reply = self.invoke_raw(
            name,
            "blocking=true",
            &serde_json::to_vec(&params).expect("json"),
        );
        assert!(
            reply.status == 200 || reply.status == 502,
            "invoking {name}: expected an activation record (HTTP 200 or 502), got {}: {}",
            reply.status,
            reply.body
        );
        Activation {
            record: reply.json(),
            http_status: reply.status,
        }
    }

    pub fn activation(&self, id: &str) -> Activation {
        Activation {
            record: self.get_json(&format!("/api/v1/namespaces/_/activations/{id}")),
            http_status: 0,
        }
    }

    /// /icebox/v1/instances.
    pub fn instances(&self) -> Vec<Value> {
        self.get_json("/icebox/v1/instances")
            .as_array()
            .cloned()
            .expect("instances is an array")
    }

    pub fn instance(&self, id: &str) -> Option<Value> {
        self.instances().into_iter().find(|i| i["id"] == id)
    }

    /// Every retained lifecycle event (`since=0&follow=false`).
    pub fn events(&self) -> Vec<Value> {
        let reply = self
            .get("/icebox/v1/events?since=0&follow=false")
            .expect(200);
        parse_sse(&reply.body)
    }

    pub fn events_of(&self, instance: &str) -> Vec<Value> {
        self.events()
            .into_iter()
            .filter(|e| e["instance"] == instance)
            .collect()
    }

    pub fn assert_healthy(&self) {
        let health = self
            .request("GET", "/icebox/v1/health", Auth::None, None)
            .expect(200)
            .json();
        assert_eq!(health["status"], "ok", "{health}");
    }
}

/// `/api/v1/namespaces/_/actions/NAME`.
pub fn action_path(name: &str) -> String {
    format!("/api/v1/namespaces/_/actions/{name}")
}

/// The `data:` payloads of a server-sent event stream, as JSON.
pub fn parse_sse(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| {
            serde_json::from_str(d.trim())
                .unwrap_or_else(|e| panic!("event data is not JSON ({e}): {d}"))
        })
        .collect()
}

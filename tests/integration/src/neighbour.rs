//! A healthy action deployed beside a misbehaving one: after each bad input it must still
//! answer, warm, from the very same instance (the daemon did not crash, and nothing the bad
//! action did reached it).

use crate::daemon::Daemon;
use crate::paths;
use serde_json::json;

pub struct Neighbour {
    pub name: String,
    pub instance: String,
}

impl Neighbour {
    /// Deploys examples/python/hello.py as `neighbour` and runs it once (its cold start).
    pub fn deploy(daemon: &Daemon) -> Neighbour {
        let code =
            std::fs::read_to_string(paths::workspace_root().join("examples/python/hello.py"))
                .expect("examples/python/hello.py");
        daemon.deploy("neighbour", "python:3", &code, json!({"memory": 128}));
        let first = daemon
            .invoke("neighbour", json!({"name": "neighbour"}))
            .expect_success();
        assert_eq!(first.start_kind(), "cold");
        Neighbour {
            name: "neighbour".into(),
            instance: first.instance().to_string(),
        }
    }

    /// The daemon is healthy and the neighbour answers, warm, from the same instance.
    #[track_caller]
    pub fn check(&self, daemon: &Daemon) {
        daemon.assert_healthy();
        let again = daemon
            .invoke(&self.name, json!({"name": "again"}))
            .expect_success();
        assert_eq!(
            again.result()["greeting"],
            "Hello, again!",
            "{:#}",
            again.record
        );
        assert_eq!(
            again.start_kind(),
            "warm",
            "the neighbour lost its warm instance: {:#}",
            again.record
        );
        assert_eq!(
            again.instance(),
            self.instance,
            "the neighbour's instance was replaced"
        );
    }
}

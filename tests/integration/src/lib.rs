//! Harness for icebox's integration tests. They drive the real release binaries (`iceboxd`,
//! `icebox`) and the real action runtimes under crun and cgroups, the way a user would: each
//! test starts its own daemon (own state directory, own port), talks to it over HTTP or
//! through the CLI, and on shutdown checks that no process or cgroup of it is left.
//!
//! Binaries come from `$ICEBOX_BIN_DIR` (default `<workspace>/target/release`); build them
//! first with `cargo build --release` (`make test` does).

mod activation;
mod api;
mod cli;
mod daemon;
mod etcd;
mod http;
pub mod leaks;
mod neighbour;
pub mod paths;
mod refused;
mod state_dir;
mod util;

pub use activation::Activation;
pub use api::{action_path, parse_sse};
pub use cli::CliOutput;
pub use daemon::{Daemon, AUTH, NAMESPACE};
pub use etcd::{Etcd, Haproxy};
pub use http::{basic, Auth, Http, Reply};
pub use neighbour::Neighbour;
pub use refused::{refused_start, refused_start_with_auth};
pub use state_dir::StateDir;
pub use util::{tail, wait_for};

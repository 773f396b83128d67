//! `icebox`: the command-line client of iceboxd.

// This crate makes no syscall of its own: forbidding unsafe keeps all unsafe code in the
// crates that talk to the kernel, where each block is reviewed with its SAFETY comment.
#![forbid(unsafe_code)]

mod action;
mod activation;
mod client;
mod cluster;
mod config;
mod error;
mod events;
mod node;
mod offload;
mod output;
mod params;
mod snapshot;
mod table;
mod tenants;

use clap::{Parser, Subcommand};
use error::CliError;
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "icebox",
    version,
    about = "Deploy and invoke functions on an iceboxd node, and watch its instances and memory",
    after_help = TOUR
)]
struct Cli {
    /// iceboxd's address [env: ICEBOX_APIHOST; config: APIHOST=; default: http://127.0.0.1:8740]
    #[arg(long, global = true, value_name = "URL", help_heading = GLOBAL)]
    apihost: Option<String>,
    /// API key uuid:key, as in <state-dir>/auth [env: ICEBOX_AUTH; config: AUTH=]
    #[arg(long, global = true, value_name = "UUID:KEY", help_heading = GLOBAL)]
    auth: Option<String>,
    /// Print the API's JSON answer instead of tables and summaries (for scripts)
    #[arg(long, global = true, help_heading = GLOBAL)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

const GLOBAL: &str = "Global options";

const TOUR: &str = "\
Settings come from the flags, else ICEBOX_APIHOST / ICEBOX_AUTH, else ~/.config/icebox/config
(lines APIHOST=... and AUTH=uuid:key). iceboxd writes its key to <state-dir>/auth; under
`make run`: export ICEBOX_AUTH=$(cat var/auth)

Tour:
  icebox action create hello examples/python/hello.py
  icebox action invoke hello -p name Ada
  icebox instances
  icebox memory
  icebox events --follow

Exit status: 0 ok, 1 failure (including a failed activation), 2 wrong usage.";

#[derive(Debug, Subcommand)]
enum Command {
    /// Deploy, list, inspect, delete and invoke actions
    #[command(subcommand)]
    Action(action::ActionCommand),
    /// Inspect activation records, results and logs
    #[command(subcommand)]
    Activation(activation::ActivationCommand),
    /// List the node's live instances with their state and measured memory
    Instances,
    /// Show the keep-alive memory budget, what is charged against it, and memory by state
    Memory,
    /// Print instance lifecycle events (retained ones; with --follow also live ones)
    Events(events::EventsArgs),
    /// Check that iceboxd is up (needs no API key)
    Health,
    /// The cluster's nodes: their memory, load and warm instances (admin key)
    Cluster,
    /// Action snapshots: list them, build one now, discard one
    #[command(subcommand)]
    Snapshot(snapshot::SnapshotCommand),
    /// Tenants: create, list, update and delete namespaces (admin key)
    #[command(subcommand)]
    Namespace(tenants::NamespaceCommand),
    /// API keys of namespaces: create and revoke them (admin key)
    #[command(subcommand)]
    Key(tenants::KeyCommand),
    /// Evict an idle instance now: its processes end and its memory goes back to the node
    Evict {
        /// Instance id (see `icebox instances`)
        instance: String,
    },
    /// Reclaim frozen garbage of an idle instance now (every idle instance without INSTANCE)
    Reclaim {
        /// Instance id (see `icebox instances`)
        instance: Option<String>,
        /// Runtime reclaim variant (default: the runtime's default)
        #[arg(long)]
        variant: Option<String>,
    },
}

fn run(cli: Cli) -> error::Result<()> {
    let settings = config::resolve(cli.apihost, cli.auth)?;
    let client = client::Client::new(&settings);
    let json = cli.json;
    match cli.command {
        Command::Action(c) => action::run(&client, json, c),
        Command::Activation(c) => activation::run(&client, json, c),
        Command::Instances => node::instances(&client, json),
        Command::Memory => node::memory(&client, json),
        Command::Events(args) => events::run(&client, json, args),
        Command::Health => node::health(&client, json),
        Command::Cluster => cluster::show(&client, json),
        Command::Snapshot(c) => snapshot::run(&client, json, c),
        Command::Namespace(c) => tenants::run_namespace(&client, json, c),
        Command::Key(c) => tenants::run_key(&client, json, c),
        Command::Evict { instance } => node::evict(&client, json, instance),
        Command::Reclaim { instance, variant } => node::reclaim(&client, json, instance, variant),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if e != CliError::ActivationFailed {
                eprintln!("error: {e}");
            }
            e.exit_code()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn repeated_params_are_collected_in_pairs() {
        let cli = Cli::try_parse_from([
            "icebox", "action", "invoke", "hello", "-p", "name", "Ada", "-p", "n", "5", "--result",
            "--json",
        ])
        .unwrap();
        assert!(cli.json);
        let Command::Action(action::ActionCommand::Invoke(args)) = cli.command else {
            panic!("not invoke")
        };
        assert_eq!(args.params, ["name", "Ada", "n", "5"]);
        assert!(args.result && !args.no_wait);
    }

    #[test]
    fn create_flags_parse() {
        let cli = Cli::try_parse_from([
            "icebox",
            "--apihost",
            "h:1",
            "action",
            "create",
            "hello",
            "hello.zip",
            "--kind",
            "nodejs:20",
            "--memory",
            "128",
            "--timeout",
            "5000",
            "--concurrency",
            "2",
            "-a",
            "k",
            "v",
        ])
        .unwrap();
        assert_eq!(cli.apihost.as_deref(), Some("h:1"));
        let Command::Action(action::ActionCommand::Create(a)) = cli.command else {
            panic!("not create")
        };
        assert_eq!(
            (a.memory, a.timeout, a.concurrency),
            (Some(128), Some(5000), Some(2))
        );
        assert_eq!(a.annotations, ["k", "v"]);
    }

    #[test]
    fn usage_errors_are_clap_errors() {
        // clap exits with status 2 for these, as for every usage error.
        assert!(
            Cli::try_parse_from(["icebox", "action", "invoke", "hello", "-p", "only-key"]).is_err()
        );
        assert!(Cli::try_parse_from([
            "icebox",
            "action",
            "invoke",
            "hello",
            "--result",
            "--no-wait"
        ])
        .is_err());
        assert!(Cli::try_parse_from(["icebox", "action", "create", "hello"]).is_err());
        assert!(Cli::try_parse_from([
            "icebox", "action", "create", "h", "f.py", "--memory", "lots"
        ])
        .is_err());
    }

    #[test]
    fn usage_errors_exit_2_and_failures_exit_1() {
        assert_eq!(CliError::usage("x").exit_code(), ExitCode::from(2));
        assert_eq!(CliError::failed("x").exit_code(), ExitCode::from(1));
        assert_eq!(CliError::ActivationFailed.exit_code(), ExitCode::from(1));
    }
}

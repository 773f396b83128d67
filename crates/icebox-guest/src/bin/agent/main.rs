//! icebox-guest-agent: PID 1 of an icebox microVM (docs/vm.md). It sets up the guest, then
//! serves host sessions over the virtio-serial port `icebox.0`, one after another, keeping
//! its instances across them. If it dies the kernel panics and QEMU (-no-reboot) exits: the
//! host sees that as the VM's end.

mod instances;
mod output;
mod port;
mod reaper;
mod session;
mod spawn;
mod stats;
mod system;

use std::sync::Arc;

fn main() {
    let pid1 = std::process::id() == 1;
    if pid1 {
        system::init();
    }
    tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("ICEBOX_AGENT_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(run());
}

async fn run() {
    let children = reaper::Children::default();
    children.start_reaping();
    let agent = Arc::new(instances::Agent::new(children));
    let port = port::open(icebox_guest::protocol::PORT_NAME).await;
    tracing::info!("agent ready");
    loop {
        port.wait_connected().await;
        tracing::debug!("host connected");
        session::serve(port.session(), agent.clone()).await;
        tracing::debug!("host disconnected");
    }
}

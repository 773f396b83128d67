use clap::Parser;
use iceboxd::config::Config;

#[tokio::main]
async fn main() {
    let cfg = Config::parse();
    let filter =
        tracing_subscriber::EnvFilter::try_from_env("ICEBOX_LOG").unwrap_or_else(|_| "info".into());
    if cfg.log_format == "json" {
        tracing_subscriber::fmt()
            .json()
            .with_env_filter(filter)
            .init();
    } else {
        tracing_subscriber::fmt().with_env_filter(filter).init();
    }
    if let Err(e) = iceboxd::server::run(cfg).await {
        eprintln!("iceboxd: {e:#}");
        std::process::exit(1);
    }
}

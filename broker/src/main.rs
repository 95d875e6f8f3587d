//! `tidewater-broker`: starts a broker (or, later, the controller) from a TOML file and/or
//! `--set key=value` settings, logs to stderr, prints `listening on HOST:PORT` on stdout once
//! the listener is bound, and stops cleanly on SIGINT/SIGTERM.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use tidewater_broker::config::{Config, Role};
use tidewater_broker::server;

/// Tidewater's companion broker: Kafka's replication protocol behind a small HTTP API.
///
/// Settings use Kafka's names and defaults (see docs/configuration.md), e.g.
/// `--set log.dirs=/var/lib/tw --set listeners=http://127.0.0.1:0`.
#[derive(Parser)]
#[command(name = "tidewater-broker", version)]
struct Args {
    /// A flat TOML file of settings: `"log.dirs" = "/var/lib/tw"`.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// One setting, `key=value`; repeatable; overrides the file.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    settings: Vec<String>,
    /// What this process is: `broker` or `controller` (overrides `process.roles`).
    #[arg(long, value_name = "ROLE")]
    role: Option<String>,
    /// Print every setting with its default and meaning, then exit.
    #[arg(long)]
    list_settings: bool,
    /// Check the `--set` settings of a test run without starting anything: each name must be
    /// a broker setting or a topic-level one, and its value must parse. Prints where each
    /// goes as JSON (`{"broker": {..}, "topic": {..}, "topic_settings": [..]}`) and exits 0, or names the bad setting
    /// and exits 2. The harness calls this before a run, so a typo fails at once.
    #[arg(long)]
    check_config: bool,
}

fn load_config(args: &Args) -> Result<Config, String> {
    let mut settings = match &args.config {
        Some(path) => Config::read_file(path).map_err(|e| e.to_string())?,
        None => BTreeMap::new(),
    };
    for assignment in &args.settings {
        let (name, value) = Config::parse_assignment(assignment).map_err(|e| e.to_string())?;
        settings.insert(name, value);
    }
    if let Some(role) = &args.role {
        settings.insert("process.roles".to_string(), role.clone());
    }
    Config::from_settings(&settings).map_err(|e| e.to_string())
}

fn check_config(args: &Args) -> ExitCode {
    let mut settings = BTreeMap::new();
    for assignment in &args.settings {
        match Config::parse_assignment(assignment) {
            Ok((name, value)) => settings.insert(name, value),
            Err(e) => {
                eprintln!("tidewater-broker: {e}");
                return ExitCode::from(2);
            }
        };
    }
    match tidewater_broker::config::route_settings(&settings) {
        Ok(routing) => {
            let topic_settings: Vec<&str> = tidewater_broker::config::TOPIC_SETTINGS
                .iter()
                .map(|(name, _)| *name)
                .collect();
            println!(
                "{}",
                serde_json::json!({"broker": routing.broker, "topic": routing.topic,
                                   "topic_settings": topic_settings})
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tidewater-broker: {e}");
            ExitCode::from(2)
        }
    }
}

/// Raises the open-file limit and checks, before any log is opened, that the segments in the
/// log directories fit within it: a broker that cannot hold its logs refuses to start with a
/// message saying what it needs, instead of starting at its limit and serving nothing.
fn check_open_files(config: &Config) -> Result<(), String> {
    use tidewater_broker::storage::open_files;
    let limit = open_files::raise_open_file_limit()
        .map_err(|e| format!("cannot read the open-file limit: {e}"))?;
    let segments = open_files::count_segments(&config.log_dirs)
        .map_err(|e| format!("cannot count the segments in log.dirs: {e}"))?;
    open_files::check_budget(segments, limit)?;
    let with_connections =
        open_files::files_needed(segments).saturating_add(config.max_connections as u64);
    if with_connections > limit.soft {
        tracing::warn!(
            "{segments} segments and max.connections={} need up to {with_connections} open \
             files, more than the limit of {}: connections may be refused when it is reached",
            config.max_connections,
            limit.soft
        );
    }
    tracing::info!(
        "open-file limit {} (hard {}), {segments} segments",
        limit.soft,
        limit.hard
    );
    Ok(())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut terminate = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
    tracing::info!("shutdown requested");
}

async fn serve(config: Config) -> Result<(), String> {
    let listener = tokio::net::TcpListener::bind(config.listener)
        .await
        .map_err(|e| format!("cannot bind listeners={}: {e}", config.listener))?;
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    let mut stdout = std::io::stdout();
    let _ = writeln!(stdout, "listening on {bound}");
    let kafka = match (config.role, config.kafka_listener) {
        (Role::Broker, Some(address)) => {
            let kafka = tokio::net::TcpListener::bind(address)
                .await
                .map_err(|e| format!("cannot bind kafka.listeners={address}: {e}"))?;
            let bound = kafka.local_addr().map_err(|e| e.to_string())?;
            let _ = writeln!(stdout, "kafka listening on {bound}");
            Some(kafka)
        }
        _ => None,
    };
    let _ = stdout.flush();
    let result = match config.role {
        Role::Broker => server::run_with_kafka(listener, kafka, config, shutdown_signal()).await,
        Role::Controller => server::run_controller(listener, config, shutdown_signal()).await,
    };
    result.map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.list_settings {
        for setting in tidewater_broker::config::SETTINGS {
            println!(
                "{} = {:?}\n    {}",
                setting.name, setting.default, setting.doc
            );
        }
        return ExitCode::SUCCESS;
    }
    if args.check_config {
        return check_config(&args);
    }
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let config = match load_config(&args) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("tidewater-broker: {error}");
            return ExitCode::from(2);
        }
    };
    if config.role == Role::Broker {
        if let Err(error) = check_open_files(&config) {
            tracing::error!("{error}");
            eprintln!("tidewater-broker: {error}");
            return ExitCode::FAILURE;
        }
    }
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    match runtime.block_on(serve(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error}");
            eprintln!("tidewater-broker: {error}");
            ExitCode::FAILURE
        }
    }
}

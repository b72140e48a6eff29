//! The daemon's and `check`'s logging: text or JSON on stderr at the configured level, the
//! level changeable on reload.

use crate::config;

/// Changes the log level (on reload).
pub type SetLevel = Box<dyn Fn(config::LogLevel) + Send + Sync>;

/// Starts logging; the returned function changes the level later (on reload). RUST_LOG,
/// when set, wins over the configuration, then and on reload.
pub fn init(cfg: &config::Config, stderr_only: bool) -> SetLevel {
    use tracing_subscriber::EnvFilter;
    let from_env = std::env::var_os("RUST_LOG").is_some();
    let filter_for = move |level: config::LogLevel| {
        if from_env {
            EnvFilter::from_default_env()
        } else {
            EnvFilter::new(format!("kafka_watchdog={}", level.as_str()))
        }
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter_for(cfg.log.level))
        .with_writer(std::io::stderr)
        .with_ansi(!stderr_only && std::io::IsTerminal::is_terminal(&std::io::stderr()));
    match cfg.log.format {
        config::LogFormat::Json => {
            let b = builder.json().with_filter_reloading();
            let handle = b.reload_handle();
            b.init();
            Box::new(move |l| {
                let _ = handle.reload(filter_for(l));
            })
        }
        config::LogFormat::Text => {
            let b = builder.with_filter_reloading();
            let handle = b.reload_handle();
            b.init();
            Box::new(move |l| {
                let _ = handle.reload(filter_for(l));
            })
        }
    }
}

use std::path::Path;

/// What went wrong in the lab, phrased for the person running it.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{tool}: {detail}")]
    Tool { tool: String, detail: String },
    #[error("no lab is running (run `kafka-lab up` first)")]
    NotUp,
    #[error("node {0} is not part of this lab (nodes: {1})")]
    UnknownNode(i32, String),
    #[error("{0}")]
    Invalid(String),
    #[error("timed out after {secs} s waiting for {what}")]
    Timeout { what: String, secs: u64 },
    #[error("kafka client: {0}")]
    Kafka(String),
}

impl LabError {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        LabError::Io {
            path: path.display().to_string(),
            source,
        }
    }
}

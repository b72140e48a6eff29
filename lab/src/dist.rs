//! Apache Kafka from Maven Central: the jars of one release and their runtime dependencies,
//! resolved once with Maven into a cache folder that later runs reuse.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::LabError;
use crate::topology::KafkaVersion;

/// Where resolved distributions live. It must be readable by the per-node Unix users the
/// brokers run as, which is why it is not under root's home.
pub fn cache_root() -> PathBuf {
    std::env::var_os("KAFKA_LAB_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/kafka-lab"))
}

fn pom(version: KafkaVersion) -> &'static str {
    match version {
        KafkaVersion::V2_8 => include_str!("../maven/kafka-2.8.2.pom.xml"),
        KafkaVersion::V3_6 | KafkaVersion::V3_6Kraft => {
            include_str!("../maven/kafka-3.6.2.pom.xml")
        }
        KafkaVersion::V3_9 => include_str!("../maven/kafka-3.9.1.pom.xml"),
        KafkaVersion::V4 => include_str!("../maven/kafka-4.1.1.pom.xml"),
        KafkaVersion::V4_4 => include_str!("../maven/kafka-4.4.0.pom.xml"),
    }
}

/// The folder holding every jar of `version`, resolving it with Maven first if needed.
pub fn ensure(version: KafkaVersion) -> Result<PathBuf, LabError> {
    let dir = cache_root().join(format!("kafka-{}", version.maven_version()));
    let libs = dir.join("libs");
    // The marker holds the pom it was resolved from: a changed pom resolves again.
    let marker = dir.join(".complete");
    if fs::read_to_string(&marker).is_ok_and(|m| m == pom(version)) {
        return Ok(libs);
    }
    fs::create_dir_all(&dir).map_err(|e| LabError::io(&dir, e))?;
    let pom_path = dir.join("pom.xml");
    fs::write(&pom_path, pom(version)).map_err(|e| LabError::io(&pom_path, e))?;
    if libs.exists() {
        fs::remove_dir_all(&libs).map_err(|e| LabError::io(&libs, e))?;
    }
    eprintln!(
        "kafka-lab: resolving Apache Kafka {} from Maven Central into {}",
        version.maven_version(),
        libs.display()
    );
    let out = Command::new("mvn")
        .args(["-q", "-B", "-f"])
        .arg(&pom_path)
        .arg("dependency:copy-dependencies")
        .arg("-DincludeScope=runtime")
        .arg(format!("-DoutputDirectory={}", libs.display()))
        .output()
        .map_err(|e| LabError::Tool {
            tool: "mvn".into(),
            detail: format!("cannot run Maven ({e}); install Maven (apt-get install maven)"),
        })?;
    if !out.status.success() {
        return Err(LabError::Tool {
            tool: "mvn".into(),
            detail: format!(
                "dependency:copy-dependencies failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        });
    }
    check_jars(&libs, version)?;
    fs::write(&marker, pom(version)).map_err(|e| LabError::io(&marker, e))?;
    Ok(libs)
}

fn check_jars(libs: &Path, version: KafkaVersion) -> Result<(), LabError> {
    let names: Vec<String> = fs::read_dir(libs)
        .map_err(|e| LabError::io(libs, e))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let want = format!("kafka_2.13-{}.jar", version.maven_version());
    if !names.iter().any(|n| n == &want) {
        return Err(LabError::Tool {
            tool: "mvn".into(),
            detail: format!("{want} missing from {} after resolution", libs.display()),
        });
    }
    Ok(())
}

/// The classpath argument for `java -cp`.
pub fn classpath(libs: &Path) -> String {
    format!("{}/*", libs.display())
}

//! The HTTP surface: `/metrics`, `/healthz`, `/readyz`, `/status`. GET only. Every answer is
//! rendered from the published reports, so a hung broker can never make a scrape wait.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::canary::stats::CanaryStats;
use crate::report::ClusterReport;

/// What the HTTP server reads: the latest report of each cluster, replaced whole after each
/// round.
pub struct Published {
    pub instance_id: String,
    /// Clusters the config names; readiness waits for a first report of each.
    pub expected: RwLock<Vec<String>>,
    pub reports: RwLock<BTreeMap<String, Arc<ClusterReport>>>,
    /// The canary's cumulative metrics, of every cluster.
    pub canary_stats: CanaryStats,
    /// Incidents and webhook delivery, once started.
    pub alerting: std::sync::OnceLock<Arc<crate::alerting::Alerting>>,
    /// Whether the last configuration reload was applied (1) or refused (0).
    pub reload_success: std::sync::atomic::AtomicBool,
}

impl Published {
    pub fn new(instance_id: &str, clusters: Vec<String>) -> Arc<Self> {
        Arc::new(Published {
            instance_id: instance_id.to_string(),
            expected: RwLock::new(clusters),
            reports: RwLock::new(BTreeMap::new()),
            canary_stats: CanaryStats::default(),
            alerting: std::sync::OnceLock::new(),
            reload_success: std::sync::atomic::AtomicBool::new(true),
        })
    }

    pub fn publish(&self, report: ClusterReport) {
        let mut reports = self.reports.write().unwrap_or_else(|p| p.into_inner());
        reports.insert(report.cluster.clone(), Arc::new(report));
    }

    /// Keeps only the given clusters (after a reload removed some).
    pub fn retain_clusters(&self, names: &[String]) {
        *self.expected.write().unwrap_or_else(|p| p.into_inner()) = names.to_vec();
        self.reports
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|k, _| names.contains(k));
    }

    pub fn snapshot(&self) -> Vec<Arc<ClusterReport>> {
        self.reports
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// What the outputs show beside the reports.
    pub fn extras(&self) -> crate::metrics::Extras<'_> {
        let alerting = self.alerting.get();
        crate::metrics::Extras {
            clusters: self.expected.read().map(|e| e.clone()).unwrap_or_default(),
            canary_stats: Some(&self.canary_stats),
            incidents: alerting.map(|a| a.open_incidents()).unwrap_or_default(),
            webhooks: alerting.map(|a| a.stats()),
            reload_success: Some(
                self.reload_success
                    .load(std::sync::atomic::Ordering::Relaxed),
            ),
        }
    }

    /// Clusters that have not completed a round yet.
    pub fn waiting_for(&self) -> Vec<String> {
        let reports = self.reports.read().unwrap_or_else(|p| p.into_inner());
        self.expected
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|c| !reports.contains_key(*c))
            .cloned()
            .collect()
    }
}

fn text(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn route(published: &Published, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = text(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain; charset=utf-8",
            "only GET is served\n".into(),
        );
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    match req.uri().path() {
        "/metrics" => {
            let reports = published.snapshot();
            text(
                StatusCode::OK,
                crate::metrics::CONTENT_TYPE,
                crate::metrics::render(reports.iter().map(|r| r.as_ref()), &published.extras()),
            )
        }
        "/healthz" => text(StatusCode::OK, "text/plain; charset=utf-8", "ok\n".into()),
        "/readyz" => {
            let waiting = published.waiting_for();
            if waiting.is_empty() {
                text(
                    StatusCode::OK,
                    "text/plain; charset=utf-8",
                    "ready\n".into(),
                )
            } else {
                text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "text/plain; charset=utf-8",
                    format!(
                        "not ready: no round completed yet for cluster(s) {}\n",
                        waiting.join(", ")
                    ),
                )
            }
        }
        "/status" => {
            let reports = published.snapshot();
            text(
                StatusCode::OK,
                "application/json",
                crate::status::render(
                    &published.instance_id,
                    reports.iter().map(|r| r.as_ref()),
                    &published.extras(),
                ),
            )
        }
        _ => text(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "not found: try /metrics, /status, /healthz or /readyz\n".into(),
        ),
    }
}

/// Binds the listener; errors here are start-up errors (address in use, permission).
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Serves until `shutdown` turns true.
pub async fn serve(
    listener: TcpListener,
    published: Arc<Published>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.changed() => return,
        };
        let (stream, _) = match accepted {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "accepting an HTTP connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let published = published.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let response = route(&published, &req);
                async move { Ok::<_, Infallible>(response) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(5))
                .max_buf_size(16 * 1024)
                .serve_connection(TokioIo::new(stream), service);
            // A slow or idle client may hold a connection this long at most.
            let _ = tokio::time::timeout(Duration::from_secs(30), conn).await;
        });
    }
}

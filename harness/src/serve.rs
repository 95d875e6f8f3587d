//! `tidewater serve`: browse the store in a browser — the index of runs, each run's report,
//! history, results, samples and node logs.
//!
//! Read-only: the index page is rendered on every request from what is on disk (nothing is
//! written, so a read-only store works), and files are streamed, so a history of hundreds of
//! megabytes costs no memory. Only paths inside the store are served: `..` and absolute paths
//! are refused, and a symlink (such as `latest`) is followed only when it stays inside.
//!
//! The CLI binds to 127.0.0.1 unless told otherwise; pass its listener to [`serve`].

use crate::runner::EXIT_HARNESS;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use clap::Args;
use std::fmt::Write as _;
use std::future::Future;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use tidewater_reports::html::{esc, href, page};
use tidewater_reports::pages::index::{index_html, list_runs};
use tokio::io::AsyncReadExt;

/// The address `tidewater serve` binds to by default: this machine only.
pub const BIND_DEFAULT: &str = "127.0.0.1:8080";
/// Entries listed per directory at most (a node's data directory may hold many segments).
pub const LISTING_ENTRIES_MAX: usize = 10_000;
/// Size of the chunks files are streamed in.
const CHUNK_BYTES: usize = 64 * 1024;
/// URL paths longer than this are refused before touching the file system.
const URL_PATH_BYTES_MAX: usize = 4096;

/// What every request handler needs.
struct Store {
    /// The store directory, canonical, so that resolved paths can be checked against it.
    root: PathBuf,
}

/// The router serving `store_dir`; exposed for tests and for embedding.
pub fn router(store_dir: &Path) -> std::io::Result<Router> {
    let root = store_dir.canonicalize()?;
    Ok(Router::new()
        .fallback(handle)
        .with_state(Arc::new(Store { root })))
}

/// Serves `store_dir` on `listener` until `shutdown` completes.
pub async fn serve(
    store_dir: &Path,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = router(store_dir)?;
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}

fn text(status: StatusCode, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message.to_string(),
    )
        .into_response()
}

fn html(body: String) -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

async fn handle(State(store): State<Arc<Store>>, method: Method, uri: Uri) -> Response {
    if method != Method::GET && method != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD");
    }
    let rel = match url_to_relative(uri.path()) {
        Ok(rel) => rel,
        Err(message) => return text(StatusCode::BAD_REQUEST, message),
    };
    if rel.as_os_str().is_empty() {
        return index(store.root.clone()).await;
    }
    let path = match resolve(&store.root, &rel) {
        Ok(path) => path,
        Err(status) => return text(status, "not found"),
    };
    if path.is_dir() {
        if !uri.path().ends_with('/') {
            // Relative links in the listing (and in reports) need the trailing slash.
            let target = format!("{}/", uri.path());
            return (StatusCode::PERMANENT_REDIRECT, [(header::LOCATION, target)]).into_response();
        }
        return match listing(&path, &rel) {
            Ok(body) => html(body),
            Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        };
    }
    file(&path).await
}

/// The index of runs, rendered from the store as it is now.
async fn index(root: PathBuf) -> Response {
    let rendered =
        tokio::task::spawn_blocking(move || list_runs(&root).map(|r| index_html(&root, &r))).await;
    match rendered {
        Ok(Ok(body)) => html(body),
        Ok(Err(e)) => text(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

/// Decodes `%XX` escapes of a URL path.
fn percent_decode(path: &str) -> Result<String, &'static str> {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).ok_or("bad % escape")?;
            let hex = std::str::from_utf8(hex).map_err(|_| "bad % escape")?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| "bad % escape")?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "path is not UTF-8")
}

/// The URL path as a path relative to the store: only plain names, never `..`, a root or a
/// drive prefix. `/` is the empty path (the index).
pub fn url_to_relative(url_path: &str) -> Result<PathBuf, &'static str> {
    if url_path.len() > URL_PATH_BYTES_MAX {
        return Err("path too long");
    }
    let decoded = percent_decode(url_path)?;
    if decoded.contains('\0') || decoded.contains('\\') {
        return Err("bad character in path");
    }
    let mut rel = PathBuf::new();
    for part in decoded.split('/').filter(|p| !p.is_empty() && *p != ".") {
        match Path::new(part).components().next() {
            Some(Component::Normal(name)) if Path::new(part).components().count() == 1 => {
                rel.push(name)
            }
            _ => return Err("path must stay inside the store"),
        }
    }
    Ok(rel)
}

/// The file or directory `rel` names, if it exists and (after following symlinks) lies in
/// the store.
fn resolve(root: &Path, rel: &Path) -> Result<PathBuf, StatusCode> {
    let path = root
        .join(rel)
        .canonicalize()
        .map_err(|_| StatusCode::NOT_FOUND)?;
    if path.starts_with(root) {
        Ok(path)
    } else {
        Err(StatusCode::NOT_FOUND)
    }
}

/// The content type by file name: text for everything Tidewater writes as text, so that
/// histories and logs open in the browser rather than download.
pub fn content_type(path: &Path) -> &'static str {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let ext = name.rsplit('.').next().unwrap_or("");
    match ext {
        "html" | "htm" => "text/html; charset=utf-8",
        "json" => "application/json",
        "svg" => "image/svg+xml",
        "xml" => "application/xml",
        "jsonl" | "log" | "txt" | "toml" | "md" | "csv" | "out" | "err" => {
            "text/plain; charset=utf-8"
        }
        _ if name.ends_with(".log.1") || !name.contains('.') => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

async fn file(path: &Path) -> Response {
    let opened = match tokio::fs::File::open(path).await {
        Ok(f) => f,
        Err(_) => return text(StatusCode::NOT_FOUND, "not found"),
    };
    let len = opened.metadata().await.map(|m| m.len()).ok();
    // Stream in chunks; after an error the stream ends (the client sees a short body).
    let stream = futures::stream::unfold(Some(opened), |state| async move {
        let mut f = state?;
        let mut buf = vec![0u8; CHUNK_BYTES];
        match f.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok::<Bytes, std::io::Error>(Bytes::from(buf)), Some(f)))
            }
            Err(e) => Some((Err(e), None)),
        }
    });
    let mut response = Response::new(Body::from_stream(stream));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type(path)),
    );
    if let Some(len) = len {
        headers.insert(header::CONTENT_LENGTH, header::HeaderValue::from(len));
    }
    response
}

/// A directory listing: subdirectories first, then files with their sizes.
fn listing(dir: &Path, rel: &Path) -> std::io::Result<String> {
    let mut entries: Vec<(bool, String, u64)> = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let meta = std::fs::metadata(entry.path());
        let (is_dir, size) = meta.map(|m| (m.is_dir(), m.len())).unwrap_or((false, 0));
        entries.push((!is_dir, name, size));
    }
    entries.sort();
    let title = format!("/{}", rel.display());
    let mut body = format!("<h1>{}</h1><p><a href=\"/\">all runs</a>", esc(&title));
    if dir.join("report.html").is_file() {
        body.push_str(" · <a href=\"report.html\">report</a>");
    }
    body.push_str("</p><table><tr><th>name</th><th class=\"num\">bytes</th></tr>");
    if rel.parent().is_some() {
        body.push_str("<tr><td><a href=\"../\">../</a></td><td></td></tr>");
    }
    for (is_file, name, size) in entries.iter().take(LISTING_ENTRIES_MAX) {
        let (link, shown, size) = if *is_file {
            (href(name), name.clone(), size.to_string())
        } else {
            (
                format!("{}/", href(name)),
                format!("{name}/"),
                String::new(),
            )
        };
        let _ = write!(
            body,
            "<tr><td><a href=\"{link}\">{}</a></td><td class=\"num\">{size}</td></tr>",
            esc(&shown)
        );
    }
    body.push_str("</table>");
    if entries.len() > LISTING_ENTRIES_MAX {
        let _ = write!(
            body,
            "<p class=\"muted\">{} more entries not listed.</p>",
            entries.len() - LISTING_ENTRIES_MAX
        );
    }
    Ok(page(&title, &body))
}

/// `tidewater serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Directory of all runs.
    #[arg(long, value_name = "DIR", default_value = "store")]
    pub store: PathBuf,
    /// Address to listen on (this machine only by default).
    #[arg(long, value_name = "ADDR:PORT", default_value = crate::serve::BIND_DEFAULT,
        value_parser = parse_bind)]
    pub bind: String,
}

/// Parses `--bind`: a host (or address) and a port from 0 to 65535, so that a typo is refused
/// as a setting (exit 3) instead of failing to listen (exit 5).
fn parse_bind(s: &str) -> Result<String, String> {
    match s.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => Ok(s.to_string()),
        _ => Err(format!(
            "{s:?}: expected ADDR:PORT with a port from 0 to 65535"
        )),
    }
}

pub(crate) fn serve_command(args: &ServeArgs) -> i32 {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("tidewater: cannot start the async runtime: {e}");
            return EXIT_HARNESS;
        }
    };
    runtime.block_on(async {
        let listener = match tokio::net::TcpListener::bind(&args.bind).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("tidewater: cannot listen on {}: {e}", args.bind);
                return EXIT_HARNESS;
            }
        };
        let addr = listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        println!(
            "serving {} on http://{addr}/ (Ctrl-C stops)",
            args.store.display()
        );
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        match serve(&args.store, listener, shutdown).await {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("tidewater: serve {}: {e}", args.store.display());
                EXIT_HARNESS
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[test]
    fn url_paths_stay_inside_the_store() {
        assert_eq!(url_to_relative("/").unwrap(), PathBuf::new());
        assert_eq!(
            url_to_relative("/queue/2026%20x/report.html").unwrap(),
            PathBuf::from("queue/2026 x/report.html")
        );
        assert_eq!(url_to_relative("/./a//b/").unwrap(), PathBuf::from("a/b"));
        for bad in [
            "/../etc/passwd",
            "/a/%2e%2e/%2e%2e/etc",
            "/a/..",
            "/%2e%2e%2fetc",
            "/a%00b",
            "/a\\b",
            "/%zz",
        ] {
            assert!(url_to_relative(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn text_files_open_in_the_browser() {
        assert_eq!(
            content_type(Path::new("history.jsonl")),
            "text/plain; charset=utf-8"
        );
        assert_eq!(
            content_type(Path::new("report.html")),
            "text/html; charset=utf-8"
        );
        assert_eq!(content_type(Path::new("results.json")), "application/json");
        assert_eq!(
            content_type(Path::new("00000000.log")),
            "text/plain; charset=utf-8"
        );
        assert_eq!(
            content_type(Path::new("00000000.index")),
            "application/octet-stream"
        );
    }

    /// Sends one raw HTTP/1.1 request (raw, so that `..` is not normalised away by a client)
    /// and returns the status line, headers and body as text.
    async fn raw_get(addr: std::net::SocketAddr, path: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut out = Vec::new();
        stream.read_to_end(&mut out).await.unwrap();
        String::from_utf8_lossy(&out).into_owned()
    }

    #[tokio::test]
    async fn serves_the_index_reports_files_and_listings_and_nothing_outside() {
        let tmp = tempfile::tempdir().unwrap();
        let store = tmp.path().join("store");
        let run = store.join("queue/20261130T230000Z");
        std::fs::create_dir_all(run.join("nodes/n1")).unwrap();
        std::fs::write(run.join("config.json"), r#"{"name":"queue","acks":"all"}"#).unwrap();
        std::fs::write(run.join("results.json"), r#"{"valid":true,"anomalies":{}}"#).unwrap();
        std::fs::write(run.join("report.html"), "<html>the report</html>").unwrap();
        std::fs::write(run.join("history.jsonl"), "{\"index\":0}\n").unwrap();
        std::fs::write(run.join("nodes/n1/broker.log"), "started\n").unwrap();
        std::fs::write(tmp.path().join("secret.txt"), "outside").unwrap();
        std::os::unix::fs::symlink(&run, store.join("latest")).unwrap();
        std::os::unix::fs::symlink(tmp.path().join("secret.txt"), store.join("escape")).unwrap();

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn({
            let store = store.clone();
            async move {
                serve(&store, listener, async {
                    let _ = stopped.await;
                })
                .await
            }
        });

        let index = raw_get(addr, "/").await;
        assert!(index.starts_with("HTTP/1.1 200"), "{index}");
        assert!(
            index.contains("<a href=\"queue/20261130T230000Z/report.html\">20261130T230000Z</a>"),
            "{index}"
        );
        assert_eq!(
            index.matches(">20261130T230000Z</a>").count(),
            1,
            "latest is not listed twice"
        );

        let report = raw_get(addr, "/queue/20261130T230000Z/report.html").await;
        assert!(
            report.contains("content-type: text/html; charset=utf-8"),
            "{report}"
        );
        assert!(report.ends_with("<html>the report</html>"));

        let history = raw_get(addr, "/latest/history.jsonl").await;
        assert!(
            history.contains("content-type: text/plain; charset=utf-8"),
            "{history}"
        );
        assert!(history.ends_with("{\"index\":0}\n"));

        let redirect = raw_get(addr, "/queue/20261130T230000Z").await;
        assert!(redirect.starts_with("HTTP/1.1 308"), "{redirect}");
        assert!(
            redirect.contains("location: /queue/20261130T230000Z/"),
            "{redirect}"
        );
        let listing = raw_get(addr, "/queue/20261130T230000Z/").await;
        assert!(
            listing.contains("<a href=\"nodes/\">nodes/</a>"),
            "{listing}"
        );
        assert!(
            listing.contains("<a href=\"report.html\">report</a>"),
            "{listing}"
        );
        let log = raw_get(addr, "/queue/20261130T230000Z/nodes/n1/broker.log").await;
        assert!(log.ends_with("started\n"), "{log}");

        for outside in [
            "/../secret.txt",
            "/queue/%2e%2e/%2e%2e/secret.txt",
            "/escape",
        ] {
            let response = raw_get(addr, outside).await;
            assert!(
                response.starts_with("HTTP/1.1 400") || response.starts_with("HTTP/1.1 404"),
                "{outside}: {response}"
            );
            assert!(!response.contains("outside"), "{outside}: {response}");
        }
        assert!(raw_get(addr, "/nope").await.starts_with("HTTP/1.1 404"));

        stop.send(()).unwrap();
        server.await.unwrap().unwrap();
    }
}

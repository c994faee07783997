//! A client of the replicated server that follows the leader.
//!
//! It talks to one node it is given (the seed) and remembers the leader
//! that node names: a 307 ("not the leader") sends the request again to
//! the leader in its body; a 503 (no leader known, no quorum) is retried
//! after a pause; a remembered leader that cannot be reached is forgotten
//! for the seed. At most [`MAX_ATTEMPTS`] tries per call.
//!
//! Retrying after a 307 or a 503 is safe: the node did not propose the
//! write. A write whose answer is lost (a timeout, a leader that fails in
//! the middle) is not retried: it may or may not have been applied, and
//! the error says so.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use ebb_raft::NodeId;
use reqwest::{Method, StatusCode, Url};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::api::{
    BatchOp, ChangeMembershipRequest, DeleteRange, ErrorBody, GetResponse, InitRequest, Member, ScanResponse, Status,
    WriteResponse,
};

/// Tries per call, counting redirects and retries.
pub const MAX_ATTEMPTS: usize = 40;
/// Longest wait for one answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a call failed.
#[derive(Debug)]
pub enum ClientError {
    /// The address does not make a URL.
    BadAddress(String),
    /// No answer from `addr` (refused, timed out, cut): a write may or may
    /// not have been applied.
    Transport {
        /// The node asked.
        addr: String,
        /// reqwest's error.
        source: reqwest::Error,
    },
    /// The node answered with an error.
    Server {
        /// HTTP status.
        status: StatusCode,
        /// The node's message.
        message: String,
    },
    /// Still redirected or unavailable after [`MAX_ATTEMPTS`] tries.
    GaveUp(String),
    /// An answer that is not the JSON expected.
    Decode(String),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::BadAddress(addr) => write!(f, "bad address {addr:?} (want host:port)"),
            ClientError::Transport { addr, source } => write!(f, "no answer from {addr}: {source}"),
            ClientError::Server { status, message } => write!(f, "{status}: {message}"),
            ClientError::GaveUp(last) => write!(f, "gave up after {MAX_ATTEMPTS} tries; last: {last}"),
            ClientError::Decode(e) => write!(f, "unexpected answer: {e}"),
        }
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClientError::Transport { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Result of a client call.
pub type Result<T> = std::result::Result<T, ClientError>;

/// Which node a request goes to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    /// The leader (writes, linearizable reads, membership): follow
    /// redirects.
    Leader,
    /// The node given (status, stale reads).
    Seed,
}

/// A client of a cluster, through one of its nodes.
pub struct Client {
    http: reqwest::Client,
    seed: String,
    leader: Mutex<Option<String>>,
}

impl Client {
    /// A client that starts at node `addr` (`host:port`).
    pub fn new(addr: impl Into<String>) -> Self {
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        Client { http, seed: addr.into(), leader: Mutex::new(None) }
    }

    /// Sets `key` to `value`; the answer carries its previous value.
    pub async fn put(&self, key: &str, value: &str) -> Result<WriteResponse> {
        let url = self.kv_url(key);
        self.call(Target::Leader, Method::PUT, url, Some(value.as_bytes().to_vec())).await
    }

    /// `key`'s value, read linearizably (at the leader).
    pub async fn get(&self, key: &str) -> Result<Option<String>> {
        self.get_key(key, false).await
    }

    /// `key`'s value in the seed node's applied state, which may lag the
    /// cluster (a stale read: no quorum round, works without a leader).
    pub async fn get_stale(&self, key: &str) -> Result<Option<String>> {
        self.get_key(key, true).await
    }

    /// Removes `key`; the answer carries its previous value.
    pub async fn delete(&self, key: &str) -> Result<WriteResponse> {
        self.call(Target::Leader, Method::DELETE, self.kv_url(key), None).await
    }

    /// Removes the keys from `begin` (included) to `end` (excluded).
    pub async fn delete_range(&self, begin: &str, end: &str) -> Result<WriteResponse> {
        let body = json(&DeleteRange { begin: begin.into(), end: end.into() })?;
        self.call(Target::Leader, Method::POST, self.url(&["delete_range"], &[]), Some(body)).await
    }

    /// Applies `ops` together, in order.
    pub async fn batch(&self, ops: &[BatchOp]) -> Result<WriteResponse> {
        self.call(Target::Leader, Method::POST, self.url(&["batch"], &[]), Some(json(&ops)?)).await
    }

    /// Keys from `start` (included) to `end` (excluded, `None`: to the
    /// last), at most `limit` (the server's default and cap apply);
    /// linearizable unless `stale` (then the seed's applied state).
    pub async fn scan(
        &self,
        start: &str,
        end: Option<&str>,
        limit: Option<usize>,
        stale: bool,
    ) -> Result<ScanResponse> {
        let limit = limit.map(|l| l.to_string());
        let mut query = vec![("start", start)];
        query.extend(end.map(|e| ("end", e)));
        query.extend(limit.as_deref().map(|l| ("limit", l)));
        if stale {
            query.push(("stale", "true"));
        }
        let target = if stale { Target::Seed } else { Target::Leader };
        self.call(target, Method::GET, self.url(&["scan"], &query), None).await
    }

    /// The seed node's status.
    pub async fn status(&self) -> Result<Status> {
        self.call(Target::Seed, Method::GET, self.url(&["status"], &[]), None).await
    }

    /// Initializes a cluster of `members` (id to `host:port`) at the seed
    /// node; empty: the seed alone.
    pub async fn init(&self, members: &BTreeMap<NodeId, String>) -> Result<Status> {
        let body = json(&InitRequest { members: members.clone() })?;
        self.call(Target::Seed, Method::POST, self.url(&["init"], &[]), Some(body)).await
    }

    /// Adds node `id` at `addr` as a learner; answers once it caught up.
    pub async fn add_learner(&self, id: NodeId, addr: &str) -> Result<WriteResponse> {
        let body = json(&Member { id, addr: addr.into() })?;
        self.call(Target::Leader, Method::POST, self.url(&["add-learner"], &[]), Some(body)).await
    }

    /// Makes `members` the voters; voters left out are removed.
    pub async fn change_membership(&self, members: &[NodeId]) -> Result<WriteResponse> {
        let body = json(&ChangeMembershipRequest { members: members.to_vec() })?;
        self.call(Target::Leader, Method::POST, self.url(&["change-membership"], &[]), Some(body)).await
    }

    async fn get_key(&self, key: &str, stale: bool) -> Result<Option<String>> {
        let mut url = self.kv_url(key);
        let target = if stale {
            if let Ok(url) = &mut url {
                url.query_pairs_mut().append_pair("stale", "true");
            }
            Target::Seed
        } else {
            Target::Leader
        };
        let (status, body) = self.send(target, Method::GET, url, None).await?;
        if status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        decode::<GetResponse>(status, &body).map(|g| g.value)
    }

    fn kv_url(&self, key: &str) -> std::result::Result<Url, String> {
        self.url(&["kv", key], &[])
    }

    /// A URL relative to any node: the path's segments are
    /// percent-encoded, so a key may hold `/`, `?` or spaces.
    fn url(&self, segments: &[&str], query: &[(&str, &str)]) -> std::result::Result<Url, String> {
        let mut url = Url::parse("http://node/").map_err(|e| e.to_string())?;
        url.path_segments_mut().map_err(|()| "URL cannot have a path".to_string())?.extend(segments);
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        Ok(url)
    }

    async fn call<T: DeserializeOwned>(
        &self,
        target: Target,
        method: Method,
        url: std::result::Result<Url, String>,
        body: Option<Vec<u8>>,
    ) -> Result<T> {
        let (status, body) = self.send(target, method, url, body).await?;
        decode(status, &body)
    }

    /// Sends the request to the leader (or the seed), following redirects
    /// and retrying 503s; the final status and body.
    async fn send(
        &self,
        target: Target,
        method: Method,
        url: std::result::Result<Url, String>,
        body: Option<Vec<u8>>,
    ) -> Result<(StatusCode, Vec<u8>)> {
        let mut url = url.map_err(ClientError::BadAddress)?;
        let mut last = String::new();
        for attempt in 0..MAX_ATTEMPTS {
            let remembered = if target == Target::Leader { self.remembered_leader() } else { None };
            let addr = remembered.clone().unwrap_or_else(|| self.seed.clone());
            set_addr(&mut url, &addr)?;
            let mut request = self.http.request(method.clone(), url.clone());
            if let Some(body) = &body {
                request = request.body(body.clone());
            }
            let answer = match request.send().await {
                Ok(answer) => answer,
                // A leader that went away: start again from the seed.
                Err(e) if remembered.is_some() && e.is_connect() => {
                    last = format!("no answer from {addr}: {e}");
                    self.remember_leader(None);
                    continue;
                }
                Err(source) => return Err(ClientError::Transport { addr, source }),
            };
            let status = answer.status();
            let bytes = answer.bytes().await.map_err(|source| ClientError::Transport { addr: addr.clone(), source })?;
            match status {
                StatusCode::TEMPORARY_REDIRECT if target == Target::Leader => {
                    let error: ErrorBody = serde_json::from_slice(&bytes)
                        .map_err(|e| ClientError::Decode(format!("a redirect without a leader: {e}")))?;
                    last = error.error;
                    match error.leader {
                        Some(leader) => self.remember_leader(Some(leader.addr)),
                        None => return Err(ClientError::Decode("a redirect without a leader".into())),
                    }
                }
                StatusCode::SERVICE_UNAVAILABLE => {
                    last = error_message(&bytes);
                    self.remember_leader(None);
                    tokio::time::sleep(Duration::from_millis(50 * (attempt as u64 + 1).min(10))).await;
                }
                _ => return Ok((status, bytes.to_vec())),
            }
        }
        Err(ClientError::GaveUp(last))
    }

    fn remembered_leader(&self) -> Option<String> {
        self.leader.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn remember_leader(&self, addr: Option<String>) {
        *self.leader.lock().unwrap_or_else(|e| e.into_inner()) = addr;
    }
}

fn set_addr(url: &mut Url, addr: &str) -> Result<()> {
    let bad = || ClientError::BadAddress(addr.to_string());
    let (host, port) = addr.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    url.set_host(Some(host)).map_err(|_| bad())?;
    url.set_port(Some(port)).map_err(|()| bad())?;
    Ok(())
}

fn json<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(value).map_err(|e| ClientError::Decode(e.to_string()))
}

fn error_message(body: &[u8]) -> String {
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(error) => error.error,
        Err(_) => String::from_utf8_lossy(body).into_owned(),
    }
}

fn decode<T: DeserializeOwned>(status: StatusCode, body: &[u8]) -> Result<T> {
    if !status.is_success() {
        return Err(ClientError::Server { status, message: error_message(body) });
    }
    serde_json::from_slice(body).map_err(|e| ClientError::Decode(e.to_string()))
}

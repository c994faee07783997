//! A replicated Ebb key-value server: openraft 0.9 with `ebb-raft`'s
//! storage, reached over HTTP/JSON (docs/cluster.md, "The replicated
//! server").
//!
//! # Modules
//!
//! Bottom up; a module uses only those listed before it.
//!
//! 1. `api`: the JSON bodies of the client API, shared with the client.
//! 2. `identity`: the cluster a node's directory belongs to.
//! 3. `network`: openraft's network, Raft messages as HTTP requests.
//! 4. `http`: a node's routes, the client API and the Raft messages.
//! 5. `node`: a node's directory, its Raft and its server, started and
//!    stopped together.
//! 6. `client`: a client that follows the leader.
//!
//! Errors are values: bad input is a 400 with a message, a node that
//! cannot start says why; nothing panics on what a client or a peer sends.

#![deny(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(not(test), warn(clippy::unwrap_used))]

pub mod api;
pub mod client;
mod http;
mod identity;
mod network;
pub mod node;

pub use client::{Client, ClientError};
pub use identity::CLUSTER_ID_FILE;
pub use network::Network;
pub use node::{start, NodeConfig, RunningNode, StartError};

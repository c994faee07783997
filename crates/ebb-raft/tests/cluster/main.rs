//! Fault tests of an in-process Raft cluster on the Ebb store: openraft's
//! `Raft` nodes, each on its own Ebb database, joined by a router that can
//! isolate nodes, partition them and lose messages (`harness`). One
//! scenario per module; docs/cluster.md ("Tests") says what each checks.
//!
//! Every test runs on a multi-threaded runtime (the store's calls are
//! synchronous), is bounded by an overall timeout, and orders its steps by
//! openraft's metrics, never by sleeping.

mod checker;
mod harness;
mod register;

mod election;
mod five_nodes;
mod isolated_leader;
mod linearizability;
mod membership;
mod message_loss;
mod restart;
mod snapshot_catch_up;

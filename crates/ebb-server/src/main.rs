//! `ebb-server`: runs one node of a replicated Ebb cluster, or talks to
//! one (`ebb-server client ...`). docs/cluster.md, "The replicated server".

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use ebb_server::{Client, NodeConfig};

#[derive(Parser)]
#[command(name = "ebb-server", about = "A replicated Ebb key-value server (Raft over HTTP/JSON)")]
#[command(subcommand_negates_reqs = true, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(flatten)]
    serve: ServeArgs,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Args)]
struct ServeArgs {
    /// This node's id in the cluster.
    #[arg(long, required = true)]
    id: Option<u64>,
    /// Address to serve on, host:port (also the node's address in the
    /// cluster, as given to init or add-learner).
    #[arg(long, required = true)]
    listen: Option<String>,
    /// The node's directory (created if missing; it remembers the node id).
    #[arg(long, required = true)]
    dir: Option<PathBuf>,
    /// Build a snapshot after this many applied entries.
    #[arg(long, default_value_t = 5000)]
    snapshot_every: u64,
    /// Leader heartbeat period, in milliseconds.
    #[arg(long, default_value_t = 150)]
    heartbeat_ms: u64,
    /// A follower that hears no leader for a random time between this and
    /// twice this (milliseconds) starts an election; keep it several
    /// heartbeats long.
    #[arg(long, default_value_t = 750)]
    election_timeout_ms: u64,
}

#[derive(Subcommand)]
enum Command {
    /// Talk to a cluster through one of its nodes (redirects followed).
    Client {
        /// A node's host:port.
        #[arg(long, default_value = "127.0.0.1:21001")]
        addr: String,
        #[command(subcommand)]
        op: ClientOp,
    },
}

#[derive(Subcommand)]
enum ClientOp {
    /// Set KEY to VALUE.
    Put { key: String, value: String },
    /// Print KEY's value (linearizable unless --stale).
    Get {
        key: String,
        /// Read the node's applied state, which may lag.
        #[arg(long)]
        stale: bool,
    },
    /// Remove KEY.
    Delete { key: String },
    /// Print keys from --start (included) to --end (excluded).
    Scan {
        #[arg(long, default_value = "")]
        start: String,
        #[arg(long)]
        end: Option<String>,
        #[arg(long)]
        limit: Option<usize>,
        #[arg(long)]
        stale: bool,
    },
    /// Print the node's status as JSON.
    Status,
    /// Initialize a cluster at this node: members as ID=HOST:PORT (none:
    /// this node alone).
    Init { members: Vec<String> },
    /// Add node ID at ADDR as a learner (answers once it caught up).
    AddLearner { id: u64, addr: String },
    /// Make the listed node ids the voters; voters left out are removed.
    ChangeMembership { members: Vec<u64> },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => return fail(&format!("starting the runtime: {e}")),
    };
    let result = match cli.command {
        Some(Command::Client { addr, op }) => runtime.block_on(client(addr, op)),
        None => runtime.block_on(serve(cli.serve)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => fail(&message),
    }
}

fn fail(message: &str) -> ExitCode {
    eprintln!("ebb-server: error: {message}");
    ExitCode::FAILURE
}

async fn serve(args: ServeArgs) -> Result<(), String> {
    let (Some(id), Some(listen), Some(dir)) = (args.id, args.listen, args.dir) else {
        return Err("--id, --listen and --dir are required".into());
    };
    let listener = tokio::net::TcpListener::bind(&listen).await.map_err(|e| format!("listening on {listen}: {e}"))?;
    let mut config = NodeConfig::new(id, dir);
    config.snapshot_every = args.snapshot_every;
    config.heartbeat = std::time::Duration::from_millis(args.heartbeat_ms);
    config.election_timeout = std::time::Duration::from_millis(args.election_timeout_ms);
    let mut node = ebb_server::start(config, listener).await.map_err(|e| e.to_string())?;
    eprintln!("ebb-server: node {id} serving on http://{}", node.addr());
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("installing the SIGTERM handler: {e}"))?;
    tokio::select! {
        result = tokio::signal::ctrl_c() => result.map_err(|e| format!("waiting for ctrl-c: {e}"))?,
        _ = terminate.recv() => {}
        // The server stops by itself only on an error.
        result = node.wait() => return result.map_err(|e| format!("serving: {e}")),
    }
    eprintln!("ebb-server: node {id} stopping");
    node.shutdown().await;
    Ok(())
}

async fn client(addr: String, op: ClientOp) -> Result<(), String> {
    let client = Client::new(addr);
    let out = match op {
        ClientOp::Put { key, value } => to_json(client.put(&key, &value).await),
        ClientOp::Get { key, stale } => {
            let value = if stale { client.get_stale(&key).await } else { client.get(&key).await };
            match value {
                Ok(Some(value)) => Ok(value),
                Ok(None) => Err(format!("{key}: not found")),
                Err(e) => Err(e.to_string()),
            }
        }
        ClientOp::Delete { key } => to_json(client.delete(&key).await),
        ClientOp::Scan { start, end, limit, stale } => to_json(client.scan(&start, end.as_deref(), limit, stale).await),
        ClientOp::Status => to_json(client.status().await),
        ClientOp::Init { members } => {
            let mut parsed = BTreeMap::new();
            for member in &members {
                let (id, addr) = member
                    .split_once('=')
                    .and_then(|(id, addr)| Some((id.parse::<u64>().ok()?, addr)))
                    .ok_or_else(|| format!("member {member:?}: want ID=HOST:PORT"))?;
                parsed.insert(id, addr.to_string());
            }
            to_json(client.init(&parsed).await)
        }
        ClientOp::AddLearner { id, addr } => to_json(client.add_learner(id, &addr).await),
        ClientOp::ChangeMembership { members } => to_json(client.change_membership(&members).await),
    }?;
    println!("{out}");
    Ok(())
}

fn to_json<T: serde::Serialize>(answer: Result<T, ebb_server::ClientError>) -> Result<String, String> {
    let answer = answer.map_err(|e| e.to_string())?;
    serde_json::to_string_pretty(&answer).map_err(|e| e.to_string())
}

//! # kubectl resize-guard
//!
//! A kubectl plugin (krew naming: the binary `kubectl-resize_guard` on `PATH` is run as
//! `kubectl resize-guard`) that answers "why is this resize stuck, and what would make it go?"
//! where operators already work. Every judgement is resize-guard's own: the plugin reads the
//! cluster once ([`facts`]) and hands the same inputs to `resize_guard_policy` that the webhook
//! and the controller use, so it cannot disagree with them.
//!
//! - [`explain`]: one pod — QoS and why, the node's ledger, the pending resize, the decision,
//!   the recorded plan, the Events.
//! - [`what_if`]: a resize tried as a server-side dry run ([`dry_run`]), plus the local plan.
//! - [`status`]: every pending resize, highest priority first.
//! - [`check`]: install health, `linkerd check` style; `--pre` before installing, `--wait`
//!   until healthy.
//!
//! It connects as kubectl does ([`connection`]: the kubeconfig merge list, `--context`, `--as`,
//! `--request-timeout`, …), prints through one path ([`output`]: text, wide, or a JSON/YAML
//! document with `apiVersion: resize-guard.io/v1alpha1` and a `kind` per command), says when
//! the installed programs run another release ([`versions`]), completes its own command line
//! in the shell through kubectl ([`completion`]), and exits with a status per outcome ([`exit`]).
//!
//! Read-only except `what-if`'s dry run; `explain` and `status` need only `get`/`list`.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod args;
pub mod check;
pub mod completion;
pub mod connection;
pub mod dry_run;
pub mod exit;
pub mod explain;
pub mod facts;
pub mod help;
pub mod judgement;
pub mod output;
pub mod status;
pub mod table;
pub mod versions;
pub mod what_if;

use k8s_openapi::jiff::Timestamp;
use resize_guard_policy::memory::unapplied_lowerings;
use resize_guard_policy::usage::Evidence;

use crate::args::{Cli, Command, Output, WhatIf};
use crate::connection::Connection;
use crate::exit::{Exit, Target};
use crate::facts::{Judge, LeaseState};
use crate::output::print;

/// Runs the command: prints its output, or `error: …` on stderr, and returns the exit status
/// ([`Exit`]).
pub async fn run(cli: Cli) -> i32 {
    let mut target = None;
    match execute(cli, &mut target).await {
        Ok(exit) => exit.code(),
        Err(e) => {
            let (exit, message) = exit::report(&e, target.as_ref());
            eprintln!("error: {message}");
            exit.code()
        }
    }
}

/// The command; `target` is set once the kubeconfig says where the cluster is.
async fn execute(cli: Cli, target: &mut Option<Target>) -> anyhow::Result<Exit> {
    let out = cli.global.output;
    // Arguments clap cannot check are checked before anything is read from the cluster.
    let pod_arg = match &cli.command {
        Command::Explain { pod } => Some(pod.as_str()),
        Command::WhatIf(args) => Some(args.pod.as_str()),
        Command::Status { .. } => None,
        Command::Check(args) => {
            if let Some(p) = &args.probe_pod {
                facts::split_name(p).map_err(exit::usage)?;
            }
            None
        }
    };
    let pod_name = pod_arg
        .map(facts::pod_name)
        .transpose()
        .map_err(exit::usage)?
        .map(str::to_owned);
    let conn = Connection::open(&cli.global).await?;
    *target = Some(conn.target.clone());
    let name = pod_name.as_deref().unwrap_or_default();
    match cli.command {
        Command::Explain { .. } => explain_pod(&conn, name, out).await,
        Command::WhatIf(args) => what_if_pod(&conn, name, &args, out).await,
        Command::Status { all_namespaces } => {
            // As `kubectl get pods`: -n, else the context's namespace; -A for every namespace.
            let namespace = (!all_namespaces).then_some(conn.namespace.as_str());
            let judge = Judge::load(&conn).await;
            let mut notes = judge.notes.clone();
            let lease = controller_lease(&conn, &mut notes).await;
            let now = Timestamp::now();
            let items = status::collect(&conn, namespace, &judge, lease.as_ref(), now).await?;
            let report = status::Report {
                namespace: namespace.map(str::to_owned),
                items,
                notes,
                versions: versions::read(&conn).await,
            };
            print(out, &report, now)?;
            Ok(Exit::Done)
        }
        Command::Check(args) => {
            let report = check::run(&conn, &args).await?;
            print(out, &report, Timestamp::now())?;
            Ok(if report.failed > 0 {
                Exit::CheckFailed
            } else {
                Exit::Done
            })
        }
    }
}

/// `explain POD`: reads what the explanation needs (a read that fails becomes a note) and prints
/// it.
async fn explain_pod(conn: &Connection, name: &str, out: Output) -> anyhow::Result<Exit> {
    let p = facts::pod(conn, &conn.namespace, name).await?;
    let judge = Judge::load(conn).await;
    let mut notes = judge.notes.clone();
    let ledger = facts::pod_ledger(conn, &p).await?;
    let lease = controller_lease(conn, &mut notes).await;
    let events = facts::events(conn, &p).await.unwrap_or_else(|e| {
        notes.push(format!("{e:#}"));
        Vec::new()
    });
    let ctx = judge.context(ledger.as_ref());
    let now = Timestamp::now();
    // Usage is read only for a memory limit the kubelet has yet to apply.
    let usage = if unapplied_lowerings(&p).is_empty() {
        Evidence::NotFetched
    } else {
        facts::usage(conn, &conn.namespace, name).await
    };
    let mut x = explain::explain(
        &p,
        ledger.as_ref(),
        &ctx,
        lease.as_ref(),
        &events,
        &usage,
        now,
    );
    x.notes = notes;
    print(out, &x, now)?;
    Ok(Exit::Done)
}

/// `what-if POD`: the API server's dry-run answer to the proposed resize, beside resize-guard's.
async fn what_if_pod(
    conn: &Connection,
    name: &str,
    args: &WhatIf,
    out: Output,
) -> anyhow::Result<Exit> {
    let p = facts::pod(conn, &conn.namespace, name).await?;
    let proposal = what_if::propose(&p, args).map_err(exit::usage)?;
    let judge = Judge::load(conn).await;
    // The node and its pods are read with the caller's own credentials, so the local plan names
    // only pods the caller may read anyway; a caller who may not read them still gets the API
    // server's answer, where resize-guard's webhook counts other namespaces' pods and names
    // none (`shared/src/audience.rs`).
    let ledger = facts::pod_ledger(conn, &p).await;
    let answer = dry_run::resize(&conn.client, &conn.namespace, name, &proposal.patch).await?;
    if !answer.accepted && !answer.refused_the_resize() {
        // Not a "no" to the resize: the caller may not ask, or the server failed.
        let said = answer.message.clone().unwrap_or_default();
        anyhow::bail!(
            "the dry-run resize of pod {}/{name} failed (HTTP {}): {said} ({})",
            conn.namespace,
            answer.code,
            conn.target
        );
    }
    let plan = match &ledger {
        Ok(ledger) => what_if::local_plan(&p, &proposal, &judge.context(ledger.as_ref())),
        Err(e) => what_if::unread_plan(e),
    };
    let report = what_if::Report {
        pod: format!("{}/{name}", conn.namespace),
        container: proposal.container.clone(),
        changes: proposal.changes.clone(),
        plan,
        command: what_if::command(&conn.namespace, name, &proposal),
        api_server: answer,
    };
    print(out, &report, Timestamp::now())?;
    Ok(if report.api_server.accepted {
        Exit::Done
    } else {
        Exit::Refused
    })
}

/// The controller's Lease, or a note saying why it could not be read.
async fn controller_lease(conn: &Connection, notes: &mut Vec<String>) -> Option<LeaseState> {
    match facts::lease(conn).await {
        Ok(Some(l)) => Some(LeaseState::of(&l, Timestamp::now())),
        Ok(None) => Some(LeaseState {
            holder: None,
            renewed_ago: None,
            duration: None,
        }),
        Err(e) => {
            notes.push(format!("{e:#}"));
            None
        }
    }
}

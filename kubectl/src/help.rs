//! What `--help` prints after the flags: examples for each subcommand and, on the top-level
//! help, the exit statuses ([`crate::exit::Exit`]) and the two namespaces (`-n`, the pods';
//! `--install-namespace`, resize-guard's own). Kept here so `args` stays the flags alone.

/// After the top-level help.
pub const MAIN: &str = "\
Examples:
  # Why is the resize of pod web-0 in namespace shop stuck?
  kubectl resize-guard explain web-0 -n shop

  # Would resizing it to 2 CPUs be allowed? (a server-side dry run; nothing changes)
  kubectl resize-guard what-if web-0 -n shop --cpu 2

  # Every pending resize in the cluster, then: is resize-guard healthy?
  kubectl resize-guard status -A
  kubectl resize-guard check

  # Another cluster from a kubeconfig merge list, as another user, waiting at most 10s a request
  KUBECONFIG=~/.kube/config:~/.kube/staging kubectl resize-guard status --context staging \\
    --as jane --as-group sre --request-timeout 10s

Output:
  -o json and -o yaml print one document per command: apiVersion resize-guard.io/v1alpha1,
  kind Explanation (explain), WhatIf (what-if), Status (status) or Check (check), observedAt
  (RFC 3339), then the command's fields; times in it are RFC 3339.

Shell completion (kubectl v1.26+ completes plugins): put kubectl_complete-resize_guard, from the
release archive, on PATH beside kubectl-resize_guard; or, with krew, link the plugin under that
name: ln -s kubectl-resize_guard ~/.krew/bin/kubectl_complete-resize_guard

Namespaces:
  -n/--namespace names where your pods are (default: the context's namespace, else default);
  --install-namespace names where resize-guard itself runs (default resize-guard, or
  $RESIZE_GUARD_NAMESPACE): its policy ConfigMap, controller Lease and ServiceAccounts.

Exit status:
  0  done; what-if: the API server would accept the resize; check: every check passed
  1  what-if: the API server would refuse the resize
  2  usage error: unknown flag, missing or malformed argument
  3  could not talk to the cluster (kubeconfig, connection, TLS, timeout), the API server
     answered an error (Forbidden, NotFound, ...), or the plugin itself failed
  4  check: at least one check failed (✗); check --wait: still failing when the time ran out

Read-only except `what-if`, which sends its resize as a server-side dry run.";

/// After `explain --help`.
pub const EXPLAIN: &str = "\
Examples:
  # A pod in the context's namespace
  kubectl resize-guard explain web-0

  # A pod in another namespace, with more detail
  kubectl resize-guard explain pod/web-0 -n shop -o wide

  # The same as JSON, for scripts (the decision's reason is .decision.reason)
  kubectl resize-guard explain web-0 -n shop -o json";

/// After `what-if --help`.
pub const WHAT_IF: &str = "\
Examples:
  # Raise the cpu request (and its limit, keeping the ratio) of the only container
  kubectl resize-guard what-if web-0 -n shop --cpu 550m

  # Requests only, of one container, cpu and memory
  kubectl resize-guard what-if web-0 -n shop -c app --cpu 1 --memory 2Gi --requests-only

  # In a script: exit status 1 means the API server would refuse the resize
  kubectl resize-guard what-if web-0 -n shop --memory 1Gi -o json || echo refused

Exit status: 0 the API server would accept the resize, 1 it would refuse it, 2 usage error,
3 could not talk to the cluster.";

/// After `status --help`.
pub const STATUS: &str = "\
Examples:
  # Pending resizes in the context's namespace
  kubectl resize-guard status

  # In one namespace, with the kubelet's message
  kubectl resize-guard status -n shop -o wide

  # In every namespace, as YAML
  kubectl resize-guard status -A -o yaml";

/// After `check --help`.
pub const CHECK: &str = "\
Examples:
  # Is resize-guard installed and working?
  kubectl resize-guard check

  # Probe admission with a chosen pod, for an install in another namespace
  kubectl resize-guard check --probe-pod shop/web-0 --install-namespace platform-rg

  # In CI: fail the job on any ✗
  kubectl resize-guard check -o json > check.json || exit 1

  # Before installing: supported Kubernetes, your RBAC to install, nodes to run on
  kubectl resize-guard check --pre

  # Install, then wait (at most 5 minutes) until every check passes
  kubectl apply -k deploy/ && kubectl resize-guard check --wait
  kubectl resize-guard check --wait=90s

Exit status: 0 every check passed (‼ lines are warnings), 4 at least one check failed (with
--wait: still failing when the time ran out), 2 usage error, 3 could not talk to the cluster.";

//! Installing from `deploy/` as a user would: kustomize, the Helm chart, the monitoring rules, and
//! the webhook running as its ServiceAccount under the installed RBAC.

mod helm;
mod kustomize;
mod monitoring;
mod webhook;

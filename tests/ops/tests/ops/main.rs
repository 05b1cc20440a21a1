//! The operations kit under test with the real tools: the Helm chart
//! (`helm lint`, `helm template` against `kubectl kustomize deploy/`,
//! `helm install` and `helm upgrade` on the real control plane).
//! Everything here needs Go (Helm and the control plane are built from the
//! Go module proxy) and skips loudly without it.

mod chart;
mod install;

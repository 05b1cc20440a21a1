//! The host on a real control plane (etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler and kwok of upstream's
//! release, built by `cargo xtask real-cluster`), run as a user runs it:
//! `KUBECONFIG` at the API server, driven through the real kubectl.
//! Without Go each test is skipped loudly (see `real_cluster::binaries`).

mod admission;
mod book;
mod common;
mod faults;
mod fixture;
mod golang;
mod hotswap;
mod image;
mod leader;
mod plugin_resource;
mod rbac;
mod scale_admission;
mod scale_subresource;
mod sharding;
mod statefulset;
mod tour;
mod website;
mod writes;

//! The heap a cache entry costs, measured: a counting allocator (per thread,
//! so tests running alongside do not disturb it) around filling the caches
//! with 100,000 objects shaped as `bench memory` seeds them (half Pods, half
//! Jobs, as the embedded API server returns them with its defaults). Run
//! with `--nocapture` to see the split; the budget keeps idle RSS at 100,000
//! cached objects under issue 21's 150 MiB.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;

use kube::api::{ApiResource, DynamicObject};
use serde_json::{Value, json};

use super::cache::KindCache;

/// Counts the bytes live on the current thread: as requested, and as glibc's
/// malloc holds them (8 bytes of header, 16-byte steps, 32 at least).
struct Counting;

thread_local! {
    static REQUESTED: Cell<isize> = const { Cell::new(0) };
    static HELD: Cell<isize> = const { Cell::new(0) };
}

fn chunk(size: usize) -> isize {
    ((size + 8 + 15) & !15).max(32) as isize
}

fn count(size: usize, sign: isize) {
    // `try_with`: allocations during thread teardown are not counted.
    let _ = REQUESTED.try_with(|c| c.set(c.get() + sign * size as isize));
    let _ = HELD.try_with(|c| c.set(c.get() + sign * chunk(size)));
}

// SAFETY: every call is passed on to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size(), 1);
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size(), 1);
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(layout.size(), -1);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(layout.size(), -1);
        count(new_size, 1);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

fn live() -> (isize, isize) {
    (REQUESTED.with(Cell::get), HELD.with(Cell::get))
}

/// Seed object `i` of `bench memory` as the API server serves it.
fn seeded(i: usize) -> DynamicObject {
    let name = format!("seed-{i:06}");
    let uid = format!("{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}", i * 7919, i % 65536, i % 4096, (i * 31) % 4096, i * 104729);
    let mut metadata = json!({"name": name, "namespace": "default", "uid": uid, "resourceVersion": (1000 + i).to_string(),
        "creationTimestamp": "2026-11-24T21:50:00Z", "labels": {"app": "seed", "tier": format!("t{}", i % 10)}});
    let container = json!({"name": "main", "image": "nginx:1.7.9", "ports": [{"containerPort": 80, "protocol": "TCP"}],
        "imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "resources": {}});
    let v: Value = if i.is_multiple_of(2) {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": [container],
            "restartPolicy": "Always", "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler", "terminationGracePeriodSeconds": 30,
            "securityContext": {}, "enableServiceLinks": true, "serviceAccountName": "default", "serviceAccount": "default", "priority": 0},
            "status": {"phase": "Pending", "qosClass": "BestEffort"}})
    } else {
        metadata["generation"] = 1.into();
        let labels =
            json!({"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name, "controller-uid": uid, "job-name": name});
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": {
            "completions": 1, "parallelism": 1, "backoffLimit": 6, "completionMode": "NonIndexed", "suspend": false,
            "podReplacementPolicy": "TerminatingOrFailed", "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container], "restartPolicy": "Never",
                "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler", "terminationGracePeriodSeconds": 30, "securityContext": {}}}}})
    };
    serde_json::from_value(v).unwrap()
}

#[test]
fn a_cached_object_costs_at_most_its_budget() {
    const OBJECTS: usize = 100_000;
    let pods = KindCache::new(ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&()), true);
    let jobs = KindCache::new(ApiResource::erase::<k8s_openapi::api::batch::v1::Job>(&()), true);
    let (requested_before, held_before) = live();
    for i in 0..OBJECTS {
        if i % 2 == 0 { pods.apply(seeded(i)) } else { jobs.apply(seeded(i)) }
    }
    let (requested, held) = live();
    let per_object = |bytes: isize| bytes as f64 / OBJECTS as f64;
    let (requested, held) = (per_object(requested - requested_before), per_object(held - held_before));
    let texts: Vec<Arc<str>> = [&pods, &jobs].iter().flat_map(|c| c.keys().into_iter().map(|k| c.get(&k).unwrap().shared_json())).collect();
    let text = per_object(texts.iter().map(|t| chunk(t.len() + 16)).sum::<isize>());
    eprintln!(
        "per cached object: {requested:.0} B requested, {held:.0} B held by malloc, of which the JSON text {text:.0} B, the rest {:.0} B",
        held - text
    );
    assert!(held < 1200.0, "a cached object holds {held:.0} B of heap (budget 1,200 B: 100,000 objects in < 150 MiB idle RSS)");
}

//! Leader election through a real `coordination.k8s.io/v1` Lease: two hosts,
//! one reconciles; the leader is killed (SIGKILL, no release) and the other
//! takes over once the Lease expires.

use std::time::{Duration, Instant};

use real_cluster::{ControlPlane, Value, eventually, eventually_within};

use crate::common::{MYDEPLOYMENT_CRD, host_with_both_plugins, wait_for_crds};

fn holder(lease: &Value) -> String {
    lease["spec"]["holderIdentity"].as_str().unwrap_or_default().to_string()
}

#[test]
fn a_killed_leader_is_replaced_through_the_real_lease() {
    let Some(cluster) = ControlPlane::builder().start() else { return };
    let admin = cluster.admin();
    let elect = ["--leader-elect", "--leader-election-namespace", "default"];
    let mut first = host_with_both_plugins(&cluster, "host-a", &elect);
    let lease = eventually("a holder of the Lease", || {
        let out = admin.run(&["get", "lease", "operator-host", "-o", "json"]);
        let lease: Value = serde_json::from_slice(&out.stdout).ok()?;
        (!holder(&lease).is_empty()).then_some(lease)
    });
    let leader = holder(&lease);
    let mut second = host_with_both_plugins(&cluster, "host-b", &elect);
    wait_for_crds(&admin, &[MYDEPLOYMENT_CRD]);
    assert_eq!(holder(&admin.json(&["get", "lease", "operator-host"])), leader, "the first host keeps the Lease");

    admin.apply("apiVersion: apps.example.com/v1\nkind: MyDeployment\nmetadata: {name: web}\nspec:\n  replicas: 2\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: web, image: nginx:1.14}]}\n");
    eventually("2 Pods from the leader", || (admin.items(&["get", "pods", "-l", "app=web"]).len() == 2).then_some(()));

    // SIGKILL the leader: nothing releases the Lease; it must expire (15 s).
    // Which process leads is read from the Lease's holder (hostname_uuid),
    // so kill the one whose log names that identity.
    let (dead, standby) = if first.log().contains(&leader) { (&mut first, &mut second) } else { (&mut second, &mut first) };
    let killed = Instant::now();
    dead.kill();
    let new = eventually_within("another holder of the Lease", Duration::from_secs(60), || {
        let h = holder(&admin.json(&["get", "lease", "operator-host"]));
        (!h.is_empty() && h != leader).then_some(h)
    });
    let took = killed.elapsed();
    eprintln!("leader {leader} killed; {new} holds the Lease after {took:.1?}");
    admin.ok(&["scale", "md/web", "--replicas=4"]);
    eventually("4 Pods from the new leader", || (admin.items(&["get", "pods", "-l", "app=web"]).len() == 4).then_some(()));
    assert!(standby.log().contains(&new), "the standby took over:\n{}", standby.log_tail(30));
}

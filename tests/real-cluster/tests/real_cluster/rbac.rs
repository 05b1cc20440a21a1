//! deploy/ applied to a real API server with `kubectl apply --server-side -k`,
//! and the host run with exactly its ServiceAccount's permissions (a token
//! from `kubectl create token`), as the Deployment runs it: the real RBAC
//! authorizer refuses nothing the host needs, and refuses what it lacks.

use std::time::Duration;

use real_cluster::{ControlPlane, HostProcess, built, eventually, eventually_within, repo_file};

use crate::common::{CRONJOB_CRD, MYDEPLOYMENT_CRD, has_condition, jobs_of, wait_for_crds};

const NAMESPACE: &str = "operator-host-system";
const SERVICE_ACCOUNT: &str = "operator-host";

/// deploy/ copied with the built plugins put in deploy/plugins/, as its README says.
fn deploy_dir(into: &std::path::Path) -> std::path::PathBuf {
    let to = into.join("deploy");
    copy_dir(&repo_file("deploy"), &to);
    for plugin in ["cronjob.wasm.gz", "mydeployment.wasm.gz"] {
        std::fs::copy(built(&format!("plugins/{plugin}")), to.join("plugins").join(plugin)).unwrap();
    }
    to
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn the_host_runs_with_exactly_deploys_service_account_and_the_real_authorizer_refuses_the_rest() {
    let Some(cluster) = ControlPlane::builder().start() else { return };
    let admin = cluster.admin();
    let deploy = deploy_dir(cluster.dir());
    let deploy = deploy.display().to_string();
    admin.ok(&["apply", "--server-side", "-k", &deploy]);

    // The ServiceAccount's own credentials, as the Pod would mount them.
    let token = admin.ok(&["create", "token", SERVICE_ACCOUNT, "-n", NAMESPACE, "--duration=1h"]);
    let kubeconfig = cluster.dir().join("operator-host.kubeconfig");
    cluster.kubeconfig_with_token(&kubeconfig, SERVICE_ACCOUNT, token.trim());
    let as_host = cluster.kubectl_as(&kubeconfig);
    let whoami = as_host.json(&["auth", "whoami"]);
    assert_eq!(whoami["status"]["userInfo"]["username"], format!("system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"));

    // The Deployment's arguments (deploy/manager/deployment.yaml), outside a
    // Pod: the Lease namespace is the one the Pod's would be.
    let mut host = HostProcess::start(
        "host",
        &kubeconfig,
        &cluster.dir().join("logs"),
        &["--leader-elect", "--leader-election-namespace", NAMESPACE, "--plugin-configmap", &format!("{NAMESPACE}/operator-host-plugins")],
    );
    host.wait_ready();
    wait_for_crds(&admin, &[CRONJOB_CRD, MYDEPLOYMENT_CRD]);
    eventually("the host to hold the Lease", || {
        let lease = admin.json(&["get", "lease", "operator-host", "-n", NAMESPACE]);
        lease["spec"]["holderIdentity"].is_string().then_some(())
    });

    // Both controllers work end to end under that identity.
    admin.apply(&std::fs::read_to_string(repo_file("plugins/mydeployment/samples/my-deployment-instance.yaml")).unwrap());
    admin.apply(&std::fs::read_to_string(repo_file("plugins/cronjob/samples/batch_v1_cronjob.yaml")).unwrap());
    eventually("3 Pods of the MyDeployment", || (admin.items(&["get", "pods", "-l", "app=my-nginx-app"]).len() == 3).then_some(()));
    eventually("the MyDeployment's status", || (admin.json(&["get", "md", "my-nginx-app"])["status"]["readyReplicas"] == 3).then_some(()));
    eventually_within("a Job of the CronJob", Duration::from_secs(80), || jobs_of(&admin, "default", "cronjob-sample").into_iter().next());
    eventually("the CronJob's Valid condition", || {
        has_condition(&admin.json(&["get", "cronjobs.batch.tutorial.kubebuilder.io", "cronjob-sample"]), "Valid", "True").then_some(())
    });
    let log = host.log();
    let refused: Vec<&str> = log.lines().filter(|l| l.contains("forbidden") || l.contains("Forbidden") || l.contains(" 403")).collect();
    assert!(refused.is_empty(), "the authorizer refused the host: {refused:#?}");

    // What deploy/rbac does not grant is refused by the real authorizer.
    let secrets = as_host.run(&["get", "secrets", "-n", NAMESPACE]);
    assert!(!secrets.status.success());
    let message = String::from_utf8_lossy(&secrets.stderr);
    assert!(message.contains("forbidden") && message.contains("cannot list resource \"secrets\""), "{message}");
    // `kubectl auth can-i` answers on stdout and exits 1 for "no".
    let can_i = |args: &[&str]| String::from_utf8_lossy(&as_host.run(&[&["auth", "can-i"], args].concat()).stdout).trim().to_string();
    assert_eq!(can_i(&["delete", "customresourcedefinitions.apiextensions.k8s.io"]), "no");
    assert_eq!(can_i(&["create", "jobs.batch", "-n", "default"]), "yes");

    // deploy/ applied again after the host installed its CRDs: the CRDs in
    // deploy/crd are what the plugins declare, so the two appliers agree.
    let again = admin.run(&["apply", "--server-side", "-k", &deploy]);
    assert!(again.status.success(), "re-applying deploy/ conflicts: {}", String::from_utf8_lossy(&again.stderr));
}

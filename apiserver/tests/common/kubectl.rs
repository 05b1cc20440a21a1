//! The real kubectl (/usr/bin/kubectl) against an API server over HTTP: one server per test, a
//! kubeconfig and kubectl's cache in a temporary directory. The simulated cluster's tests use it
//! too and keep their controllers next to it.

use apiserver::{ApiServer, ServerHandle};
use operator_test_kit::Kubectl;
use serde_json::Value;
use std::path::PathBuf;

pub struct Cluster {
    pub server: ApiServer,
    pub handle: ServerHandle,
    pub dir: tempfile::TempDir,
}

/// What one kubectl run printed.
pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    pub fn ok(&self) -> bool {
        self.code == 0
    }

    /// stdout then stderr, as a terminal shows them.
    pub fn text(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

impl Cluster {
    /// The API server alone.
    pub async fn start() -> Cluster {
        Cluster::serve(ApiServer::new()).await
    }

    /// `server` over HTTP on a free port, with a kubeconfig for it.
    pub async fn serve(server: ApiServer) -> Cluster {
        let handle = server.serve().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        handle.write_kubeconfig(dir.path().join("kubeconfig")).unwrap();
        Cluster { server, handle, dir }
    }

    /// A file in the test's directory.
    pub fn file(&self, name: &str, contents: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, contents).unwrap();
        p
    }

    /// The real kubectl with this server's kubeconfig and the test's directory as its home.
    pub fn kubectl_client(&self) -> Kubectl {
        Kubectl::new(operator_test_kit::kubectl::system(), self.dir.path().join("kubeconfig")).with_home(self.dir.path())
    }

    /// Runs kubectl, whatever the outcome.
    pub async fn kubectl(&self, args: &[&str]) -> Out {
        let out = self.kubectl_client().run_async(args).await;
        Out {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// kubectl must succeed; returns its stdout.
    pub async fn ok(&self, args: &[&str]) -> String {
        self.kubectl_client().ok_async(args).await
    }

    /// kubectl must fail; returns its stderr.
    pub async fn fails(&self, args: &[&str]) -> String {
        let o = self.kubectl(args).await;
        assert_ne!(o.code, 0, "kubectl {args:?} should have failed: {}", o.stdout);
        o.stderr
    }

    /// `kubectl apply -f` of `manifest` written to `name`; must succeed.
    pub async fn apply(&self, name: &str, manifest: &str) -> String {
        let path = self.file(name, manifest);
        self.ok(&["apply", "-f", path.to_str().unwrap()]).await
    }

    /// `kubectl apply -f` of `manifest` written to `name`, whatever the outcome.
    pub async fn try_apply(&self, name: &str, manifest: &str) -> Out {
        let path = self.file(name, manifest);
        self.kubectl(&["apply", "-f", path.to_str().unwrap()]).await
    }

    /// `kubectl <args> -o json`, parsed.
    pub async fn json(&self, args: &[&str]) -> Value {
        self.kubectl_client().json_async(args).await
    }

    /// The items of `kubectl get <args> -o json`.
    pub async fn items(&self, args: &[&str]) -> Vec<Value> {
        self.kubectl_client().items_async(args).await
    }

    /// A kube client over HTTP as the kubeconfig's user.
    pub fn client(&self) -> kube::Client {
        self.handle.kube_client().unwrap()
    }

    /// A kube client over HTTP that authenticates with `token`.
    pub async fn client_with_token(&self, token: &str) -> kube::Client {
        let mut kubeconfig = kube::config::Kubeconfig::read_from(self.dir.path().join("kubeconfig")).unwrap();
        kubeconfig.auth_infos[0].auth_info.as_mut().unwrap().token = Some(token.to_string().into());
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.unwrap();
        kube::Client::try_from(config).unwrap()
    }
}

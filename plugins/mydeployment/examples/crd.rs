//! Prints the MyDeployment CRD as JSON (for `kubectl apply -f -` or `deploy/`):
//!
//!     cargo run -p mydeployment --example crd | kubectl apply -f -

use mydeployment::MyDeploymentPlugin;
use operator_plugin_sdk::Plugin;

fn main() {
    for crd in MyDeploymentPlugin::manifest().crds {
        println!("{crd:#}");
    }
}

//! The `controller` functions of a linked component (and, from contract 0.3,
//! `desired.reconcile`, from 0.4 `prioritized.reconcile`, when the component
//! exports them), found and type-checked
//! once per build, then called on each fresh instance by index.
//!
//! The generated bindings' `PluginPre::instantiate` looks up and type-checks
//! all four exports on every instantiation (an `InstanceType` and a walk of
//! each signature's types), although every instance of one `InstancePre` has
//! the same types. Here the exports are found when the build is linked and
//! checked on its first instance (the manifest call of a load); a call then
//! takes its one function by index and runs it as the checked `TypedFunc`.

use std::sync::atomic::{AtomicBool, Ordering};

use operator_plugin_sdk::{Action, FieldError, Manifest, ReconcileError};
use wasmtime::Store;
use wasmtime::component::{ComponentExportIndex, Instance, InstancePre, TypedFunc};

use super::bindings::{InvalidOutput, from_v0_1, from_v0_2, from_v0_3, from_v0_4, v0_1, v0_2, v0_3, v0_4};
use super::contract::Minor;
use super::wasi::CallState;

/// What `reconcile` answers once converted: the actions, the plugin's own
/// error, or output the host cannot take.
pub(crate) type Reconciled = Result<Result<Vec<Action>, ReconcileError>, InvalidOutput>;

/// The four functions of `controller`, by index into the component.
pub(crate) struct Exports {
    minor: Minor,
    manifest: ComponentExportIndex,
    reconcile: ComponentExportIndex,
    validate: ComponentExportIndex,
    default: ComponentExportIndex,
    /// `desired.reconcile` (0.3 and later), called instead of `reconcile` when present.
    desired: Option<ComponentExportIndex>,
    /// `prioritized.reconcile` (0.4 and later), called instead of either when present.
    prioritized: Option<ComponentExportIndex>,
    /// Set once the signatures passed on one instance.
    checked: AtomicBool,
}

// The signatures of each minor, as the host calls them (the WIT of
// `wit/v0.1` and `wit`); checked against the component once per build.
type Manifest01 = (v0_1::wit::PluginManifest,);
type Manifest02 = (v0_2::wit::PluginManifest,);
type Manifest03 = (v0_3::wit::PluginManifest,);
type Manifest04 = (v0_4::wit::PluginManifest,);
type Reconcile01<'a> = (&'a str, &'a [String], i64);
type Reconcile02<'a> = (&'a str, &'a [String], &'a [String], i64);
type Actions01 = (Result<Vec<v0_1::wit::Action>, v0_1::wit::ReconcileError>,);
type Actions02 = (Result<Vec<v0_2::wit::Action>, v0_2::wit::ReconcileError>,);
type Actions03 = (Result<Vec<v0_3::wit::Action>, v0_3::wit::ReconcileError>,);
type Actions04 = (Result<Vec<v0_4::wit::Action>, v0_4::wit::ReconcileError>,);
type Steps03 = (Result<Vec<v0_3::wit_desired::Step>, v0_3::wit::ReconcileError>,);
type Steps04 = (Result<Vec<v0_4::wit_desired::Step>, v0_4::wit::ReconcileError>,);
type Directives04 = (Result<Vec<v0_4::wit_prioritized::Directive>, v0_4::wit::ReconcileError>,);
type ValidateArgs<'a> = (&'a str, Option<&'a str>);
type FieldErrors01 = (Vec<v0_1::wit::FieldError>,);
type FieldErrors02 = (Vec<v0_2::wit::FieldError>,);
type FieldErrors03 = (Vec<v0_3::wit::FieldError>,);
type FieldErrors04 = (Vec<v0_4::wit::FieldError>,);
type DefaultArgs<'a> = (&'a str,);
type Defaulted01 = (Result<String, v0_1::wit::ReconcileError>,);
type Defaulted02 = (Result<String, v0_2::wit::ReconcileError>,);
type Defaulted03 = (Result<String, v0_3::wit::ReconcileError>,);
type Defaulted04 = (Result<String, v0_4::wit::ReconcileError>,);

impl Exports {
    /// Finds `controller`'s functions in `pre`'s component (their types are
    /// checked on the first instance, [`Self::check_once`]).
    pub(crate) fn find(pre: &InstancePre<CallState>, minor: Minor) -> wasmtime::Result<Exports> {
        // The name the bindings of this minor look up; wasmtime matches a
        // semver-compatible export (e.g. `@0.2.1`).
        let version = match minor {
            Minor::V0_1 => "0.1.0",
            Minor::V0_2 => "0.2.0",
            Minor::V0_3 => "0.3.0",
            Minor::V0_4 => "0.4.0",
        };
        let interface = format!("operator:plugin/controller@{version}");
        let component = pre.component();
        let iface = component.get_export_index(None, &interface).ok_or_else(|| wasmtime::format_err!("no exported instance named `{interface}`"))?;
        let find = |name: &str| {
            component
                .get_export_index(Some(&iface), name)
                .ok_or_else(|| wasmtime::format_err!("instance export `{interface}` does not have export `{name}`"))
        };
        // An addition is read only from a component that exports it.
        let addition = |name: &str| {
            let interface = format!("operator:plugin/{name}@{version}");
            component
                .get_export_index(None, &interface)
                .map(|i| {
                    component
                        .get_export_index(Some(&i), "reconcile")
                        .ok_or_else(|| wasmtime::format_err!("instance export `{interface}` does not have export `reconcile`"))
                })
                .transpose()
        };
        let (desired, prioritized) = match minor {
            Minor::V0_1 | Minor::V0_2 => (None, None),
            Minor::V0_3 => (addition("desired")?, None),
            Minor::V0_4 => (addition("desired")?, addition("prioritized")?),
        };
        Ok(Exports {
            minor,
            desired,
            prioritized,
            manifest: find("manifest")?,
            reconcile: find("reconcile")?,
            validate: find("validate")?,
            default: find("default")?,
            checked: AtomicBool::new(false),
        })
    }

    /// Checks the four signatures on `instance` unless an earlier instance
    /// of the same `InstancePre` passed: every instance of it has the same
    /// types (no resource types cross `controller`'s functions), which is
    /// what makes the unchecked calls below sound. Until it passes, no call
    /// runs.
    pub(crate) fn check_once(&self, store: &mut Store<CallState>, instance: Instance) -> wasmtime::Result<()> {
        if self.checked.load(Ordering::Acquire) {
            return Ok(());
        }
        let checked = |name: &str, e: wasmtime::Error| e.context(format!("type-checking export func `{name}`"));
        match self.minor {
            Minor::V0_1 => {
                instance.get_typed_func::<(), Manifest01>(&mut *store, &self.manifest).map_err(|e| checked("manifest", e))?;
                instance.get_typed_func::<Reconcile01, Actions01>(&mut *store, &self.reconcile).map_err(|e| checked("reconcile", e))?;
                instance.get_typed_func::<ValidateArgs, FieldErrors01>(&mut *store, &self.validate).map_err(|e| checked("validate", e))?;
                instance.get_typed_func::<DefaultArgs, Defaulted01>(&mut *store, &self.default).map_err(|e| checked("default", e))?;
            }
            Minor::V0_2 => {
                instance.get_typed_func::<(), Manifest02>(&mut *store, &self.manifest).map_err(|e| checked("manifest", e))?;
                instance.get_typed_func::<Reconcile02, Actions02>(&mut *store, &self.reconcile).map_err(|e| checked("reconcile", e))?;
                instance.get_typed_func::<ValidateArgs, FieldErrors02>(&mut *store, &self.validate).map_err(|e| checked("validate", e))?;
                instance.get_typed_func::<DefaultArgs, Defaulted02>(&mut *store, &self.default).map_err(|e| checked("default", e))?;
            }
            Minor::V0_3 => {
                instance.get_typed_func::<(), Manifest03>(&mut *store, &self.manifest).map_err(|e| checked("manifest", e))?;
                instance.get_typed_func::<Reconcile02, Actions03>(&mut *store, &self.reconcile).map_err(|e| checked("reconcile", e))?;
                instance.get_typed_func::<ValidateArgs, FieldErrors03>(&mut *store, &self.validate).map_err(|e| checked("validate", e))?;
                instance.get_typed_func::<DefaultArgs, Defaulted03>(&mut *store, &self.default).map_err(|e| checked("default", e))?;
                if let Some(desired) = &self.desired {
                    instance.get_typed_func::<Reconcile02, Steps03>(&mut *store, desired).map_err(|e| checked("desired.reconcile", e))?;
                }
            }
            Minor::V0_4 => {
                instance.get_typed_func::<(), Manifest04>(&mut *store, &self.manifest).map_err(|e| checked("manifest", e))?;
                instance.get_typed_func::<Reconcile02, Actions04>(&mut *store, &self.reconcile).map_err(|e| checked("reconcile", e))?;
                instance.get_typed_func::<ValidateArgs, FieldErrors04>(&mut *store, &self.validate).map_err(|e| checked("validate", e))?;
                instance.get_typed_func::<DefaultArgs, Defaulted04>(&mut *store, &self.default).map_err(|e| checked("default", e))?;
                if let Some(desired) = &self.desired {
                    instance.get_typed_func::<Reconcile02, Steps04>(&mut *store, desired).map_err(|e| checked("desired.reconcile", e))?;
                }
                if let Some(prioritized) = &self.prioritized {
                    instance
                        .get_typed_func::<Reconcile02, Directives04>(&mut *store, prioritized)
                        .map_err(|e| checked("prioritized.reconcile", e))?;
                }
            }
        }
        self.checked.store(true, Ordering::Release);
        Ok(())
    }

    pub(crate) fn manifest(&self, store: &mut Store<CallState>, instance: Instance) -> wasmtime::Result<Result<Manifest, InvalidOutput>> {
        Ok(match self.minor {
            Minor::V0_1 => from_v0_1::manifest(self.func::<(), Manifest01>(store, instance, &self.manifest).call(store, ())?.0),
            Minor::V0_2 => from_v0_2::manifest(self.func::<(), Manifest02>(store, instance, &self.manifest).call(store, ())?.0),
            Minor::V0_3 => from_v0_3::manifest(self.func::<(), Manifest03>(store, instance, &self.manifest).call(store, ())?.0),
            Minor::V0_4 => from_v0_4::manifest(self.func::<(), Manifest04>(store, instance, &self.manifest).call(store, ())?.0),
        })
    }

    /// `related` is not passed to a 0.1 component (it cannot declare
    /// related kinds, so there are none). A 0.3 component that exports
    /// `desired` answers through it (its applies become [`Action::Apply`]);
    /// a 0.4 component through `prioritized` if it exports it (its low
    /// requeues become [`Action::RequeueLowAfterMs`]), else as a 0.3 one.
    pub(crate) fn reconcile(
        &self,
        store: &mut Store<CallState>,
        instance: Instance,
        parent: &str,
        children: &[String],
        related: &[String],
        now_ms: i64,
    ) -> wasmtime::Result<Reconciled> {
        Ok(match self.minor {
            Minor::V0_1 => match self.func::<Reconcile01, Actions01>(store, instance, &self.reconcile).call(store, (parent, children, now_ms))?.0 {
                Ok(actions) => from_v0_1::actions(actions).map(Ok),
                Err(e) => Ok(Err(from_v0_1::reconcile_error(e))),
            },
            Minor::V0_2 => {
                match self.func::<Reconcile02, Actions02>(store, instance, &self.reconcile).call(store, (parent, children, related, now_ms))?.0 {
                    Ok(actions) => from_v0_2::actions(actions).map(Ok),
                    Err(e) => Ok(Err(from_v0_2::reconcile_error(e))),
                }
            }
            Minor::V0_3 => match &self.desired {
                Some(desired) => {
                    match self.func::<Reconcile02, Steps03>(store, instance, desired).call(store, (parent, children, related, now_ms))?.0 {
                        Ok(steps) => from_v0_3::steps(steps).map(Ok),
                        Err(e) => Ok(Err(from_v0_3::reconcile_error(e))),
                    }
                }
                None => {
                    match self.func::<Reconcile02, Actions03>(store, instance, &self.reconcile).call(store, (parent, children, related, now_ms))?.0 {
                        Ok(actions) => from_v0_3::actions(actions).map(Ok),
                        Err(e) => Ok(Err(from_v0_3::reconcile_error(e))),
                    }
                }
            },
            Minor::V0_4 => self.reconcile_v0_4(store, instance, (parent, children, related, now_ms))?,
        })
    }

    /// A 0.4 component's reconcile through the newest interface it exports.
    fn reconcile_v0_4(&self, store: &mut Store<CallState>, instance: Instance, args: Reconcile02) -> wasmtime::Result<Reconciled> {
        let answer = match (&self.prioritized, &self.desired) {
            (Some(prioritized), _) => {
                self.func::<Reconcile02, Directives04>(store, instance, prioritized).call(store, args)?.0.map(from_v0_4::directives)
            }
            (None, Some(desired)) => self.func::<Reconcile02, Steps04>(store, instance, desired).call(store, args)?.0.map(from_v0_4::steps),
            (None, None) => self.func::<Reconcile02, Actions04>(store, instance, &self.reconcile).call(store, args)?.0.map(from_v0_4::actions),
        };
        Ok(match answer {
            Ok(actions) => actions.map(Ok),
            Err(e) => Ok(Err(from_v0_4::reconcile_error(e))),
        })
    }

    pub(crate) fn validate(
        &self,
        store: &mut Store<CallState>,
        instance: Instance,
        object: &str,
        old: Option<&str>,
    ) -> wasmtime::Result<Vec<FieldError>> {
        Ok(match self.minor {
            Minor::V0_1 => self
                .func::<ValidateArgs, FieldErrors01>(store, instance, &self.validate)
                .call(store, (object, old))?
                .0
                .into_iter()
                .map(from_v0_1::field_error)
                .collect(),
            Minor::V0_2 => self
                .func::<ValidateArgs, FieldErrors02>(store, instance, &self.validate)
                .call(store, (object, old))?
                .0
                .into_iter()
                .map(from_v0_2::field_error)
                .collect(),
            Minor::V0_3 => self
                .func::<ValidateArgs, FieldErrors03>(store, instance, &self.validate)
                .call(store, (object, old))?
                .0
                .into_iter()
                .map(from_v0_3::field_error)
                .collect(),
            Minor::V0_4 => self
                .func::<ValidateArgs, FieldErrors04>(store, instance, &self.validate)
                .call(store, (object, old))?
                .0
                .into_iter()
                .map(from_v0_4::field_error)
                .collect(),
        })
    }

    pub(crate) fn default(&self, store: &mut Store<CallState>, instance: Instance, object: &str) -> wasmtime::Result<Result<String, ReconcileError>> {
        Ok(match self.minor {
            Minor::V0_1 => {
                self.func::<DefaultArgs, Defaulted01>(store, instance, &self.default).call(store, (object,))?.0.map_err(from_v0_1::reconcile_error)
            }
            Minor::V0_2 => {
                self.func::<DefaultArgs, Defaulted02>(store, instance, &self.default).call(store, (object,))?.0.map_err(from_v0_2::reconcile_error)
            }
            Minor::V0_3 => {
                self.func::<DefaultArgs, Defaulted03>(store, instance, &self.default).call(store, (object,))?.0.map_err(from_v0_3::reconcile_error)
            }
            Minor::V0_4 => {
                self.func::<DefaultArgs, Defaulted04>(store, instance, &self.default).call(store, (object,))?.0.map_err(from_v0_4::reconcile_error)
            }
        })
    }

    /// `index`'s function on `instance`, typed as [`Self::check_once`]
    /// checked it. The caller names the signature `check_once` used for the
    /// same function and minor (each method above pairs them, per minor),
    /// on an instance that passed `check_once`.
    fn func<P, R>(&self, store: &mut Store<CallState>, instance: Instance, index: &ComponentExportIndex) -> TypedFunc<P, R>
    where
        P: wasmtime::component::ComponentNamedList + wasmtime::component::Lower,
        R: wasmtime::component::ComponentNamedList + wasmtime::component::Lift,
    {
        let func = instance.get_func(store, index).expect("an instance of the checked build has the checked export");
        // SAFETY: `check_once` type-checked this export at `<P, R>` on an
        // instance of the same `InstancePre` before this one ran; every
        // instance of it has the same types.
        unsafe { TypedFunc::new_unchecked(func) }
    }
}

#[cfg(test)]
mod tests {
    use crate::{CallError, LoadError, Sandbox, SandboxConfig};

    /// A component exporting `operator:plugin/controller@0.2.0` with all
    /// four functions present but typed `func()`, hand-encoded (a core
    /// module with one empty function `f`, lifted once, exported four times).
    fn mistyped_controller() -> Vec<u8> {
        let core_module: &[u8] = &[
            0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // core module header
            0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // type: func() -> ()
            0x03, 0x02, 0x01, 0x00, // function 0 of type 0
            0x07, 0x05, 0x01, 0x01, b'f', 0x00, 0x00, // export "f"
            0x0a, 0x04, 0x01, 0x02, 0x00, 0x0b, // code: empty body
        ];
        let mut c = vec![0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];
        let mut section = |id: u8, body: &[u8]| {
            c.push(id);
            c.push(u8::try_from(body.len()).unwrap());
            c.extend_from_slice(body);
        };
        section(0x01, core_module);
        section(0x02, &[0x01, 0x00, 0x00, 0x00]); // core instance 0 of module 0
        section(0x06, &[0x01, 0x00, 0x00, 0x01, 0x00, 0x01, b'f']); // alias core func "f"
        section(0x07, &[0x01, 0x40, 0x00, 0x01, 0x00]); // type 0: func()
        section(0x08, &[0x01, 0x00, 0x00, 0x00, 0x00, 0x00]); // canon lift core func 0 at type 0
        let mut instance = vec![0x01, 0x01, 0x04];
        for name in ["manifest", "reconcile", "validate", "default"] {
            instance.extend([0x00, name.len() as u8]);
            instance.extend_from_slice(name.as_bytes());
            instance.extend([0x01, 0x00]); // func 0
        }
        section(0x05, &instance);
        let name = b"operator:plugin/controller@0.2.0";
        let mut export = vec![0x01, 0x00, name.len() as u8];
        export.extend_from_slice(name);
        export.extend([0x05, 0x00, 0x00]); // instance 0, no type ascription
        section(0x0b, &export);
        c
    }

    #[test]
    fn exports_of_the_wrong_type_are_refused_before_any_call_runs() {
        let sandbox = Sandbox::new(SandboxConfig::default()).unwrap();
        let err = sandbox.load("mistyped", &mistyped_controller()).unwrap_err();
        let LoadError::ManifestCall { source, .. } = &err else { panic!("expected the first instance's check to fail the load, got {err:?}") };
        let CallError::Instantiate { detail, .. } = &**source else { panic!("expected an instantiation error, got {source:?}") };
        assert!(detail.contains("type-checking export func `manifest`"), "{detail}");
    }
}

//! What a guest imports and exports, read from the component itself (its
//! WIT world, decoded with wit-component), independently of any engine, so
//! that one stub host can be built the same way for both engines.

use anyhow::{Context, Result, bail};
use wit_parser::{Resolve, TypeDefKind, WorldItem, WorldKey};

/// One imported instance (an interface such as `wasi:io/streams@0.2.6`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportedInstance {
    /// The import's name, with its version.
    pub name: String,
    /// The functions, as the component model names them
    /// (`get-stdout`, `[method]output-stream.write`, `[constructor]fields`).
    pub funcs: Vec<String>,
    /// The resource types the interface defines (not those it `use`s).
    pub resources: Vec<String>,
}

/// Everything a guest imports, and the names of its exports.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Imported interfaces.
    pub instances: Vec<ImportedInstance>,
    /// Functions imported at the top level, outside any interface.
    pub root_funcs: Vec<String>,
    /// Resource types imported at the top level.
    pub root_resources: Vec<String>,
    /// Export names (`wasi:cli/run@0.2.6`, …).
    pub exports: Vec<String>,
}

impl Plan {
    /// Reads the WIT world of the component `bytes`.
    pub fn of_component(bytes: &[u8]) -> Result<Plan> {
        let decoded = wit_component::decode(bytes).context("decoding the component's WIT world")?;
        let wit_component::DecodedWasm::Component(resolve, world) = decoded else {
            bail!("this is a WIT package, not a component");
        };
        let world = &resolve.worlds[world];
        let mut plan = Plan::default();
        for (key, item) in &world.imports {
            let name = resolve.name_world_key(key);
            match item {
                WorldItem::Interface { id, .. } => {
                    let iface = &resolve.interfaces[*id];
                    let resources = iface
                        .types
                        .iter()
                        .filter(|(_, ty)| is_resource(&resolve, **ty))
                        .map(|(name, _)| name.clone())
                        .collect();
                    plan.instances.push(ImportedInstance {
                        name,
                        funcs: iface.functions.keys().cloned().collect(),
                        resources,
                    });
                }
                WorldItem::Function(func) => plan.root_funcs.push(func.name.clone()),
                WorldItem::Type { id, .. } => {
                    if is_resource(&resolve, *id) {
                        plan.root_resources.push(name);
                    }
                }
            }
        }
        for key in world.exports.keys() {
            plan.exports.push(match key {
                WorldKey::Name(name) => name.clone(),
                WorldKey::Interface(_) => resolve.name_world_key(key),
            });
        }
        Ok(plan)
    }

    /// The export whose name starts with `prefix` (`wasi:cli/run@`).
    pub fn export(&self, prefix: &str) -> Result<&str> {
        self.exports
            .iter()
            .find(|name| name.starts_with(prefix))
            .map(String::as_str)
            .with_context(|| {
                format!(
                    "the guest has no export `{prefix}…`; it exports {:?}",
                    self.exports
                )
            })
    }

    /// How many functions the guest imports in all.
    pub fn func_count(&self) -> usize {
        self.root_funcs.len() + self.instances.iter().map(|i| i.funcs.len()).sum::<usize>()
    }

    /// How many resource types the guest imports in all.
    pub fn resource_count(&self) -> usize {
        self.root_resources.len()
            + self
                .instances
                .iter()
                .map(|i| i.resources.len())
                .sum::<usize>()
    }
}

fn is_resource(resolve: &Resolve, ty: wit_parser::TypeId) -> bool {
    matches!(resolve.types[ty].kind, TypeDefKind::Resource)
}

/// The interface part of an import name without its version:
/// `wasi:io/streams@0.2.6` → `wasi:io/streams`.
pub fn unversioned(name: &str) -> &str {
    name.split_once('@').map_or(name, |(base, _)| base)
}

/// What a guest's run left in the stub host, compared between engines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Bytes written to stdout.
    pub stdout: Vec<u8>,
    /// Bytes written to stderr.
    pub stderr: Vec<u8>,
    /// Every implemented import called, in order (`interface#function`).
    pub calls: Vec<String>,
    /// For a handler: the status code, body and whether the body was
    /// finished of the response set on the outparam.
    pub response: Option<(u16, Vec<u8>, bool)>,
}
